"""Garbage mid-stream at the connection level: a fake broker answers a Fetch with junk bytes.

Whatever the junk, the waiting request fails with a typed error (``ProtocolDecodeError`` or, when
the junk ends mid-frame and the broker hangs up, ``KafkaConnectionError``), within the request
timeout, and a connection whose stream is no longer at a frame boundary is closed rather than
reused. A huge announced frame size allocates nothing.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite._net import Connection, ConnectionOptions
from aiokafka_lite.errors import KafkaConnectionError, KafkaTimeoutError, ProtocolDecodeError
from aiokafka_lite.protocol.messages import API_VERSIONS, FETCH, METADATA

from .test_connection import FakeBroker, Peer, hold_open

RANGES = {API_VERSIONS.key: (0, 4), FETCH.key: (4, 12), METADATA.key: (0, 12)}
FETCH_BODY: dict[str, Any] = {"replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1 << 20,
                              "isolation_level": 0, "topics": []}
OPTIONS = ConnectionOptions(request_timeout=2.0)
CASES = {"garbage": 0}


def fetch_answered_with(junk: bytes, *, hang_up: bool) -> Any:
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions(RANGES)
        await peer.read_request()
        await peer.write(junk)
        if hang_up:
            peer.writer.close()
            return
        await hold_open(peer)
    return script


async def _send_fetch_through(junk: bytes, hang_up: bool) -> tuple[BaseException | None, Connection]:
    async with FakeBroker(fetch_answered_with(junk, hang_up=hang_up)) as broker:
        conn = await Connection.open("127.0.0.1", broker.port, OPTIONS, timeout=5.0)
        try:
            try:
                await conn.send(FETCH, 12, FETCH_BODY)
                error: BaseException | None = None
            except Exception as exc:  # judged by the caller
                error = exc
            if hang_up:  # the reader notices the EOF right after the junk
                for _ in range(100):
                    if conn.closed:
                        break
                    await asyncio.sleep(0.01)
            return error, conn
        finally:
            await conn.close()


frames = st.builds(lambda size, body: size.to_bytes(4, "big", signed=True) + body,
                   st.integers(-(2**31), 2**31 - 1) | st.integers(0, 64), st.binary(max_size=64))


@given(junk=st.binary(max_size=80) | frames)
@settings(max_examples=120, deadline=None)
def test_any_junk_answer_fails_the_request_with_a_typed_error(junk: bytes) -> None:
    error, conn = asyncio.run(_send_fetch_through(junk, hang_up=True))
    CASES["garbage"] += 1
    # (None only if the junk happens to be a well-formed Fetch answer to our correlation id.)
    assert error is None or isinstance(error, ProtocolDecodeError | KafkaConnectionError), repr(error)
    assert conn.closed
    assert isinstance(conn.closed_by, ProtocolDecodeError | KafkaConnectionError)


@pytest.mark.asyncio
async def test_junk_frame_with_a_wrong_correlation_id_closes_with_decode_error() -> None:
    junk = b"\x00\x00\x00\x10" + b"\x13\x37\xbe\xef" + b"not a fetch!"
    error, conn = await _send_fetch_through(junk, hang_up=False)
    assert isinstance(error, ProtocolDecodeError), repr(error)
    assert isinstance(conn.closed_by, ProtocolDecodeError)


@pytest.mark.asyncio
async def test_announced_two_gigabyte_frame_closes_without_allocating() -> None:
    tracemalloc.start()
    try:
        error, conn = await _send_fetch_through(b"\x7f\xff\xff\xff" + b"\x00" * 32, hang_up=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(error, ProtocolDecodeError)
    assert "announced a 2147483647-byte" in str(error)
    assert conn.closed
    assert peak < 8 * 1024 * 1024


@pytest.mark.asyncio
async def test_frame_that_never_completes_times_out_within_the_request_timeout() -> None:
    """Junk announcing more bytes than ever arrive: the request is bounded by its timeout."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    error, _conn = await _send_fetch_through(b"\x00\x00\x10\x00" + b"\x00" * 16, hang_up=False)
    assert isinstance(error, KafkaTimeoutError), repr(error)
    assert loop.time() - began < OPTIONS.request_timeout + 2.0  # type: ignore[operator]


async def _silent_after_versions(peer: Peer) -> None:
    await peer.answer_api_versions(RANGES)
    await hold_open(peer)  # reads requests, answers nothing: a half-open path


@pytest.mark.asyncio
async def test_silent_peer_is_dropped_after_a_second_timeout_not_the_first() -> None:
    async with FakeBroker(_silent_after_versions) as broker:
        conn = await Connection.open("127.0.0.1", broker.port, OPTIONS, timeout=5.0)
        try:
            with pytest.raises(KafkaTimeoutError):
                await conn.send(METADATA, 12, {"topics": []}, timeout=0.2)
            assert not conn.closed  # one timeout: maybe just slow, its late answer will be skipped
            with pytest.raises(KafkaTimeoutError):
                await conn.send(METADATA, 12, {"topics": []}, timeout=0.2)
            assert conn.closed  # nothing at all for a whole second request: dead
            with pytest.raises(KafkaConnectionError, match="stopped answering"):
                await conn.send(METADATA, 12, {"topics": []}, timeout=0.2)
        finally:
            await conn.close()
