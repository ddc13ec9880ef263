"""BlockingConnection against a scripted broker: negotiation, timeouts, close from another thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from aiokafka_lite._net.blocking import BlockingConnection
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite.errors import KafkaConnectionError, KafkaTimeoutError
from aiokafka_lite.protocol.api import encode_response
from aiokafka_lite.protocol.messages import API_VERSIONS, HEARTBEAT


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
