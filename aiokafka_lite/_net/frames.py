"""The read side of a connection: size-prefixed response frames, each received straight into its own buffer.

An asyncio ``BufferedProtocol`` (plain TCP, TLS and uvloop alike): once a frame's 4-byte size is
in, the transport receives the rest directly into a buffer of exactly that size, so a multi-MB
fetch response is neither grown chunk by chunk nor copied out of a stream buffer. With the native
extension the buffer is the ``bytes`` object the decoders then read (``_native.FrameBuffer``);
without it, a ``bytearray`` copied once into ``bytes`` at the end.

It also carries the write side's flow control (``drain``), as a ``StreamWriter`` would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

from ..errors import ProtocolDecodeError
from ..protocol import native

FrameSink = Callable[[bytes], None]
EndSink = Callable[[BaseException], None]


class _PythonFrame:
    """The pure-Python frame buffer: filled in place, copied once into ``bytes`` by ``take()``."""

    __slots__ = ("_data",)

    def __init__(self, size: int) -> None:
        self._data = bytearray(size)

    def view(self) -> memoryview:
        return memoryview(self._data)

    def take(self) -> bytes:
        return bytes(self._data)


class FrameSizeError(ProtocolDecodeError):
    """A response frame announced outside ``4..=max_frame_bytes``; ``size`` is what was announced
    (its bytes may be something else's: a TLS record's header, see connect_failure)."""

    def __init__(self, message: str, size: int) -> None:
        super().__init__(message)
        self.size = size


def frame_size_error(peer: str, size: int, max_frame_bytes: int) -> FrameSizeError:
    """A response frame announced outside ``4..=max_frame_bytes`` (either read side says it so)."""
    return FrameSizeError(f"{peer} announced a {size}-byte response frame; the limit is "
                          f"{max_frame_bytes} bytes (max_frame_bytes) and the minimum 4", size)


def end_of_stream(mid_frame: bool) -> asyncio.IncompleteReadError:
    """The peer's EOF, as a StreamReader says it: ``translate`` words it by where it came."""
    return asyncio.IncompleteReadError(b"\0" if mid_frame else b"", None)


def _frame_buffer(size: int) -> tuple[Any, memoryview]:
    """A buffer of ``size`` bytes and a writable view of it (native when the extension is loaded)."""
    module = native.active
    if module is not None and hasattr(module, "FrameBuffer"):
        buffer = module.FrameBuffer(size)
        return buffer, memoryview(buffer)
    frame = _PythonFrame(size)
    return frame, frame.view()


class FrameProtocol(asyncio.BufferedProtocol):
    """Frames in, one by one and in order, to ``on_frame``; the end of the stream to ``on_end`` once.

    Until ``attach()`` gives the sinks, what arrives is kept and handed over then.
    """

    def __init__(self, max_frame_bytes: int, name: Callable[[], str]) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._name = name
        self._header = bytearray(4)
        self._header_view = memoryview(self._header)
        self._frame: Any = None  # the buffer being filled, once the size is known
        self._view: memoryview = self._header_view
        self._filled = 0
        self._on_frame: FrameSink | None = None
        self._on_end: EndSink | None = None
        self._early: list[bytes] = []
        self._ended: BaseException | None = None
        self.transport: asyncio.Transport | None = None
        self._lost = asyncio.get_running_loop().create_future()
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []

    def attach(self, on_frame: FrameSink, on_end: EndSink) -> None:
        self._on_frame, self._on_end = on_frame, on_end
        early, self._early = self._early, []
        for frame in early:
            on_frame(frame)
        if self._ended is not None:
            on_end(self._ended)

    # ------------------------------------------------------------------ reading

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport instances, but have its methods.
        self.transport = cast(asyncio.Transport, transport)

    def upgraded_to(self, transport: asyncio.Transport) -> None:
        """The TLS transport loop.start_tls put over the TCP one this protocol was made with."""
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view[self._filled:]

    def buffer_updated(self, nbytes: int) -> None:
        self._filled += nbytes
        if self._filled < len(self._view):
            return
        if self._frame is None:
            self._start_frame()
        else:
            self._finish_frame()

    def _start_frame(self) -> None:
        size = int.from_bytes(self._header, "big", signed=True)
        if size < 4 or size > self._max_frame_bytes:
            # Never allocate what a hostile or confused peer announces.
            self._end(frame_size_error(self._name(), size, self._max_frame_bytes))
            if self.transport is not None:
                self.transport.abort()
            return
        self._frame, self._view = _frame_buffer(size)
        self._filled = 0

    def _finish_frame(self) -> None:
        frame_buffer = self._frame
        self._view.release()
        self._frame, self._view, self._filled = None, self._header_view, 0
        frame = frame_buffer.take()
        if self._on_frame is None:
            self._early.append(frame)
        else:
            self._on_frame(frame)

    def eof_received(self) -> bool:
        # The same words as a StreamReader's: whether the peer stopped inside a frame.
        mid_frame = self._frame is not None or self._filled > 0
        # Told on the next loop step, not from inside this callback: the sink aborts the transport,
        # and a TLS transport calls this in the middle of its own shutdown, which an abort breaks
        # (Python 3.11's asyncio logs "Fatal error: protocol.eof_received() call failed": "cannot
        # switch state from UNWRAPPED to SHUTDOWN").
        self._end(end_of_stream(mid_frame), soon=True)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc if exc is not None else ConnectionResetError("Connection lost"))
        if self._frame is not None:
            self._view.release()
            self._frame = None
        if not self._lost.done():
            self._lost.set_result(None)
        self._wake_writers(exc or ConnectionResetError("Connection lost"))

    def _end(self, error: BaseException, *, soon: bool = False) -> None:
        """Record the end at once (attach() and a later end see it); tell the sink now, or with
        ``soon`` on the next loop step."""
        if self._ended is not None:
            return
        self._ended = error
        if self._on_end is not None:
            if soon:
                asyncio.get_running_loop().call_soon(self._on_end, error)
            else:
                self._on_end(error)

    async def wait_lost(self) -> None:
        """Until the transport reported the connection lost (the socket is released then)."""
        await asyncio.wait([self._lost])

    # ------------------------------------------------------------------ writing

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_writers(None)

    def _wake_writers(self, error: BaseException | None) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                if error is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(error)

    async def drain(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark."""
        if self._lost.done():
            raise ConnectionResetError("Connection lost")
        if not self._write_paused:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(waiter)
        await waiter
