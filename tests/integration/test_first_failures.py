"""A wrong bootstrap address, as a user of the CLI meets it: the cause on stderr within seconds (on
the old code: 60 s of silence, then a timeout that named no cause), one line per message, no
traceback, exit code 1, and a final error naming each server's last cause and number of tries."""

from __future__ import annotations

import logging
import re
import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.errors import AuthenticationError

from .test_cli import CLI, ENV

API_TIMEOUT_MS = 12000  # the retrying cases end by this; the old code said nothing before it
FIRST_LINE_WITHIN = 6.0  # seconds, interpreter start-up included (2 shared cores)


@dataclass
class Run:
    lines: list[tuple[float, str]]  # (seconds after start, stderr line)
    returncode: int

    @property
    def first_after(self) -> float:
        assert self.lines, "nothing on stderr"
        return self.lines[0][0]

    def texts(self) -> list[str]:
        return [text for _, text in self.lines]


def run_consume(bootstrap: str, *settings: str) -> Run:
    """`aiokafka-lite consume` against ``bootstrap``, stderr read line by line as it comes."""
    argv = [*CLI, "consume", "orders", "-b", bootstrap, "--max", "1",
            "-X", f"default.api.timeout.ms={API_TIMEOUT_MS}", *settings]
    began = time.monotonic()
    lines: list[tuple[float, str]] = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV) as proc:
        watchdog = threading.Timer(API_TIMEOUT_MS / 1000 + 30, proc.kill)  # never hang the suite
        watchdog.start()
        try:
            assert proc.stderr is not None
            assert proc.stdout is not None
            for line in proc.stderr:
                lines.append((time.monotonic() - began, line.rstrip("\n")))
            out = proc.stdout.read()
            proc.wait()
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
    assert out == "", "nothing was consumed, so nothing may be printed"
    return Run(lines, proc.returncode)


def assert_said_at_once_then_gave_up(run: Run, address: str, cause: str) -> None:
    texts = run.texts()
    assert run.returncode == 1, texts
    assert all(t.startswith("aiokafka-lite: ") for t in texts), texts  # one message a line, no traceback
    assert len(texts) == 2, texts  # the first failure, then the error: repeats are not shown
    assert run.first_after < FIRST_LINE_WITHIN, f"first line after {run.first_after:.1f} s: {texts}"
    assert f"{address} {cause}" in texts[0] or f"{address}: {cause}" in texts[0], texts
    assert f"still trying for {API_TIMEOUT_MS // 1000} s" in texts[0], texts
    found = re.search(r"KafkaTimeoutError: could not reach the bootstrap servers within "
                      rf"{API_TIMEOUT_MS / 1000} s: (.*) \((\d+) tr(y|ies)\)$", texts[1])
    assert found, texts
    assert address in found.group(1), texts
    assert cause in found.group(1), texts
    assert int(found.group(2)) >= 1


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextmanager
def tcp_server(handle: Callable[[socket.socket], None]) -> Iterator[str]:
    """A loopback TCP server of the test's own (not Kafka), in a thread."""
    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            handle(self.request)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def answer_http(conn: socket.socket) -> None:
    conn.recv(100)
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


def close_at_once(conn: socket.socket) -> None:
    conn.recv(4)


def test_refused() -> None:
    address = f"127.0.0.1:{closed_port()}"
    assert_said_at_once_then_gave_up(run_consume(address), address, "refused the connection")


def test_no_such_host_fails_at_once() -> None:
    run = run_consume("nosuch.invalid:9092")
    assert run.returncode == 1
    assert run.texts() == ["aiokafka-lite: ConfigError: bootstrap_servers: no address resolves: "
                           "nosuch.invalid:9092: no such host (the name does not resolve)"]
    assert run.first_after < FIRST_LINE_WITHIN


def test_a_server_answering_http_is_not_kafka() -> None:
    with tcp_server(answer_http) as address:
        run = run_consume(address)
    assert_said_at_once_then_gave_up(run, address, "is not a Kafka broker: it answered ApiVersions with "
                                     "something that is not a Kafka response")


def test_a_server_closing_at_once_is_not_kafka() -> None:
    with tcp_server(close_at_once) as address:
        run = run_consume(address)
    assert_said_at_once_then_gave_up(run, address, "closed the connection when asked for its API versions: "
                                     "not a Kafka broker, or a listener that expects TLS (security_protocol SSL)?")


@pytest.mark.broker("kafka")
def test_tls_against_a_plaintext_kafka_listener_fails_at_once(apache_kafka_broker: object) -> None:
    # The handshake is only closed; a second connection, without TLS, finds Kafka there (listener_probe).
    address = apache_kafka_broker.bootstrap_servers  # type: ignore[attr-defined]
    run = run_consume(address, "-X", "security.protocol=SSL")
    assert run.returncode == 1
    assert run.texts() == [f"aiokafka-lite: AuthenticationError: {address} closed the connection during the TLS "
                           "handshake, and answers Kafka requests without TLS (a PLAINTEXT listener): set "
                           "security_protocol to PLAINTEXT, not SSL"]
    assert run.first_after < FIRST_LINE_WITHIN, f"{run.first_after:.1f} s: retried what waiting cannot fix"


# ---------------------------------------------------------------- what waiting cannot fix: at once

@pytest.fixture(scope="module")
def mutual_tls_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """Apache Kafka with a TLS listener that requires a client certificate: (address, CA file)."""
    from aiokafka_lite.testing._process import BrokerUnavailable
    from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker
    from aiokafka_lite.testing.certs import TestCA, kafka_ssl_listener_properties

    ca = TestCA.create(tmp_path_factory.mktemp("mtls") / "ca")
    listener = {**kafka_ssl_listener_properties("MTLS", ca.issue("broker", ["localhost", "127.0.0.1"])),
                "listener.name.mtls.ssl.client.auth": "required",
                "listener.name.mtls.ssl.truststore.type": "PEM",
                "listener.name.mtls.ssl.truststore.location": str(ca.cert_path)}
    broker = ApacheKafkaBroker(extra_listeners={"MTLS": "SSL"}, extra_properties=listener)
    try:
        broker.start()
    except BrokerUnavailable as exc:
        pytest.skip(f"Apache Kafka unavailable: {exc}")
    try:
        yield f"127.0.0.1:{broker.listener_port('MTLS')}", ca.cert_path
    finally:
        broker.stop()


@pytest.mark.broker("kafka")
@pytest.mark.asyncio
async def test_a_missing_client_certificate_fails_at_once(mutual_tls_kafka: tuple[str, Path]) -> None:
    address, cafile = mutual_tls_kafka
    consumer = Consumer(bootstrap_servers=address, security_protocol="SSL", ssl_cafile=str(cafile))
    began = time.monotonic()
    try:
        with pytest.raises(AuthenticationError) as caught:
            await consumer.start(timeout=15.0)
    finally:
        await consumer.close()
    took = time.monotonic() - began
    assert took < 5.0, f"{took:.1f} s: retried what waiting cannot fix"
    assert str(caught.value).startswith(f"{address} requires a TLS client certificate and none is configured "
                                        "(ssl_certfile, ssl_keyfile): TLS alert "), str(caught.value)


@pytest.mark.asyncio
async def test_a_server_down_in_front_of_one_that_answers_is_no_warning(
        tansu_broker: object, caplog: pytest.LogCaptureFixture) -> None:
    """A client that reaches its cluster through the next bootstrap server says nothing about the one
    before it that refused (said at once, it made a cluster with one broker down look unreachable)."""
    caplog.set_level(logging.WARNING, logger="aiokafka_lite")
    live = tansu_broker.bootstrap_servers  # type: ignore[attr-defined]
    consumer = Consumer(bootstrap_servers=f"127.0.0.1:{closed_port()},{live}")
    try:
        await consumer.start(timeout=15.0)
        assert await consumer.list_topics(timeout=15.0) is not None
    finally:
        await consumer.close()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
