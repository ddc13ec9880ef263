"""ThreadedFrames and the native FrameReader: whole frames, in order, on asyncio and uvloop.

Each test runs a real loop over a socketpair (or loopback TCP for a reset); the peer writes with
``loop.sock_sendall`` so no executor thread muddles the thread counts.
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

from aiokafka_lite._net import frame_thread
from aiokafka_lite._net.frame_thread import ThreadedFrames
from aiokafka_lite.errors import KafkaConnectionError, NativeError, ProtocolDecodeError
from tests.decoders import require_native
from tests.unit.net.frame_pool import io_threads, pool_size


@pytest.fixture(autouse=True)
def frame_reader_built() -> None:
    """Skipped without a Rust toolchain; an extension built before FrameReader existed fails."""
    require_native()
    if not frame_thread.available():
        pytest.fail("the native extension has no FrameReader (an old build): rebuild it", pytrace=False)


LIMIT = 8 * 1024 * 1024 + 64
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


@pytest.fixture(params=["asyncio", "uvloop"])
def loop_factory(request: pytest.FixtureRequest) -> LoopFactory:
    if request.param == "asyncio":
        return asyncio.new_event_loop
    uvloop = pytest.importorskip("uvloop")
    factory: LoopFactory = uvloop.new_event_loop
    return factory


def run(factory: LoopFactory, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main())


def threads_become(expected: int) -> bool:
    """Whether io_threads() reaches ``expected`` within a second (a new thread names itself as it starts)."""
    deadline = time.monotonic() + 1.0
    while io_threads() != expected and time.monotonic() < deadline:
        time.sleep(0.001)
    return io_threads() == expected


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    peer.setblocking(False)
    yield ours, peer
    ours.close()
    peer.close()


class Received:
    """What the callbacks got, and a way to wait for it."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.errors: list[Exception] = []
        self.events: list[str] = []
        self.changed = asyncio.Event()

    def on_frame(self, frame: bytes) -> None:
        self.frames.append(frame)
        self.events.append("frame")
        self.changed.set()

    def on_error(self, exc: Exception) -> None:
        self.errors.append(exc)
        self.events.append("error")
        self.changed.set()

    async def until(self, done: Callable[[], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not done():
                self.changed.clear()
                await self.changed.wait()

    def start(self, sock: socket.socket, limit: int = LIMIT, *, zero_copy: bool = False) -> ThreadedFrames:
        return ThreadedFrames(sock.fileno(), asyncio.get_running_loop(), self.on_frame, self.on_error, limit,
                              peer="broker 1 (test)", zero_copy=zero_copy)


def test_frames_from_4_bytes_to_8_mb_arrive_whole_and_in_order(loop_factory: LoopFactory, pair: Any) -> None:
    ours, peer = pair
    rng = random.Random(1)
    sizes = [4, 5, 7, 100, 4096, 65_537, 1024 * 1024, 8 * 1024 * 1024, 4]
    payloads = [rng.randbytes(size) for size in sizes]

    async def main() -> None:
        got = Received()
        frames = got.start(ours)
        for payload in payloads:
            await asyncio.get_running_loop().sock_sendall(peer, framed(payload))
        await got.until(lambda: len(got.frames) == len(payloads))
        frames.close()
        assert got.frames == payloads
        assert all(type(frame) is bytes for frame in got.frames)
        assert got.errors == []

    run(loop_factory, main)


def test_zero_copy_frames_are_read_only_views_that_outlive_the_reader(loop_factory: LoopFactory,
                                                                     pair: Any) -> None:
    ours, peer = pair
    payloads = [b"abcd", random.Random(3).randbytes(3 * 1024 * 1024), b"efgh"]

    async def main() -> None:
        got = Received()
        frames = got.start(ours, zero_copy=True)
        await asyncio.get_running_loop().sock_sendall(peer, b"".join(framed(p) for p in payloads))
        await got.until(lambda: len(got.frames) == len(payloads))
        frames.close()
        views: list[Any] = got.frames
        assert all(type(view) is memoryview and view.readonly for view in views)
        assert [bytes(view) for view in views] == payloads
        with pytest.raises(TypeError):
            views[0][0] = 1

    run(loop_factory, main)


def test_a_frame_split_across_many_small_writes_with_pauses(loop_factory: LoopFactory, pair: Any) -> None:
    ours, peer = pair
    payload = random.Random(2).randbytes(20_000)
    data = framed(payload)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        got = Received()
        frames = got.start(ours)
        cuts = [1, 2, 3, 4, 5, 9, 100, 101, 5000, 12_345, 19_999, len(data) - 1, len(data)]
        start = 0
        for cut in cuts:
            await loop.sock_sendall(peer, data[start:cut])
            start = cut
            await asyncio.sleep(0.005)
            if cut < len(data):
                assert got.frames == []  # nothing handed out before the frame is whole
        await got.until(lambda: len(got.frames) == 1)
        frames.close()
        assert got.frames == [payload]

    run(loop_factory, main)


def test_several_frames_in_one_write(loop_factory: LoopFactory, pair: Any) -> None:
    ours, peer = pair
    payloads = [bytes([n]) * (4 + n) for n in range(50)]

    async def main() -> None:
        got = Received()
        frames = got.start(ours)
        await asyncio.get_running_loop().sock_sendall(peer, b"".join(framed(p) for p in payloads))
        await got.until(lambda: len(got.frames) == len(payloads))
        frames.close()
        assert got.frames == payloads

    run(loop_factory, main)


def test_eof_after_frames_hands_the_frames_first_then_one_error(loop_factory: LoopFactory, pair: Any) -> None:
    ours, peer = pair

    async def main() -> None:
        got = Received()
        frames = got.start(ours)
        await asyncio.get_running_loop().sock_sendall(peer, framed(b"abcd") + framed(b"efghij"))
        peer.shutdown(socket.SHUT_WR)
        await got.until(lambda: bool(got.errors))
        await asyncio.sleep(0.05)  # no second error
        assert got.events == ["frame", "frame", "error"]
        assert got.frames == [b"abcd", b"efghij"]
        (error,) = got.errors
        assert isinstance(error, KafkaConnectionError)
        assert str(error) == "reading from broker 1 (test): the broker closed the connection (between frames)"
        assert frames.closed
        frames.close()

    run(loop_factory, main)


@pytest.mark.parametrize("tail", [b"\x00\x00", b"\x00\x00\x00\x10abc"], ids=["in-size", "in-body"])
def test_eof_in_the_middle_of_a_frame(loop_factory: LoopFactory, pair: Any, tail: bytes) -> None:
    ours, peer = pair

    async def main() -> None:
        got = Received()
        got.start(ours)
        await asyncio.get_running_loop().sock_sendall(peer, framed(b"whole") + tail)
        peer.shutdown(socket.SHUT_WR)
        await got.until(lambda: bool(got.errors))
        assert got.events == ["frame", "error"]
        assert got.frames == [b"whole"]
        assert isinstance(got.errors[0], KafkaConnectionError)
        assert "(mid-frame)" in str(got.errors[0])

    run(loop_factory, main)


@pytest.mark.parametrize("size", [1001, 2**31 - 1, 3, 0, -1, -(2**31)])
def test_a_size_outside_4_to_the_limit_is_a_protocol_error(loop_factory: LoopFactory, pair: Any,
                                                            size: int) -> None:
    ours, peer = pair

    async def main() -> None:
        got = Received()
        got.start(ours, limit=1000)
        await asyncio.get_running_loop().sock_sendall(peer, framed(b"fine") + struct.pack(">i", size) + b"x" * 10)
        await got.until(lambda: bool(got.errors))
        assert got.events == ["frame", "error"]
        (error,) = got.errors
        assert isinstance(error, ProtocolDecodeError)
        assert str(error) == (f"broker 1 (test) announced a {size}-byte response frame; the limit is "
                              "1000 bytes (max_frame_bytes) and the minimum 4")

    run(loop_factory, main)


def test_a_reset_connection_is_a_connection_error(loop_factory: LoopFactory) -> None:
    async def main() -> None:
        with socket.create_server(("127.0.0.1", 0)) as server:
            client = socket.create_connection(server.getsockname())
            accepted, _ = server.accept()
        client.setblocking(False)
        got = Received()
        got.start(client)
        accepted.sendall(framed(b"last"))
        accepted.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        accepted.close()  # RST
        await got.until(lambda: bool(got.errors))
        client.close()
        assert got.frames == [b"last"]
        (error,) = got.errors
        assert isinstance(error, KafkaConnectionError)
        assert str(error) == "reading from broker 1 (test): Connection reset by peer"
        assert isinstance(error.__cause__, ConnectionResetError)

    run(loop_factory, main)


def test_close_while_the_peer_is_silent_returns_within_a_second(loop_factory: LoopFactory, pair: Any) -> None:
    ours, peer = pair

    async def main() -> None:
        got = Received()
        frames = got.start(ours)
        await asyncio.get_running_loop().sock_sendall(peer, b"\x00\x00\x00\x08half")  # waits mid-frame
        await asyncio.sleep(0.1)
        started = time.monotonic()
        frames.close()
        assert time.monotonic() - started < 1.0
        frames.close()  # twice: nothing more happens
        await asyncio.sleep(0.05)
        assert got.events == []

    run(loop_factory, main)


def test_frames_are_received_while_the_loops_thread_is_blocked(loop_factory: LoopFactory, pair: Any) -> None:
    """The point of the thread: the loop's thread blocks in sendall of 8 MB, far more than a
    socketpair buffers, and that returns only because the reader thread keeps receiving."""
    ours, peer = pair
    payload = random.Random(5).randbytes(8 * 1024 * 1024)

    async def main() -> None:
        got = Received()
        frames = got.start(ours)
        peer.settimeout(10)
        peer.sendall(framed(payload) * 2)  # blocking, on the loop's thread
        await got.until(lambda: len(got.frames) == 2)
        frames.close()
        assert got.frames == [payload, payload]

    run(loop_factory, main)


def test_close_during_a_long_transfer_returns_within_a_second(loop_factory: LoopFactory, pair: Any) -> None:
    ours, peer = pair
    chunk = framed(bytes(4 * 1024 * 1024))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        got = Received()
        frames = got.start(ours)

        async def flood() -> None:
            while True:
                await loop.sock_sendall(peer, chunk)

        sender = asyncio.create_task(flood())
        await got.until(lambda: len(got.frames) >= 2)
        started = time.monotonic()
        frames.close()
        assert time.monotonic() - started < 1.0
        sender.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sender
        assert got.errors == []

    run(loop_factory, main)


def test_close_twice_and_no_callbacks_after_close(loop_factory: LoopFactory, pair: Any) -> None:
    ours, peer = pair

    async def main() -> None:
        got = Received()
        frames = got.start(ours)
        frames.close()
        frames.close()
        assert frames.closed
        await asyncio.get_running_loop().sock_sendall(peer, framed(b"late"))
        peer.shutdown(socket.SHUT_WR)
        await asyncio.sleep(0.05)
        assert got.events == []

    run(loop_factory, main)


def test_an_exception_from_on_frame_closes_and_goes_to_on_error(loop_factory: LoopFactory, pair: Any) -> None:
    ours, peer = pair
    problem = ProtocolDecodeError("answered the wrong correlation id")

    async def main() -> None:
        got = Received()

        def on_frame(frame: bytes) -> None:
            got.on_frame(frame)
            raise problem

        frames = ThreadedFrames(ours.fileno(), asyncio.get_running_loop(), on_frame, got.on_error, LIMIT)
        await asyncio.get_running_loop().sock_sendall(peer, framed(b"one!") + framed(b"two!"))
        await got.until(lambda: bool(got.errors))
        await asyncio.sleep(0.05)
        assert got.events == ["frame", "error"]
        assert got.errors == [problem]
        assert frames.closed

    run(loop_factory, main)


def test_no_thread_is_left_behind(loop_factory: LoopFactory) -> None:
    async def main() -> None:
        python_threads = threading.active_count()
        pairs = [socket.socketpair() for _ in range(4)]
        got = Received()
        readers = [got.start(ours) for ours, _ in pairs]
        # 4 readers: one on each reactor of the pool (at most 4), each with its thread.
        assert threads_become(min(4, pool_size()))
        pairs[0][1].close()  # one thread ends by itself (EOF) before close()
        await got.until(lambda: bool(got.errors))
        for reader in readers:
            reader.close()
        for ours, peer in pairs:
            ours.close()
            peer.close()
        assert threads_become(min(4, pool_size()))  # they stay for the process, idle in epoll_wait
        assert threading.active_count() == python_threads

    run(loop_factory, main)


def test_a_dropped_reader_stops_its_thread_and_keeps_the_callers_socket(pair: Any) -> None:
    ours, peer = pair
    reader_class: Any = frame_thread._FRAME_READER
    before = io_threads()  # earlier tests' reactors stay, with no reader left
    reader = reader_class(ours.fileno(), 100)
    assert threads_become(max(before, 1))  # the first slot's reactor: started only if it was not
    del reader
    gc.collect()
    assert threads_become(max(before, 1))  # it stays, idle (test_frame_reactor checks the dup is closed)
    peer.sendall(b"still")  # the reader closed its dup, not the caller's socket
    assert ours.recv(5) == b"still"


def test_fuzz_random_frames_and_random_split_points(loop_factory: LoopFactory, pair: Any) -> None:
    ours, peer = pair
    rng = random.Random(24)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        got = Received()
        frames = got.start(ours)
        expected: list[bytes] = []
        for _ in range(20):
            payloads = [rng.randbytes(rng.choice([4, rng.randint(4, 64), rng.randint(4, 70_000)]))
                        for _ in range(rng.randint(1, 12))]
            data = b"".join(framed(p) for p in payloads)
            cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(0, 30))))
            for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
                await loop.sock_sendall(peer, data[start:end])
                if rng.random() < 0.2:
                    await asyncio.sleep(0)
            expected += payloads
        await got.until(lambda: len(got.frames) == len(expected))
        frames.close()
        assert got.frames == expected
        assert got.errors == []

    run(loop_factory, main)


def test_thread_errors_are_typed() -> None:
    assert isinstance(frame_thread.thread_error(("native", 0, "boom"), "b", 10), NativeError)
    error = frame_thread.thread_error(("os", 104, "Connection reset by peer (os error 104)"), "b", 10)
    assert isinstance(error, KafkaConnectionError)


def test_max_frame_bytes_under_4_is_refused(pair: Any) -> None:
    reader_class: Any = frame_thread._FRAME_READER
    with pytest.raises(ValueError, match="at least 4"):
        reader_class(pair[0].fileno(), 3)


def test_a_bad_fd_is_an_oserror() -> None:
    reader_class: Any = frame_thread._FRAME_READER
    with pytest.raises(OSError, match="Bad file descriptor"):
        reader_class(-1, 100)


@pytest.mark.parametrize(("switch", "expected"), [("1", "False"), ("0", "True")])
def test_no_native_in_the_environment_means_not_available(switch: str, expected: str) -> None:
    # Decided at import, with the record decoder (protocol/native.py): a process of its own.
    done = subprocess.run([sys.executable, "-c", "from aiokafka_lite._net import frame_thread; "
                           "print(frame_thread.available())"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "AIOKAFKA_LITE_NO_NATIVE": switch}, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected
