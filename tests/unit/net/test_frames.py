"""frames.py FrameProtocol: response frames received in place, whole and in order, however the
bytes are cut; the end of the stream said once, with whether it came mid-frame. Each test runs with
the native frame buffer and with the pure-Python one."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator

import pytest

from aiokafka_lite._net.frames import FrameProtocol
from aiokafka_lite.errors import ProtocolDecodeError
from aiokafka_lite.protocol import native


@pytest.fixture(params=["native", "python"])
def decoder(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "native" and not native.available():
        pytest.skip(native.why_python())
    before = native.decoder()
    native.use_decoder(request.param)
    yield request.param
    native.use_decoder(before)


def sized(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


class Collected:
    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.ends: list[BaseException] = []


def protocol(limit: int = 1 << 24) -> tuple[FrameProtocol, Collected]:
    frames = FrameProtocol(limit, lambda: "broker test")
    seen = Collected()
    frames.attach(seen.frames.append, seen.ends.append)
    return frames, seen


def feed(frames: FrameProtocol, data: bytes, cuts: list[int] | None = None) -> None:
    """What a transport does: receive into get_buffer()'s view, at most the view's size at a time."""
    pos = 0
    cuts = list(reversed(cuts or []))
    while pos < len(data):
        view = frames.get_buffer(-1)
        step = min(len(view), len(data) - pos, cuts.pop() if cuts else len(data))
        view[:step] = data[pos:pos + step]
        frames.buffer_updated(step)
        pos += step


@pytest.mark.asyncio
async def test_frames_arrive_whole_and_in_order_however_the_bytes_are_cut(decoder: str) -> None:
    rng = random.Random(7)
    bodies = [rng.randbytes(n) for n in (4, 5, 1000, 70_000, 4, 2_000_000)]
    stream = b"".join(sized(b) for b in bodies)
    small = b"".join(sized(b) for b in bodies[:5])
    for data, cuts in ((small, [1]), (small, [3]), (small, [7]), (stream, [4096]), (stream, None),
                       (stream, [rng.randrange(1, 9000) for _ in range(4000)])):
        frames, seen = protocol()
        feed(frames, data, (cuts * len(data)) if cuts and len(cuts) == 1 else cuts)
        bodies_sent = bodies if data is stream else bodies[:5]
        assert seen.frames == bodies_sent
        assert all(type(f) is bytes for f in seen.frames)
        assert seen.ends == []


@pytest.mark.asyncio
async def test_frames_before_attach_are_handed_over_then(decoder: str) -> None:
    frames = FrameProtocol(1 << 20, lambda: "broker test")
    feed(frames, sized(b"early") + sized(b"also"))
    frames.eof_received()
    seen = Collected()
    frames.attach(seen.frames.append, seen.ends.append)
    assert seen.frames == [b"early", b"also"]
    assert len(seen.ends) == 1


@pytest.mark.parametrize(("tail", "mid_frame"), [(b"", False), (b"\x00\x00", True), (sized(b"abcdef")[:7], True)])
@pytest.mark.asyncio
async def test_the_end_says_whether_it_came_mid_frame(decoder: str, tail: bytes, mid_frame: bool) -> None:
    frames, seen = protocol()
    feed(frames, sized(b"whole") + tail)
    frames.eof_received()
    frames.connection_lost(None)
    await asyncio.sleep(0)  # the end of the stream is told on the next loop step
    assert seen.frames == [b"whole"]
    [end] = seen.ends
    assert isinstance(end, asyncio.IncompleteReadError)
    assert bool(end.partial) is mid_frame


@pytest.mark.parametrize("size", [3, -1, (1 << 20) + 1])
@pytest.mark.asyncio
async def test_an_announced_size_out_of_bounds_ends_the_stream(decoder: str, size: int) -> None:
    frames, seen = protocol(limit=1 << 20)
    feed(frames, size.to_bytes(4, "big", signed=True))
    [end] = seen.ends
    assert isinstance(end, ProtocolDecodeError)
    assert f"announced a {size}-byte response frame" in str(end)
    assert "limit is 1048576 bytes (max_frame_bytes)" in str(end)


@pytest.mark.asyncio
async def test_a_lost_connection_fails_a_waiting_drain(decoder: str) -> None:
    frames, seen = protocol()
    frames.pause_writing()
    waiting = asyncio.ensure_future(frames.drain())
    await asyncio.sleep(0)
    frames.connection_lost(ConnectionResetError("reset by peer"))
    with pytest.raises(ConnectionResetError):
        await waiting
    with pytest.raises(ConnectionResetError):
        await frames.drain()
    assert [type(e) for e in seen.ends] == [ConnectionResetError]
    await frames.wait_lost()


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_a_real_transport_delivers_frames_on_asyncio_and_uvloop(loop_kind: str) -> None:
    """Through loop.create_connection: uvloop's transports are not asyncio.Transport instances."""
    uvloop = pytest.importorskip("uvloop") if loop_kind == "uvloop" else None

    async def scenario() -> list[object]:
        async def serve(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(sized(b"hello") + sized(b"x" * 300_000) + sized(b"last"))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        seen = Collected()
        _transport, frames = await asyncio.get_running_loop().create_connection(
            lambda: FrameProtocol(1 << 20, lambda: "broker test"), "127.0.0.1", port)
        frames.attach(seen.frames.append, seen.ends.append)
        async with asyncio.timeout(10):
            await frames.wait_lost()
        server.close()
        await server.wait_closed()
        return [*seen.frames, *(type(e) for e in seen.ends)]

    result = uvloop.run(scenario()) if uvloop is not None else asyncio.run(scenario())
    assert result == [b"hello", b"x" * 300_000, b"last", asyncio.IncompleteReadError]


@pytest.mark.asyncio
async def test_the_end_is_told_after_eof_received_returns(decoder: str) -> None:
    # Not from inside the callback: a TLS transport calls it mid-shutdown, and the sink aborts the
    # transport (CI: "Fatal error: protocol.eof_received() call failed" on Python 3.11).
    frames, seen = protocol()
    frames.eof_received()
    assert seen.ends == []
    await asyncio.sleep(0)
    assert len(seen.ends) == 1
