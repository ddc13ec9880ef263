"""Response frames received on a native thread: ``ThreadedFrames`` wires the extension's
``FrameReader`` to an event loop, so the socket path runs on another core than the application.

One process-wide Rust I/O thread serves every reader (epoll; it never holds the GIL): each reader
owns a ``dup`` of its socket, and the thread receives each size-prefixed frame straight into a
buffer of the frame's size and signals that reader's eventfd; the loop's thread, woken
through ``loop.add_reader`` (asyncio and uvloop alike), only takes whole frames. Every state change
stays on the loop: the callbacks run there, in order.

For plaintext sockets only (TLS bytes must go through the loop's ``ssl`` object), and only while the
loop's own transport does not read the socket (the caller pauses its reading). Without the extension,
``available()`` is False and callers keep the asyncio reader.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any, Final

from ..errors import KafkaError, NativeError
from ..protocol import native
from .exceptions import translate
from .frames import end_of_stream, frame_size_error

# The extension's FrameReader, or None (not built, too old, or AIOKAFKA_LITE_NO_NATIVE set).
_FRAME_READER: Final[Any] = getattr(native.extension(), "FrameReader", None)


def available() -> bool:
    """True when the native extension can receive frames on its own thread."""
    return _FRAME_READER is not None


def thread_error(end: tuple[str, int, str], peer: str, max_frame_bytes: int,
                 context: str | None = None) -> KafkaError:
    """The typed error for why the reading thread ended: ``(kind, number, message)`` from Rust.
    ``context`` says what was being read (default: ``reading from {peer}``)."""
    kind, number, message = end
    context = context or f"reading from {peer}"
    # The same words as the loop's read side (frames.py) for the same end.
    if kind == "size":
        return frame_size_error(peer, number, max_frame_bytes)
    if kind == "eof":
        return translate(end_of_stream(mid_frame=number > 0), context)
    if kind == "os":
        return translate(OSError(number, os.strerror(number) if number else message), context)
    return NativeError(f"the frame reader thread failed: {message} (a bug in aiokafka-lite; "
                       "AIOKAFKA_LITE_NO_NATIVE=1 selects the pure-Python path)")


class ThreadedFrames:
    """Frames of ``sock_fd`` received on a native thread, handed to ``on_frame`` on the loop.

    ``on_frame(frame)`` gets each whole frame (without its size prefix) in order: ``bytes`` (copied
    once, on the loop's thread), or with ``zero_copy=True`` a read-only ``memoryview`` of the
    thread's own buffer (no copy; the buffer is freed with its last view). When the thread
    ends (EOF, an OSError, a size outside ``4..=max_frame_bytes``) after the frames completed before
    it, or when ``on_frame`` raises, the reader closes and ``on_error(exc)`` is called once:
    ``KafkaConnectionError``, ``ProtocolDecodeError``, ``NativeError`` or on_frame's exception.
    ``close()`` stops the thread promptly (even when the peer is silent) and drops frames not yet
    handed out; it calls neither callback. Close it before the socket: its ``dup`` of the fd keeps
    the connection open until then.
    """

    def __init__(self, sock_fd: int, loop: asyncio.AbstractEventLoop, on_frame: Callable[[Any], None],
                 on_error: Callable[[Exception], None], max_frame_bytes: int, *,
                 peer: str = "the broker", zero_copy: bool = False,
                 context: Callable[[], str] | None = None) -> None:
        if _FRAME_READER is None:
            raise RuntimeError("the native frame reader is not available (ThreadedFrames needs available())")
        self._reader = _FRAME_READER(sock_fd, max_frame_bytes)
        self._loop = loop
        self._on_frame = on_frame
        self._on_error = on_error
        self._max_frame_bytes = max_frame_bytes
        self._peer = peer
        self._context = context  # what was being read, asked when the thread ends
        self._copy = not zero_copy
        self._notify_fd: int = self._reader.notify_fd()
        self._closed = False
        loop.add_reader(self._notify_fd, self._deliver)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop the thread, close its fds and stop watching them. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if not self._loop.is_closed():
            self._loop.remove_reader(self._notify_fd)
        self._reader.close()

    def _deliver(self) -> None:
        frames, end = self._reader.take(self._copy)
        try:
            for frame in frames:
                if self._closed:  # on_frame closed us: the rest is dropped, as close() says
                    return
                self._on_frame(frame if self._copy else memoryview(frame))
        except Exception as exc:
            self._fail(exc)
            return
        if end is not None and not self._closed:
            context = self._context() if self._context is not None else None
            self._fail(thread_error(end, self._peer, self._max_frame_bytes, context))

    def _fail(self, error: Exception) -> None:
        self.close()
        self._on_error(error)
