"""The I/O shell against an in-process fake broker on 127.0.0.1 that scripts bytes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite._net import Cluster, Connection, ConnectionOptions
from aiokafka_lite._net import connection as connection_module
from aiokafka_lite._net.backoff import Backoff
from aiokafka_lite._net.exceptions import MisroutedConnectionError, map_exceptions, translate
from aiokafka_lite._net.negotiation import IntendedBroker
from aiokafka_lite._net.sasl import Plain, Scram, saslname
from aiokafka_lite._net.tls import build_ssl_context
from aiokafka_lite.errors import (
    AuthenticationError,
    BrokerError,
    ConfigError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProtocolDecodeError,
    UnsupportedVersionError,
)
from aiokafka_lite.protocol.api import Api, decode_request, encode_response
from aiokafka_lite.protocol.messages import (
    API_VERSIONS,
    APIS_BY_KEY,
    FIND_COORDINATOR,
    METADATA,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
)
from aiokafka_lite.structs import TopicPartition

# ---------------------------------------------------------------------------- the fake broker

BROKER_RANGES = {API_VERSIONS.key: (0, 4), METADATA.key: (0, 12), FIND_COORDINATOR.key: (0, 4),
                 SASL_HANDSHAKE.key: (0, 1), SASL_AUTHENTICATE.key: (0, 2)}


class Peer:
    """The broker's side of one client connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def read_request(self) -> tuple[Api, int, int, dict[str, Any]]:
        size = int.from_bytes(await self.reader.readexactly(4), "big")
        frame = await self.reader.readexactly(size)
        api = APIS_BY_KEY[int.from_bytes(frame[0:2], "big")]
        version, correlation_id, body = decode_request(api, frame)
        return api, version, correlation_id, body

    async def respond(self, api: Api, version: int, correlation_id: int, body: dict[str, Any]) -> None:
        self.writer.write(encode_response(api, version, correlation_id, body))
        await self.writer.drain()

    async def write(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def answer_api_versions(self, ranges: dict[int, tuple[int, int]] | None = None) -> int:
        api, version, cid, _ = await self.read_request()
        assert api is API_VERSIONS
        table = BROKER_RANGES if ranges is None else ranges
        keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in table.items()]
        await self.respond(API_VERSIONS, version, cid, {"error_code": 0, "api_keys": keys})
        return version


Script = Callable[[Peer], Awaitable[None]]


class FakeBroker:
    """Runs ``script`` for each accepted connection; stops and reaps everything on exit."""

    def __init__(self, script: Script, tls: ssl.SSLContext | None = None) -> None:
        self.script = script
        self.tls = tls
        self.port = 0
        self.connections = 0
        self.errors: list[BaseException] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> FakeBroker:
        self._server = await asyncio.start_server(self._on_client, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.append(writer)
        self.connections += 1
        try:
            await self.script(Peer(reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away: fine for a fake
        except Exception as exc:  # surfaced by the test through .errors
            self.errors.append(exc)

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        # A script waiting on its connection ends on the abort; cancel only one that does not.
        # (A cancelled handler makes Python 3.11's start_server log an "Exception in callback".)
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=2.0)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        await self._server.wait_closed()


async def hold_open(peer: Peer) -> None:
    """After the script's work: keep the connection until the client closes it."""
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
        await peer.reader.read()


def metadata_answer(marker: str) -> dict[str, Any]:
    return {"brokers": [], "cluster_id": marker, "controller_id": 1, "topics": []}


async def echo_metadata(peer: Peer) -> None:
    """Answer every Metadata request with the first requested topic name as cluster id."""
    await peer.answer_api_versions()
    while True:
        api, version, cid, body = await peer.read_request()
        await peer.respond(api, version, cid, metadata_answer(body["topics"][0]["name"]))


def meta_body(name: str) -> dict[str, Any]:
    return {"topics": [{"name": name}]}


OPTIONS = ConnectionOptions(request_timeout=5.0)


@contextlib.asynccontextmanager
async def connected(script: Script, options: ConnectionOptions = OPTIONS) -> AsyncIterator[
        tuple[FakeBroker, Connection]]:
    async with FakeBroker(script) as broker:
        conn = await Connection.open("127.0.0.1", broker.port, options, timeout=5.0)
        try:
            yield broker, conn
        finally:
            await conn.close()
        assert not broker.errors, broker.errors


# ---------------------------------------------------------------------------- negotiation

@pytest.mark.asyncio
async def test_open_negotiates_versions_and_names_the_client() -> None:
    seen: list[tuple[int, dict[str, Any]]] = []

    async def script(peer: Peer) -> None:
        api, version, cid, body = await peer.read_request()
        seen.append((version, body))
        keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in BROKER_RANGES.items()]
        await peer.respond(api, version, cid, {"error_code": 0, "api_keys": keys})
        await hold_open(peer)

    async with connected(script) as (_, conn):
        # Opened alone (as a bootstrap connection): no cluster nor node named (KIP-1242).
        assert seen == [(5, {"client_software_name": "aiokafka-lite",
                             "client_software_version": OPTIONS.client_software_version,
                             "cluster_id": None, "node_id": -1})]
        assert conn.version_for(METADATA) == 12
        assert conn.version_for(METADATA, client_max=9) == 9
        assert conn.version_for(FIND_COORDINATOR) == 4
        assert conn.api_versions_version == 5
        with pytest.raises(UnsupportedVersionError, match="does not support Fetch"):
            conn.version_for(APIS_BY_KEY[1])


@pytest.mark.parametrize(("listed", "expected_retry"), [(None, 0), ((0, 2), 2)])
@pytest.mark.asyncio
async def test_unsupported_api_versions_version_falls_back(listed: tuple[int, int] | None,
                                                          expected_retry: int) -> None:
    versions: list[int] = []

    async def script(peer: Peer) -> None:
        _api, version, cid, _ = await peer.read_request()
        versions.append(version)
        keys = [] if listed is None else [{"api_key": 18, "min_version": listed[0], "max_version": listed[1]}]
        # KIP-511: an UNSUPPORTED_VERSION answer is encoded as v0 whatever was asked.
        await peer.respond(API_VERSIONS, 0, cid, {"error_code": 35, "api_keys": keys})
        versions.append(await peer.answer_api_versions())
        await hold_open(peer)

    async with connected(script) as (_, conn):
        assert versions == [5, expected_retry]
        assert conn.api_versions_version == expected_retry
        assert conn.version_for(METADATA) == 12


@pytest.mark.asyncio
async def test_undecodable_unsupported_version_answer_retries_at_v0() -> None:
    versions: list[int] = []

    async def script(peer: Peer) -> None:
        _api, version, cid, _ = await peer.read_request()
        versions.append(version)
        # What librdkafka's mock cluster sends: error 35, then a body that is not valid v0.
        body = bytes.fromhex("0023 01 0012 0000 0002 00000000")
        await peer.write((4 + len(body)).to_bytes(4, "big") + cid.to_bytes(4, "big") + body)
        versions.append(await peer.answer_api_versions())
        await hold_open(peer)

    async with connected(script) as (_, conn):
        assert versions == [5, 0]
        assert conn.version_for(METADATA) == 12


# ---------------------------------------------------------------------------- pipelining

def _refuses_other_clusters(seen: list[tuple[int, dict[str, Any]]], *, max_version: int = 5) -> Script:
    """A Kafka 4.4 broker of cluster "B" (node 1) as KIP-1242 has it check ApiVersions v5; an older
    one (``max_version``) refuses v5 as KIP-511 says."""
    async def script(peer: Peer) -> None:
        while True:
            _api, version, cid, body = await peer.read_request()
            seen.append((version, body))
            if version > max_version:
                keys = [{"api_key": 18, "min_version": 0, "max_version": max_version}]
                await peer.respond(API_VERSIONS, 0, cid, {"error_code": 35, "api_keys": keys})
            elif version >= 5 and body["cluster_id"] is not None and (body["cluster_id"], body["node_id"]) != ("B", 1):
                await peer.respond(API_VERSIONS, version, cid, {"error_code": 129, "api_keys": []})
            else:
                keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in BROKER_RANGES.items()]
                await peer.respond(API_VERSIONS, version, cid, {"error_code": 0, "api_keys": keys})
                await hold_open(peer)
                return
    return script


@pytest.mark.asyncio
async def test_a_connection_meant_for_another_cluster_is_refused_as_misrouted() -> None:
    seen: list[tuple[int, dict[str, Any]]] = []
    async with FakeBroker(_refuses_other_clusters(seen)) as broker:
        with pytest.raises(MisroutedConnectionError) as refused:
            await Connection.open("127.0.0.1", broker.port, OPTIONS, node_id=1, timeout=5.0,
                                  intended=IntendedBroker("A", 1))
        # Said as it is, not as "closed the connection when asked for its API versions".
        assert str(refused.value) == (f"broker 127.0.0.1:{broker.port} (node 1) is not of cluster 'A': it answered "
                                      "ApiVersions with REBOOTSTRAP_REQUIRED (KIP-1242)")
        assert isinstance(refused.value, KafkaConnectionError)  # retried by every caller, never fatal
        assert (refused.value.expected, refused.value.found) == ("A", None)
        conn = await Connection.open("127.0.0.1", broker.port, OPTIONS, node_id=1, timeout=5.0,
                                     intended=IntendedBroker("B", 1))
        await conn.close()
    assert [(v, b["cluster_id"], b["node_id"]) for v, b in seen] == [(5, "A", 1), (5, "B", 1)]


@pytest.mark.asyncio
async def test_a_broker_before_v5_gets_the_v4_request_and_is_not_checked() -> None:
    seen: list[tuple[int, dict[str, Any]]] = []
    async with FakeBroker(_refuses_other_clusters(seen, max_version=4)) as broker:
        conn = await Connection.open("127.0.0.1", broker.port, OPTIONS, node_id=1, timeout=5.0,
                                     intended=IntendedBroker("A", 1))
        assert conn.api_versions_version == 4
        await conn.close()
    assert [v for v, _ in seen] == [5, 4]  # v4 has no room for the names (the bytes: test_messages.py)


@pytest.mark.asyncio
async def test_three_requests_in_flight_are_matched_to_their_responses() -> None:
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        requests = [await peer.read_request() for _ in range(3)]  # all three before any answer
        for api, version, cid, body in requests:
            await peer.respond(api, version, cid, metadata_answer(body["topics"][0]["name"]))
        await hold_open(peer)

    async with connected(script) as (_, conn):
        answers = await asyncio.gather(*(conn.send(METADATA, 12, meta_body(n)) for n in ("a", "b", "c")))
        assert [a["cluster_id"] for a in answers] == ["a", "b", "c"]


@pytest.mark.asyncio
async def test_without_a_reader_thread_to_spare_the_loop_receives(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_thread(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(connection_module, "ThreadedFrames", no_thread)

    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        api, version, cid, body = await peer.read_request()
        await peer.respond(api, version, cid, metadata_answer(body["topics"][0]["name"]))
        await hold_open(peer)

    async with connected(script) as (_, conn):
        assert (await conn.send(METADATA, 12, meta_body("a")))["cluster_id"] == "a"


@pytest.mark.asyncio
async def test_a_failed_hand_over_to_the_reader_thread_closes_the_connection(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hand-over that fails otherwise than for want of a thread (a bug: open() raises it) leaves
    no connection open behind it, paused and with nobody to close it."""
    def broken_thread(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("the reader thread failed to start")

    monkeypatch.setattr(connection_module, "frame_thread_available", lambda: True)
    monkeypatch.setattr(connection_module, "ThreadedFrames", broken_thread)
    closed_by_client = asyncio.Event()

    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        await hold_open(peer)
        closed_by_client.set()

    async with FakeBroker(script) as broker:
        with pytest.raises(RuntimeError, match="failed to start"):
            await Connection.open("127.0.0.1", broker.port, OPTIONS, timeout=5.0)
        # before the fix: the connection stayed open
        await asyncio.wait_for(closed_by_client.wait(), timeout=2.0)


@pytest.mark.asyncio
async def test_cancelled_request_late_response_is_dropped() -> None:
    release = asyncio.Event()

    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        first = await peer.read_request()
        await release.wait()
        second = await peer.read_request()
        for api, version, cid, body in (first, second):
            await peer.respond(api, version, cid, metadata_answer(body["topics"][0]["name"]))
        await hold_open(peer)

    async with connected(script) as (_, conn):
        doomed = asyncio.create_task(conn.send(METADATA, 12, meta_body("doomed")))
        await asyncio.sleep(0.05)
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        release.set()
        answer = await conn.send(METADATA, 12, meta_body("next"))
        assert answer["cluster_id"] == "next"
        assert not conn.closed


@pytest.mark.asyncio
async def test_timed_out_request_fails_in_time_and_connection_stays_usable() -> None:
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        slow = await peer.read_request()
        fast = await peer.read_request()  # only answer the slow one once the next is in
        for api, version, cid, body in (slow, fast):
            await peer.respond(api, version, cid, metadata_answer(body["topics"][0]["name"]))
        await hold_open(peer)

    async with connected(script) as (_, conn):
        began = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=r"Metadata v12 .* within 0\.200s"):
            await conn.send(METADATA, 12, meta_body("slow"), timeout=0.2)
        # 1 ms of grace below: uvloop's timers fire on a millisecond clock, up to half a ms early by
        # time.monotonic() (tests/unit/fetch/test_fetcher_uvloop_timers.py shows it).
        assert 0.2 - 0.001 <= time.monotonic() - began < 0.2 + 0.15
        assert (await conn.send(METADATA, 12, meta_body("fast")))["cluster_id"] == "fast"


@pytest.mark.asyncio
async def test_a_close_mid_answer_names_the_request_and_where_the_stream_stopped() -> None:
    # The same words whichever read side runs (a native reader thread on plaintext, else the loop's).
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        await peer.read_request()
        await peer.write(b"\x00\x00\x00\x40\x00\x00")  # half a frame, then EOF
        peer.writer.close()

    async with connected(script) as (_, conn):
        with pytest.raises(KafkaConnectionError) as failed:
            await conn.send(METADATA, 12, meta_body("a"))
        assert str(failed.value) == (f"reading from {conn} awaiting Metadata v12: the broker closed the "
                                     "connection (mid-frame)")


@pytest.mark.asyncio
async def test_reset_mid_request_fails_every_in_flight_request() -> None:
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        for _ in range(3):
            await peer.read_request()
        await peer.write(b"\x00\x00\x00\x40\x00\x00")  # half a frame, then the connection dies
        peer.writer.transport.abort()

    async with connected(script) as (_, conn):
        results = await asyncio.gather(*(conn.send(METADATA, 12, meta_body(n)) for n in "abc"),
                                       return_exceptions=True)
        assert all(isinstance(r, KafkaConnectionError) for r in results), results
        assert "mid-frame" in str(results[0]) or "reset" in str(results[0]).lower()
        assert conn.closed
        with pytest.raises(KafkaConnectionError, match="is closed"):
            await conn.send(METADATA, 12, meta_body("after"))


@pytest.mark.parametrize("header", [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xf0", b"\x00\x00\x00\x02"])
@pytest.mark.asyncio
async def test_bad_frame_size_is_a_decode_error_and_closes(header: bytes) -> None:
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        await peer.read_request()
        await peer.write(header)
        await hold_open(peer)

    async with connected(script) as (_, conn):
        with pytest.raises(ProtocolDecodeError, match="byte response frame"):
            await conn.send(METADATA, 12, meta_body("x"))
        assert conn.closed
        assert isinstance(conn.closed_by, ProtocolDecodeError)


@pytest.mark.asyncio
async def test_frame_limit_comes_from_options() -> None:
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        api, version, cid, _ = await peer.read_request()
        await peer.respond(api, version, cid, metadata_answer("x" * 500))
        await hold_open(peer)

    async with connected(script, ConnectionOptions(max_frame_bytes=200)) as (_, conn):
        with pytest.raises(ProtocolDecodeError, match="limit is 200 bytes"):
            await conn.send(METADATA, 12, meta_body("x"))


@pytest.mark.asyncio
async def test_garbage_frame_with_wrong_correlation_id_closes() -> None:
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        await peer.read_request()
        await peer.read_request()
        await peer.write(b"\x00\x00\x00\x0cgarbage-junk")
        await hold_open(peer)

    async with connected(script) as (_, conn):
        results = await asyncio.gather(conn.send(METADATA, 12, meta_body("a")),
                                       conn.send(METADATA, 12, meta_body("b")), return_exceptions=True)
        assert all(isinstance(r, ProtocolDecodeError) for r in results), results
        assert "expected 1" in str(results[0])
        assert conn.closed


@pytest.mark.asyncio
async def test_undecodable_body_fails_only_that_request() -> None:
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        _, _, cid, _ = await peer.read_request()
        await peer.write(b"\x00\x00\x00\x06" + cid.to_bytes(4, "big") + b"\x00\x07")  # truncated body
        await echo_metadata_after_versions(peer)

    async with connected(script) as (_, conn):
        with pytest.raises(ProtocolDecodeError, match="Metadata v12 response"):
            await conn.send(METADATA, 12, meta_body("a"))
        assert (await conn.send(METADATA, 12, meta_body("b")))["cluster_id"] == "b"


async def echo_metadata_after_versions(peer: Peer) -> None:
    while True:
        api, version, cid, body = await peer.read_request()
        await peer.respond(api, version, cid, metadata_answer(body["topics"][0]["name"]))


@pytest.mark.asyncio
async def test_unsolicited_response_closes() -> None:
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        await peer.respond(METADATA, 12, 99, metadata_answer("nobody asked"))
        await hold_open(peer)

    async with connected(script) as (_, conn):
        for _ in range(100):
            if conn.closed:
                break
            await asyncio.sleep(0.01)
        assert isinstance(conn.closed_by, ProtocolDecodeError)
        assert "to no request" in str(conn.closed_by)


@pytest.mark.asyncio
async def test_close_is_idempotent_fails_in_flight_and_releases_the_socket() -> None:
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        await hold_open(peer)

    async with connected(script) as (_, conn):
        waiting = asyncio.create_task(conn.send(METADATA, 12, meta_body("never")))
        await asyncio.sleep(0.05)
        open_fds = len(os.listdir("/proc/self/fd"))
        await conn.close()
        await conn.close()
        # close() returns once the socket is closed (and a reader thread's own fds with it)
        assert len(os.listdir("/proc/self/fd")) <= open_fds - 1
        with pytest.raises(KafkaConnectionError, match="closed by the client"):
            await waiting
        await asyncio.gather(conn.close(), conn.close())


@pytest.mark.asyncio
async def test_open_to_a_closed_port_is_a_connection_error() -> None:
    async with FakeBroker(hold_open) as broker:
        port = broker.port
    with pytest.raises(KafkaConnectionError, match=f"127.0.0.1:{port}"):
        await Connection.open("127.0.0.1", port, OPTIONS, timeout=2.0)


@pytest.mark.asyncio
async def test_open_times_out_when_the_broker_is_silent() -> None:
    async with FakeBroker(hold_open) as broker:
        began = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=rf"127.0.0.1:{broker.port} timed out asking for the API "
                                                    r"versions \(no answer within 0.2 s\): .*not a Kafka broker\?"):
            await Connection.open("127.0.0.1", broker.port, OPTIONS, timeout=0.2)
        assert time.monotonic() - began < 0.4


# ---------------------------------------------------------------------------- error mapping

def test_translate_maps_low_level_errors_in_one_place() -> None:
    assert isinstance(translate(ConnectionResetError(104, "reset"), "x"), KafkaConnectionError)
    assert isinstance(translate(TimeoutError(), "x", 1.0), KafkaTimeoutError)
    assert isinstance(translate(asyncio.IncompleteReadError(b"", 4), "x"), KafkaConnectionError)
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    assert isinstance(translate(verify, "x"), AuthenticationError)
    assert isinstance(translate(ssl.SSLError(1, "bad record mac"), "x"), KafkaConnectionError)
    decode = ProtocolDecodeError("bad")
    assert translate(decode, "x") is decode


def test_map_exceptions_chains_and_passes_kafka_errors_through() -> None:
    with pytest.raises(KafkaConnectionError) as info, map_exceptions("talking to b"):
        raise BrokenPipeError(32, "Broken pipe")
    assert isinstance(info.value.__cause__, BrokenPipeError)
    assert "talking to b: Broken pipe" in str(info.value)
    original = KafkaTimeoutError("mine")
    with pytest.raises(KafkaTimeoutError) as info2, map_exceptions("x"):
        raise original
    assert info2.value is original


def test_backoff_doubles_to_the_maximum_with_jitter() -> None:
    backoff = Backoff(0.1, 1.0)
    assert backoff.delay() == 0.0
    delays = []
    for _ in range(6):
        backoff.failed(100.0)
        delays.append(backoff.delay())
    for failures, delay in enumerate(delays, start=1):
        nominal = min(0.1 * 2 ** (failures - 1), 1.0)
        assert nominal * 0.8 <= delay <= nominal * 1.2
    assert backoff.wait_time(100.0) > 0
    backoff.succeeded()
    assert backoff.wait_time(100.0) == 0.0


def test_backoff_of_zero_never_waits() -> None:
    backoff = Backoff(0.0, 1.0)  # retry_backoff_ms=0: retries come at once, as asked
    for _ in range(70):
        backoff.failed(100.0)
        assert backoff.delay() == 0.0
        assert backoff.wait_time(100.0) == 0.0


@pytest.mark.parametrize(("base", "cap"), [(2.0, 0.5), (0.5, 0.5), (5.0, 0.0)])
def test_backoff_at_or_above_its_cap_is_the_cap_every_time(base: float, cap: float) -> None:
    """As Java's ExponentialBackoff: retry.backoff.ms > retry.backoff.max.ms is a static backoff
    of retry.backoff.max.ms, without growth or jitter."""
    backoff = Backoff(base, cap)
    for _ in range(5):
        backoff.failed(100.0)
        assert backoff.delay() == cap
        assert backoff.wait_time(100.0) == cap


# ---------------------------------------------------------------------------- SASL

def test_scram_sha256_matches_rfc7677() -> None:
    scram = Scram("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert scram.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = scram.evaluate(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                           b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert scram.evaluate(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert scram.done


def test_scram_sha1_matches_rfc5802() -> None:
    scram = Scram("SCRAM-SHA-1", "user", "pencil", nonce="fyko+d2lbbFgONRv9qkxdawL")
    final = scram.evaluate(b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096")
    assert final == (b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,"
                     b"p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=")
    assert scram.evaluate(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=") is None


def test_scram_rejects_a_forged_server_signature_and_foreign_nonce() -> None:
    scram = Scram("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    scram.evaluate(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(AuthenticationError, match="signature does not verify"):
        scram.evaluate(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    other = Scram("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    with pytest.raises(AuthenticationError, match="nonce"):
        other.evaluate(b"r=zzz123,s=QSXCR+Q6sek8bf92,i=4096")


def test_saslname_escaping_and_secrets_stay_out_of_repr() -> None:
    assert saslname("a=b,c") == "a=3Db=2Cc"
    assert Scram("SCRAM-SHA-256", "a=b,c", "pw", nonce="n").initial_response() == b"n,,n=a=3Db=2Cc,r=n"
    assert Plain("alice", "s3cret").initial_response() == b"\0alice\0s3cret"
    for obj in (Plain("alice", "s3cret"), Scram("SCRAM-SHA-512", "alice", "s3cret"),
                ConnectionOptions(security_protocol="SASL_PLAINTEXT", sasl_plain_username="alice",
                                  sasl_plain_password="s3cret", ssl_password="k3y")):
        assert "s3cret" not in repr(obj)
        assert "k3y" not in repr(obj)


def sasl_script(accept: bool) -> Script:
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        api, version, cid, body = await peer.read_request()
        assert (api, version, body) == (SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        await peer.respond(api, version, cid, {"error_code": 0, "mechanisms": ["PLAIN"]})
        api, version, cid, body = await peer.read_request()
        assert (api, version) == (SASL_AUTHENTICATE, 2)
        ok = body["auth_bytes"] == b"\0alice\0s3cret"
        await peer.respond(api, version, cid, {
            "error_code": 0 if ok and accept else 58, "auth_bytes": b"",
            "error_message": None if ok and accept else "Authentication failed: invalid credentials"})
        await echo_metadata_after_versions(peer)
    return script


def sasl_options(password: str = "s3cret") -> ConnectionOptions:
    return ConnectionOptions(security_protocol="SASL_PLAINTEXT", sasl_plain_username="alice",
                             sasl_plain_password=password)


@pytest.mark.asyncio
async def test_sasl_plain_authenticates_before_other_requests() -> None:
    async with connected(sasl_script(accept=True), sasl_options()) as (_, conn):
        assert (await conn.send(METADATA, 12, meta_body("after-auth")))["cluster_id"] == "after-auth"


@pytest.mark.asyncio
async def test_sasl_failure_is_an_authentication_error_without_the_password() -> None:
    async with FakeBroker(sasl_script(accept=True)) as broker:
        with pytest.raises(AuthenticationError) as info:
            await Connection.open("127.0.0.1", broker.port, sasl_options("wrong-pw"), timeout=5.0)
    assert "SASL_AUTHENTICATION_FAILED" in str(info.value)
    assert "'alice'" in str(info.value)
    assert "wrong-pw" not in str(info.value)


def test_sasl_options_are_validated() -> None:
    with pytest.raises(ConfigError, match="sasl_plain_username"):
        ConnectionOptions(security_protocol="SASL_SSL")
    with pytest.raises(ConfigError, match="GSSAPI"):
        ConnectionOptions(security_protocol="SASL_SSL", sasl_mechanism="GSSAPI",
                          sasl_plain_username="a", sasl_plain_password="b")


# ---------------------------------------------------------------------------- TLS

def test_ssl_context_defaults_verify_the_broker() -> None:
    assert build_ssl_context(ConnectionOptions()) is None
    context = build_ssl_context(ConnectionOptions(security_protocol="SSL"))
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    relaxed = build_ssl_context(ConnectionOptions(security_protocol="SSL", ssl_check_hostname=False))
    assert relaxed is not None
    assert relaxed.verify_mode == ssl.CERT_REQUIRED
    assert not relaxed.check_hostname
    mine = ssl.create_default_context()
    assert build_ssl_context(ConnectionOptions(security_protocol="SASL_SSL", ssl_context=mine,
                                               sasl_plain_username="a", sasl_plain_password="b")) is mine


def test_ssl_unloadable_files_are_config_errors_without_the_password(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ssl_cafile"):
        build_ssl_context(ConnectionOptions(security_protocol="SSL", ssl_cafile=str(tmp_path / "none.pem")))
    bogus = tmp_path / "bogus.pem"
    bogus.write_text("not a certificate")
    with pytest.raises(ConfigError, match="ssl_certfile") as info:
        build_ssl_context(ConnectionOptions(security_protocol="SSL", ssl_certfile=str(bogus),
                                            ssl_password="hunter2"))
    assert "hunter2" not in str(info.value)


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=fake",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


async def tls_broker_and_connect(cert: Path, key: Path, options: ConnectionOptions) -> Connection:
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(str(cert), str(key))

    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        await echo_metadata_after_versions(peer)

    async with FakeBroker(script, server_context) as broker:
        conn = await Connection.open("127.0.0.1", broker.port, options, timeout=5.0)
        try:
            assert (await conn.send(METADATA, 12, meta_body("tls")))["cluster_id"] == "tls"
        finally:
            await conn.close()
        return conn


@pytest.mark.asyncio
async def test_tls_round_trip_verifies_the_broker(self_signed: tuple[Path, Path]) -> None:
    cert, key = self_signed
    conn = await tls_broker_and_connect(cert, key, ConnectionOptions(security_protocol="SSL",
                                                                     ssl_cafile=str(cert)))
    assert conn.closed


@pytest.mark.asyncio
async def test_tls_untrusted_certificate_is_an_authentication_error(self_signed: tuple[Path, Path]) -> None:
    cert, key = self_signed
    with pytest.raises(AuthenticationError, match="certificate verification failed"):
        await tls_broker_and_connect(cert, key, ConnectionOptions(security_protocol="SSL"))


# ---------------------------------------------------------------------------- cluster (fake broker)

def cluster_script(port_of: Callable[[], int], coordinator_errors: list[int]) -> Script:
    """One-broker cluster: node 1 at our own port; FindCoordinator fails with the listed codes first."""
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        while True:
            api, version, cid, body = await peer.read_request()
            if api is METADATA:
                await peer.respond(api, version, cid, {
                    "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": port_of(), "rack": None}],
                    "cluster_id": "fake-cluster", "controller_id": 1,
                    "topics": [{"error_code": 0, "name": "t", "is_internal": False, "partitions": [
                        {"error_code": 0, "partition_index": i, "leader_id": 1, "leader_epoch": 7,
                         "replica_nodes": [1], "isr_nodes": [1]} for i in range(3)]}]})
            elif api is FIND_COORDINATOR:
                assert body["coordinator_keys"] == ["g"]
                assert body["key_type"] == 0
                code = coordinator_errors.pop(0) if coordinator_errors else 0
                await peer.respond(api, version, cid, {"coordinators": [
                    {"key": "g", "node_id": 1, "host": "127.0.0.1", "port": port_of(), "error_code": code}]})
    return script


@pytest.mark.asyncio
async def test_cluster_bootstrap_metadata_and_dedicated_coordinator_connection() -> None:
    errors = [15, 14]  # COORDINATOR_NOT_AVAILABLE, then COORDINATOR_LOAD_IN_PROGRESS, then found
    broker = FakeBroker(cluster_script(lambda: broker.port, errors))
    async with broker:
        cluster = Cluster(ConnectionOptions(retry_backoff=0.01), [("127.0.0.1", broker.port)])
        try:
            await cluster.bootstrap(timeout=5.0)
            assert cluster.metadata.cluster_id == "fake-cluster"
            assert cluster.partitions_for("t") == {0, 1, 2}
            assert cluster.leader_for(TopicPartition("t", 2)) == 1
            assert cluster.metadata.leader_epoch_for(TopicPartition("t", 2)) == 7
            assert cluster.leader_for(TopicPartition("t", 9)) is None
            pooled = await cluster.connection(1, timeout=5.0)
            assert broker.connections == 1  # the bootstrap connection was adopted as node 1's
            assert await cluster.find_coordinator("g", timeout=5.0) == 1
            assert errors == []
            coordinator = await cluster.coordinator_connection("g", timeout=5.0)
            assert coordinator is not pooled
            assert broker.connections == 2
            assert await cluster.coordinator_connection("g", timeout=5.0) is coordinator
            cluster.mark_coordinator_dead("g", "test")
            assert cluster.coordinator("g") is None
            again = await cluster.coordinator_connection("g", timeout=5.0)
            assert again is not coordinator
            assert not again.closed
        finally:
            await cluster.close()
            await cluster.close()
        assert pooled.closed
        assert coordinator.closed
        assert again.closed
        with pytest.raises(IllegalStateError):
            await cluster.connection(1, timeout=1.0)


@pytest.mark.asyncio
async def test_cluster_find_coordinator_gives_up_at_its_timeout() -> None:
    broker = FakeBroker(cluster_script(lambda: broker.port, [15] * 1000))
    async with broker:
        cluster = Cluster(ConnectionOptions(retry_backoff=0.02), [("127.0.0.1", broker.port)])
        try:
            await cluster.bootstrap(timeout=5.0)
            began = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match="COORDINATOR_NOT_AVAILABLE"):
                await cluster.find_coordinator("g", timeout=0.3)
            assert time.monotonic() - began < 0.5
        finally:
            await cluster.close()


@pytest.mark.asyncio
async def test_cluster_non_retriable_coordinator_error_is_raised() -> None:
    broker = FakeBroker(cluster_script(lambda: broker.port, [30]))  # GROUP_AUTHORIZATION_FAILED
    async with broker:
        cluster = Cluster(OPTIONS, [("127.0.0.1", broker.port)])
        try:
            with pytest.raises(BrokerError, match="GROUP_AUTHORIZATION_FAILED"):
                await cluster.find_coordinator("g", timeout=5.0)  # bootstraps on demand
        finally:
            await cluster.close()


@pytest.mark.asyncio
async def test_cluster_bootstrap_tries_servers_in_order_and_times_out() -> None:
    async with FakeBroker(hold_open) as dead:
        dead_port = dead.port
    broker = FakeBroker(cluster_script(lambda: broker.port, []))
    async with broker:
        cluster = Cluster(OPTIONS, [("127.0.0.1", dead_port), ("127.0.0.1", broker.port)])
        try:
            await cluster.bootstrap(timeout=5.0)
            assert set(cluster.metadata.brokers) == {1}
        finally:
            await cluster.close()
    lonely = Cluster(ConnectionOptions(reconnect_backoff=0.01), [("127.0.0.1", dead_port)])
    began = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match=f"127.0.0.1:{dead_port}"):
        await lonely.bootstrap(timeout=0.3)
    assert time.monotonic() - began < 0.6
    await lonely.close()


class GatedMetadata:
    """A one-broker cluster whose Metadata answers wait at a gate (the first ``free`` answers do
    not); it advertises node 1 at ``advertised(gated)``. ``live`` counts the client connections still
    open on the broker's side."""

    def __init__(self, advertised: Callable[[bool], int], free: int = 0) -> None:
        self.advertised = advertised
        self.free = free
        self.asked = asyncio.Event()
        self.gate = asyncio.Event()
        self.live = 0

    async def script(self, peer: Peer) -> None:
        self.live += 1
        try:
            await peer.answer_api_versions()
            while True:
                api, version, cid, _ = await peer.read_request()
                assert api is METADATA
                gated = self.free == 0
                if gated:
                    self.asked.set()
                    await self.gate.wait()
                else:
                    self.free -= 1
                await peer.respond(api, version, cid, {
                    "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": self.advertised(gated), "rack": None}],
                    "cluster_id": "fake-cluster", "controller_id": 1, "topics": []})
        finally:
            self.live -= 1


async def _none_open(fake: GatedMetadata) -> int:
    """The broker-side count of open client connections, once closes have had time to arrive."""
    for _ in range(50):
        if fake.live == 0:
            break
        await asyncio.sleep(0.02)
    return fake.live


@pytest.mark.asyncio
async def test_cluster_closed_during_bootstrap_leaves_no_connection_open() -> None:
    """close() while the bootstrap's Metadata answer is on its way: the connection the bootstrap
    would keep (the bootstrap address is an advertised broker's) is closed, not pooled."""
    async with asyncio.timeout(10):
        fake = GatedMetadata(lambda _gated: broker.port)
        broker = FakeBroker(fake.script)
        async with broker:
            cluster = Cluster(OPTIONS, [("127.0.0.1", broker.port)])
            bootstrap = asyncio.create_task(cluster.bootstrap(timeout=5.0))
            await fake.asked.wait()
            await cluster.close()
            fake.gate.set()
            outcome = (await asyncio.gather(bootstrap, return_exceptions=True))[0]
            assert await _none_open(fake) == 0  # before the fix: 1, the connection pooled after close()
            assert isinstance(outcome, IllegalStateError), outcome
            assert broker.connections == 1


@pytest.mark.asyncio
async def test_cluster_closed_during_rebootstrap_leaves_no_connection_open() -> None:
    """The same race on a rebootstrap (KIP-899: no known broker reachable)."""
    async with asyncio.timeout(10):
        async with FakeBroker(hold_open) as dead:
            dead_port = dead.port
        # The first answer sends the client to a broker that is gone; the rebootstrap's answer
        # (through the bootstrap address again) names the bootstrap address itself.
        fake = GatedMetadata(lambda gated: broker.port if gated else dead_port, free=1)
        broker = FakeBroker(fake.script)
        async with broker:
            cluster = Cluster(ConnectionOptions(request_timeout=5.0, reconnect_backoff=0.01),
                              [("127.0.0.1", broker.port)])
            await cluster.bootstrap(timeout=5.0)
            assert cluster.metadata.brokers[1].port == dead_port
            refresh = asyncio.create_task(cluster.refresh_metadata(["t"], timeout=5.0))
            await fake.asked.wait()
            assert cluster.recovery.rebootstraps == 1
            await cluster.close()
            fake.gate.set()
            outcome = (await asyncio.gather(refresh, return_exceptions=True))[0]
            assert await _none_open(fake) == 0  # before the fix: 1, the connection pooled after close()
            assert isinstance(outcome, IllegalStateError), outcome
            assert broker.connections == 2
