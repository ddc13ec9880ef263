"""A small asyncio TCP proxy on 127.0.0.1 for fault tests: it forwards bytes between clients and
one upstream address, and on request breaks the path the ways real networks do.

    proxy = TcpProxy("127.0.0.1", broker_port)          # or TcpProxy(..., port=chosen_port)
    await proxy.start()
    proxy.reset_all()                   # RST every open connection now
    proxy.reset_next_request()          # the next client->broker chunk: half of it, then RST
    proxy.half_open()                   # open connections go silent (bytes swallowed, no FIN/RST)
    proxy.latency = 0.5                 # seconds added before forwarding each chunk
    proxy.inject_garbage(b"...")        # once, into the next broker->client chunk
    proxy.heal()                        # forward normally again (silenced connections stay dead)
    await proxy.stop()

``silent_server()`` is a listener that accepts connections and never answers (a hung broker).

Faults are counted in ``proxy.faults`` (kind -> times applied). AIOKAFKA_LITE_TEST_PROXY_TRACE=1
prints each link as it opens and, as it ends, the bytes it carried each way (on stderr).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import socket
import struct
import sys
import time
from collections.abc import AsyncIterator

CHUNK = 65536
TRACE = bool(os.environ.get("AIOKAFKA_LITE_TEST_PROXY_TRACE"))  # each link, and its bytes, on stderr


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream = upstream
        self.silenced = False
        self.tasks: list[asyncio.Task[None]] = []
        self.bytes: collections.Counter[str] = collections.Counter()
        self.trace = ""

    def reset(self) -> None:
        for writer in (self.client, self.upstream):
            _abort_with_rst(writer)


def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError, ValueError):  # uvloop's, once its transport is closed: ValueError
            # Linger 0: close() sends RST instead of FIN, as a crashed middlebox would.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _close_listener(server: asyncio.Server) -> None:
    """server.close(), without CPython's race (gh-109564): a connection accepted in the loop
    iteration before close() gets its transport only in the next one, and then fails to attach to
    the closed server (an AssertionError asyncio swallows), leaving the accepted socket open and
    silent until the garbage collector finds it. So: stop accepting, let the connections accepted
    already get their transports (and their links, which stop() then resets), then close."""
    loop = asyncio.get_running_loop()
    for sock in server.sockets:
        loop.remove_reader(sock.fileno())  # the selector loop's accept callback; uvloop has none here
    await asyncio.sleep(0)
    server.close()


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int, *, port: int = 0) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = port
        self.latency = 0.0
        self.faults: collections.Counter[str] = collections.Counter()
        self.connections = 0
        self._links: set[_Link] = set()
        self._handlers: dict[asyncio.Task[None], asyncio.StreamWriter] = {}  # per accepted connection
        self._server: asyncio.Server | None = None
        self._reset_next_request = False
        self._garbage: bytes | None = None
        self._refuse = False
        self._stopping = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> TcpProxy:
        self._stopping = False
        self._server = await asyncio.start_server(self._on_client, "127.0.0.1", self.port,
                                                  reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self._stopping = True  # a connection accepted but not yet handed over is reset on arrival
        if self._server is not None:
            await _close_listener(self._server)
        # Every connection's handler, including one still connecting upstream: each resets its
        # link as it ends.
        handlers = dict(self._handlers)
        for handler in handlers:
            handler.cancel()
        if handlers:
            await asyncio.wait(handlers)
        for client in handlers.values():  # also the one whose handler was cancelled before it ran
            _abort_with_rst(client)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> TcpProxy:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ faults

    @property
    def listening(self) -> bool:
        """Started and not stopped."""
        return self._server is not None

    @property
    def open_connections(self) -> int:
        return len(self._links)

    def reset_all(self) -> None:
        """RST every open connection, both sides."""
        self.faults["reset"] += 1
        for link in list(self._links):
            link.reset()

    def reset_next_request(self) -> None:
        """The next client->broker chunk is cut in half, then both sides get an RST."""
        self._reset_next_request = True

    def half_open(self) -> None:
        """Every open connection stops forwarding in both directions but stays open: the client
        sees no FIN, no RST, just silence (a dead peer behind a NAT). New connections work."""
        self.faults["half_open"] += 1
        for link in self._links:
            link.silenced = True

    def refuse_new(self, refuse: bool = True) -> None:
        """Accept and immediately RST new connections (a broker port that is down)."""
        self._refuse = refuse

    def inject_garbage(self, data: bytes) -> None:
        """Send ``data`` to the client once, just before the next chunk from the broker."""
        self._garbage = data

    def heal(self) -> None:
        self.latency = 0.0
        self._reset_next_request = False
        self._garbage = None
        self._refuse = False

    # ------------------------------------------------------------------ forwarding

    def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._stopping:
            _abort_with_rst(writer)
            return
        # A task of the proxy's own, not the one asyncio would make for a coroutine callback: stop()
        # cancels it, and Python 3.11 reports a cancelled callback task as an error in a callback.
        handler = asyncio.get_running_loop().create_task(self._serve(reader, writer))
        self._handlers[handler] = writer
        handler.add_done_callback(lambda done: self._handlers.pop(done, None))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refuse:
            self.faults["refused"] += 1
            _abort_with_rst(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            _abort_with_rst(writer)
            return
        except asyncio.CancelledError:  # the proxy is stopping: the client's socket goes too
            _abort_with_rst(writer)
            raise
        self.connections += 1
        link = _Link(writer, up_writer)
        if TRACE:
            link.trace = f"{writer.get_extra_info('peername')} -> {self.upstream}"
            print(f"{time.time():.3f} proxy {self.port}: linked {link.trace}", file=sys.stderr)
        self._links.add(link)
        link.tasks = [asyncio.create_task(self._pump(link, reader, up_writer, to_broker=True)),
                      asyncio.create_task(self._pump(link, up_reader, writer, to_broker=False))]
        try:
            await asyncio.wait(link.tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            link.reset()
            for task in link.tasks:
                task.cancel()
            await asyncio.wait(link.tasks)
            self._links.discard(link)
            if TRACE:
                print(f"{time.time():.3f} proxy {self.port}: ended {link.trace}: {link.bytes}", file=sys.stderr)

    async def _pump(self, link: _Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                    to_broker: bool) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    return  # EOF: the link is torn down by _on_client
                if link.silenced:
                    continue  # swallow: a half-open path neither forwards nor closes
                if self.latency:
                    await asyncio.sleep(self.latency)
                if to_broker and self._reset_next_request:
                    self._reset_next_request = False
                    self.faults["reset_mid_request"] += 1
                    writer.write(data[: max(1, len(data) // 2)])
                    link.reset()
                    return
                if not to_broker and self._garbage is not None:
                    garbage, self._garbage = self._garbage, None
                    self.faults["garbage"] += 1
                    writer.write(garbage)
                writer.write(data)
                link.bytes["to_broker" if to_broker else "to_client"] += len(data)
                await writer.drain()


@contextlib.asynccontextmanager
async def silent_server(accepted: list[asyncio.StreamReader] | None = None) -> AsyncIterator[str]:
    """A loopback listener that accepts connections and never answers. `accepted`, if given,
    gets each connection's reader (a test can see whether the client closed it)."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        if accepted is not None:
            accepted.append(reader)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
