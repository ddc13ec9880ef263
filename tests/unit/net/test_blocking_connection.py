"""BlockingConnection against a scripted broker: negotiation, SASL, timeouts, close from another thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from aiokafka_lite._net.blocking import BlockingConnection
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite.errors import AuthenticationError, KafkaConnectionError, KafkaTimeoutError
from aiokafka_lite.protocol.api import Api, decode_request, encode_response
from aiokafka_lite.protocol.messages import API_VERSIONS, HEARTBEAT, SASL_AUTHENTICATE, SASL_HANDSHAKE


def _serve_versions_then_silence(server: socket.socket, stop: threading.Event) -> None:
    conn, _ = server.accept()
    with conn:
        size = int.from_bytes(conn.recv(4), "big")
        frame = b""
        while len(frame) < size:
            frame += conn.recv(size - len(frame))
        version = int.from_bytes(frame[2:4], "big")
        correlation_id = int.from_bytes(frame[4:8], "big")
        body = {"error_code": 0, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 4},
                                              {"api_key": 12, "min_version": 0, "max_version": 4}]}
        conn.sendall(encode_response(API_VERSIONS, version, correlation_id, body))
        stop.wait(10)  # then never answer anything else


@pytest.fixture
def silent_broker() -> Iterator[tuple[str, int]]:
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    thread = threading.Thread(target=_serve_versions_then_silence, args=(server, stop), daemon=True)
    thread.start()
    try:
        yield server.getsockname()[:2]
    finally:
        stop.set()
        thread.join(5)
        server.close()


def _heartbeat_body() -> dict[str, object]:
    return {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}


def test_request_timeout_is_typed(silent_broker):
    conn = BlockingConnection(*silent_broker, ConnectionOptions(), timeout=5.0)
    try:
        assert conn.version_for(HEARTBEAT) == 4
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            conn.send(HEARTBEAT, 4, _heartbeat_body(), timeout=0.3)
        assert time.monotonic() - started < 2.0
    finally:
        conn.close()


def test_close_from_another_thread_unblocks_a_waiting_request(silent_broker):
    conn = BlockingConnection(*silent_broker, ConnectionOptions(), timeout=5.0)
    closer = threading.Timer(0.3, conn.close)
    closer.start()
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError):
        conn.send(HEARTBEAT, 4, _heartbeat_body(), timeout=30.0)
    assert time.monotonic() - started < 5.0
    closer.join()
    conn.close()  # idempotent


def _read_request(conn: socket.socket, api: Api) -> tuple[int, int, dict[str, object]]:
    size = int.from_bytes(conn.recv(4), "big")
    frame = b""
    while len(frame) < size:
        frame += conn.recv(size - len(frame))
    assert int.from_bytes(frame[:2], "big") == api.key
    return decode_request(api, frame)


def _serve_sasl_plain(server: socket.socket, seen: list[object]) -> None:
    conn, _ = server.accept()
    with conn:
        version, cid, _ = _read_request(conn, API_VERSIONS)
        keys = [{"api_key": 17, "min_version": 0, "max_version": 1},
                {"api_key": 36, "min_version": 0, "max_version": 2}]
        conn.sendall(encode_response(API_VERSIONS, version, cid, {"error_code": 0, "api_keys": keys}))
        version, cid, body = _read_request(conn, SASL_HANDSHAKE)
        seen.append((version, body))
        conn.sendall(encode_response(SASL_HANDSHAKE, version, cid, {"error_code": 0, "mechanisms": ["PLAIN"]}))
        version, cid, body = _read_request(conn, SASL_AUTHENTICATE)
        seen.append((version, body))
        ok = body["auth_bytes"] == b"\0alice\0s3cret"
        conn.sendall(encode_response(SASL_AUTHENTICATE, version, cid, {
            "error_code": 0 if ok else 58, "auth_bytes": b"", "session_lifetime_ms": 0,
            "error_message": None if ok else "Authentication failed: invalid credentials"}))
        seen.append("done")


@pytest.mark.parametrize("password", ["s3cret", "wrong-pw"])
def test_sasl_plain_runs_the_same_exchange_as_the_asyncio_connection(password: str) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    seen: list[object] = []
    thread = threading.Thread(target=_serve_sasl_plain, args=(server, seen), daemon=True)
    thread.start()
    options = ConnectionOptions(security_protocol="SASL_PLAINTEXT", sasl_plain_username="alice",
                                sasl_plain_password=password)
    try:
        if password == "s3cret":
            BlockingConnection(*server.getsockname()[:2], options, timeout=5.0).close()
        else:
            with pytest.raises(AuthenticationError) as info:
                BlockingConnection(*server.getsockname()[:2], options, timeout=5.0)
            assert "SASL_AUTHENTICATION_FAILED" in str(info.value)
            assert "wrong-pw" not in str(info.value)
    finally:
        thread.join(5)
        server.close()
    assert seen == [(1, {"mechanism": "PLAIN"}),
                    (2, {"auth_bytes": f"\0alice\0{password}".encode()}), "done"]
