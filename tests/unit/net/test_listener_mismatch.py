"""A security_protocol that does not match the listener fails start() within seconds, with an
AuthenticationError naming the setting to change, when the first try tells it beyond doubt: a TLS
alert answering our plaintext ApiVersions, bytes that are not TLS answering our ClientHello, or a
closed connection that a probe shows to be a plaintext (or SASL) Kafka listener. What waiting may
fix (a refused port, a server that closes without being Kafka) is retried as before.

The brokers here are fakes scripted byte by byte as Apache Kafka 4.3.1's listeners were seen to
answer; tests/integration/test_security.py runs the same mismatches against the real listeners.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.errors import AuthenticationError, KafkaTimeoutError
from aiokafka_lite.protocol.api import Api, decode_request
from aiokafka_lite.protocol.messages import API_VERSIONS, APIS_BY_KEY, SASL_HANDSHAKE

from .test_bootstrap_failures import answers_http, closed_port, closes_at_once, serving
from .test_connection import BROKER_RANGES, FakeBroker, Peer, Script, hold_open

# What Apache Kafka's SSL listener sends back for a plaintext request: a fatal unexpected_message alert.
TLS_ALERT = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x0A])
FAILS_WITHIN = 5.0  # seconds; default_api_timeout_ms is 60 s in these tests
SASL_USER = {"sasl_plain_username": "u", "sasl_plain_password": "p"}


async def start_fails(address: str, **settings: object) -> tuple[BaseException, float]:
    """start() with default_api_timeout_ms=60000: its error and how long it took (at most 20 s)."""
    consumer = Consumer(bootstrap_servers=address, default_api_timeout_ms=60000,
                        **settings)  # type: ignore[arg-type]
    began = time.monotonic()
    try:
        await asyncio.wait_for(consumer.start(), 20.0)
    except Exception as exc:  # the test looks at what it is
        return exc, time.monotonic() - began
    finally:
        await consumer.close()
    raise AssertionError("start() succeeded against a mismatched listener")


async def sends_a_tls_alert(peer: Peer) -> None:
    """An SSL listener: our ApiVersions request is no TLS record; it answers with an alert and hangs up."""
    await peer.reader.read(100)
    await peer.write(TLS_ALERT)
    peer.writer.close()


async def read_request(peer: Peer, head: bytes) -> tuple[Api, int, int]:
    """The request whose 4-byte size ``head`` was read: its API, version and correlation id."""
    frame = await peer.reader.readexactly(int.from_bytes(head, "big"))
    api = APIS_BY_KEY[int.from_bytes(frame[0:2], "big")]
    version, correlation_id, _ = decode_request(api, frame)
    return api, version, correlation_id


def kafka_listener(sasl_mechanisms: list[str] | None, *, metadata_closes: bool = False) -> Script:
    """A plaintext Kafka listener as Apache Kafka's: a ClientHello (read as a frame of ~370 MB) is
    closed at once; ApiVersions is answered; a SaslHandshake gets ILLEGAL_SASL_STATE without SASL,
    UNSUPPORTED_SASL_MECHANISM and the enabled ones with it; with SASL (or ``metadata_closes``) any
    other request before authentication closes the connection."""

    async def script(peer: Peer) -> None:
        head = await peer.reader.readexactly(4)
        if head[0] == 0x16:  # a TLS handshake record's header, read as a frame size
            peer.writer.close()
            return
        api, version, cid = await read_request(peer, head)
        assert api is API_VERSIONS
        keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in BROKER_RANGES.items()]
        await peer.respond(API_VERSIONS, version, cid, {"error_code": 0, "api_keys": keys})
        api, version, cid = await read_request(peer, await peer.reader.readexactly(4))
        if api is SASL_HANDSHAKE:
            if sasl_mechanisms is None:
                await peer.respond(api, version, cid, {"error_code": 34, "mechanisms": []})
            else:
                await peer.respond(api, version, cid, {"error_code": 33, "mechanisms": sasl_mechanisms})
            await hold_open(peer)
            return
        if sasl_mechanisms is not None or metadata_closes:
            peer.writer.close()  # "Unexpected Kafka request of type METADATA during SASL handshake"
            return
        raise AssertionError(f"the fake does not answer {api.name}")

    return script


# ---------------------------------------------------------------- beyond doubt: at once

@pytest.mark.asyncio
async def test_plaintext_against_a_tls_listener_fails_at_once() -> None:
    async with FakeBroker(sends_a_tls_alert) as broker:
        error, took = await start_fails(f"127.0.0.1:{broker.port}")
    assert isinstance(error, AuthenticationError), repr(error)
    assert str(error) == (f"127.0.0.1:{broker.port} speaks TLS: it answered our ApiVersions request with a TLS "
                          "alert; set security_protocol to SSL (or SASL_SSL if the listener takes SASL), not PLAINTEXT")
    assert took < FAILS_WITHIN, f"{took:.1f} s: retried what waiting cannot fix"


@pytest.mark.asyncio
async def test_tls_against_a_server_answering_something_else_fails_at_once() -> None:
    async with serving(answers_http) as address:
        error, took = await start_fails(address, security_protocol="SASL_SSL", **SASL_USER)
    assert isinstance(error, AuthenticationError), repr(error)
    assert str(error) == (f"{address}: TLS handshake failed (WRONG_VERSION_NUMBER): the server answered our "
                          "ClientHello with something that is not TLS; for a plaintext Kafka listener, set "
                          "security_protocol to SASL_PLAINTEXT, not SASL_SSL")
    assert took < FAILS_WITHIN


@pytest.mark.parametrize(("protocol", "mechanisms", "said"), [
    pytest.param("SSL", None, "(a PLAINTEXT listener): set security_protocol to PLAINTEXT, not SSL", id="SSL"),
    pytest.param("SASL_SSL", ["PLAIN", "SCRAM-SHA-512"], "(a SASL_PLAINTEXT listener; its SASL mechanisms: PLAIN, "
                 "SCRAM-SHA-512): set security_protocol to SASL_PLAINTEXT, not SASL_SSL", id="SASL_SSL"),
])
@pytest.mark.asyncio
async def test_tls_against_a_plaintext_kafka_listener_fails_at_once(protocol: str, mechanisms: list[str] | None,
                                                                    said: str) -> None:
    async with FakeBroker(kafka_listener(mechanisms)) as broker:
        error, took = await start_fails(f"127.0.0.1:{broker.port}", security_protocol=protocol, **SASL_USER)
    assert isinstance(error, AuthenticationError), repr(error)
    assert str(error) == (f"127.0.0.1:{broker.port} closed the connection during the TLS handshake, and answers "
                          f"Kafka requests without TLS {said}")
    assert took < FAILS_WITHIN


@pytest.mark.asyncio
async def test_plaintext_against_a_sasl_listener_fails_at_once() -> None:
    async with FakeBroker(kafka_listener(["SCRAM-SHA-256"])) as broker:
        error, took = await start_fails(f"127.0.0.1:{broker.port}")
    assert isinstance(error, AuthenticationError), repr(error)
    assert str(error) == (f"127.0.0.1:{broker.port} takes SASL authentication (a SASL_PLAINTEXT listener; its SASL "
                          "mechanisms: SCRAM-SHA-256) and closed the connection at our first request after "
                          "ApiVersions: set security_protocol to SASL_PLAINTEXT, not PLAINTEXT, and sasl_mechanism "
                          "with its credentials")
    assert took < FAILS_WITHIN


# ---------------------------------------------------------------- what waiting may fix: retried

async def start_times_out(address: str, **settings: object) -> KafkaTimeoutError:
    consumer = Consumer(bootstrap_servers=address, default_api_timeout_ms=1500, **settings)  # type: ignore[arg-type]
    try:
        with pytest.raises(KafkaTimeoutError) as caught:
            await asyncio.wait_for(consumer.start(), 20.0)
    finally:
        await consumer.close()
    return caught.value


@pytest.mark.asyncio
async def test_a_refused_port_is_still_retried() -> None:
    port = closed_port()
    error = await start_times_out(f"127.0.0.1:{port}", security_protocol="SSL")
    assert f"127.0.0.1:{port} refused the connection (" in str(error)
    assert "1 try)" not in str(error), str(error)


@pytest.mark.asyncio
async def test_a_tls_handshake_closed_by_a_server_that_is_not_kafka_is_still_retried() -> None:
    async with serving(closes_at_once) as address:
        error = await start_times_out(address, security_protocol="SSL")
    assert f"{address} closed the connection during the TLS handshake: the server does not speak TLS on this " \
           "port? (" in str(error), str(error)
    assert "1 try)" not in str(error), str(error)


@pytest.mark.asyncio
async def test_a_plaintext_listener_closing_after_api_versions_is_still_retried() -> None:
    """A broker going away after ApiVersions: the probe finds no SASL there, so not a mismatch."""
    async with FakeBroker(kafka_listener(None, metadata_closes=True)) as broker:
        error = await start_times_out(f"127.0.0.1:{broker.port}")
    assert f"127.0.0.1:{broker.port}" in str(error)
    assert "1 try)" not in str(error), str(error)
