"""A consumer that cannot reach its bootstrap servers says why at once, once, and its timeout error
names each server's last cause and number of tries; what waiting cannot fix fails fast.

No broker here: a closed loopback port, a name under .invalid (never resolves, RFC 6761) and
loopback servers of the test's own that answer something other than Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.errors import AuthenticationError, BootstrapResolutionError, ConfigError, KafkaTimeoutError

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens there now: connections are refused


async def answers_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(100)
    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    await writer.drain()
    writer.close()


async def closes_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(4)
    writer.close()


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


async def start_fails(bootstrap: str, timeout: float, **settings: object) -> tuple[BaseException, float]:
    consumer = Consumer(bootstrap_servers=bootstrap, **settings)  # type: ignore[arg-type]
    began = time.monotonic()
    try:
        await consumer.start(timeout=timeout)
    except Exception as exc:  # the test looks at what it is
        return exc, time.monotonic() - began
    finally:
        await consumer.close()
    raise AssertionError("start() succeeded without a broker")


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and r.name.startswith("aiokafka_lite")]


@pytest.mark.asyncio
async def test_refused_is_said_once_at_warning_and_the_timeout_counts_the_tries(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aiokafka_lite")
    port = closed_port()
    error, _ = await start_fails(f"127.0.0.1:{port}", 2.0, default_api_timeout_ms=2000)
    assert isinstance(error, KafkaTimeoutError)
    found = re.fullmatch(rf"could not reach the bootstrap servers within 2.0 s: 127.0.0.1:{port} refused the "
                         r"connection \((\d+) tries\)", str(error))
    assert found, str(error)
    tries = int(found.group(1))
    assert tries >= 3, str(error)
    said = warnings(caplog)
    assert said == [f"cannot reach the cluster yet: 127.0.0.1:{port} refused the connection; "
                    "still trying for 2 s (default_api_timeout_ms)"], said
    repeats = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG
               and r.getMessage().startswith("cannot reach the cluster yet")]
    assert len(repeats) == tries - 1
    assert repeats[-1].endswith(f"({tries} failures in a row over " + repeats[-1].rsplit(" over ", 1)[1])


@pytest.mark.asyncio
async def test_two_servers_each_get_their_cause_and_count() -> None:
    first, second = closed_port(), closed_port()
    error, _ = await start_fails(f"127.0.0.1:{first},127.0.0.1:{second}", 1.5)
    assert re.fullmatch(rf"could not reach the bootstrap servers within 1.5 s: 127.0.0.1:{first} refused the "
                        rf"connection \(\d+ tries\); 127.0.0.1:{second} refused the connection \(\d+ tries\)",
                        str(error)), str(error)


@pytest.mark.asyncio
async def test_a_call_that_times_out_before_the_cluster_answered_says_why() -> None:
    port = closed_port()
    consumer = Consumer(bootstrap_servers=f"127.0.0.1:{port}")
    try:
        with pytest.raises(KafkaTimeoutError) as caught:
            await consumer.list_topics(timeout=1.0)
    finally:
        await consumer.close()
    assert str(caught.value).startswith("metadata did not complete within 1.0 s: could not reach the bootstrap "
                                        f"servers within 1.0 s: 127.0.0.1:{port} refused the connection ("), \
        str(caught.value)


@pytest.mark.asyncio
async def test_no_resolvable_address_fails_fast_with_a_config_error(caplog: pytest.LogCaptureFixture) -> None:
    error, took = await start_fails("nosuch.invalid:9092", 8.0)
    assert isinstance(error, ConfigError), repr(error)
    assert str(error) == ("bootstrap_servers: no address resolves: nosuch.invalid:9092: no such host "
                          "(the name does not resolve)")
    assert took < 5.0, f"{took:.1f} s: retried what waiting cannot fix"
    assert warnings(caplog) == []  # the error says it; no "still trying" before it


@pytest.mark.asyncio
async def test_bootstrap_resolve_timeout_retries_the_name_then_fails_naming_the_setting(
        caplog: pytest.LogCaptureFixture) -> None:
    # KIP-909: a positive bootstrap_resolve_timeout_ms retries a name that does not resolve.
    error, took = await start_fails("nosuch.invalid:9092", 8.0, bootstrap_resolve_timeout_ms=600)
    assert isinstance(error, BootstrapResolutionError), repr(error)
    assert isinstance(error, ConfigError)
    assert str(error) == ("bootstrap_servers: no address resolved within bootstrap_resolve_timeout_ms "
                          "(600 ms): nosuch.invalid:9092: no such host (the name does not resolve)")
    assert 0.6 <= took < 5.0, f"{took:.1f} s"
    said = warnings(caplog)
    assert len(said) == 1, said  # once, not per try
    assert "nosuch.invalid:9092: no such host" in said[0], said


@pytest.mark.asyncio
async def test_a_name_that_resolves_after_failing_is_retried_within_bootstrap_resolve_timeout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The name fails to resolve 3 times, then resolves (to a closed port): the bootstrap goes on to
    # the connection and start() ends at its own timeout, naming the refusal, not the name.
    port = closed_port()
    loop = asyncio.get_running_loop()
    if not isinstance(loop, asyncio.BaseEventLoop):  # uvloop (the suite's own subclass of it included)
        pytest.skip("the fault is put in the loop's getaddrinfo, which asyncio's create_connection calls "
                    "and uvloop's does not (it resolves in C)")
    real = loop.getaddrinfo
    calls = 0

    async def getaddrinfo(host: object, *args: object, **kwargs: object) -> object:
        nonlocal calls
        if host == "kafka.flaky.test":
            calls += 1
            if calls <= 3:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            host = "127.0.0.1"
        return await real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)
    error, _ = await start_fails(f"kafka.flaky.test:{port}", 2.0, bootstrap_resolve_timeout_ms=60000,
                                 reconnect_backoff_max_ms=100)
    assert isinstance(error, KafkaTimeoutError), repr(error)
    assert f"kafka.flaky.test:{port} refused the connection (" in str(error), str(error)
    assert calls > 3


@pytest.mark.asyncio
async def test_one_unresolvable_name_among_others_is_retried_and_named() -> None:
    port = closed_port()
    error, _ = await start_fails(f"nosuch.invalid:9092,127.0.0.1:{port}", 1.5)
    assert isinstance(error, KafkaTimeoutError)
    assert "nosuch.invalid:9092: no such host (the name does not resolve) (" in str(error)
    assert f"127.0.0.1:{port} refused the connection (" in str(error)


@pytest.mark.parametrize(("handler", "cause"), [
    pytest.param(answers_http, "is not a Kafka broker: it answered ApiVersions with something that is not a "
                 "Kafka response", id="answers-http"),
    pytest.param(closes_at_once, "closed the connection when asked for its API versions: not a Kafka broker, "
                 "or a listener that expects TLS (security_protocol SSL)?", id="closes"),
])
@pytest.mark.asyncio
async def test_a_server_that_is_not_kafka_is_named_as_such(
        handler: Handler, cause: str, caplog: pytest.LogCaptureFixture) -> None:
    async with serving(handler) as address:
        error, _ = await start_fails(address, 1.5)
        assert isinstance(error, KafkaTimeoutError)
        assert f": {address} {cause}" in str(error), str(error)
        said = warnings(caplog)
        assert len(said) == 1, said
        assert f"{address} {cause}" in said[0], said


@pytest.mark.asyncio
async def test_tls_against_a_server_that_does_not_speak_it_fails_fast() -> None:
    # Bytes that are not TLS answering the ClientHello: no retry will change that (test_listener_mismatch).
    async with serving(answers_http) as address:
        error, took = await start_fails(address, 8.0, security_protocol="SSL")
        assert isinstance(error, AuthenticationError), repr(error)
        assert str(error).startswith(f"{address}: TLS handshake failed (WRONG_VERSION_NUMBER): the server answered "
                                     "our ClientHello with something that is not TLS; "), str(error)
        assert took < 5.0


def test_a_rebootstrap_after_the_cluster_answered_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    from aiokafka_lite._net.bootstrap_tries import BootstrapTries

    caplog.set_level(logging.DEBUG, logger="aiokafka_lite")
    tries = BootstrapTries(logging.getLogger("aiokafka_lite.net"), [("a", 1)], "60 s")
    tries.failed("a:1", "a:1 refused the connection")
    tries.say("a:1 refused the connection")
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    tries.succeeded("a:1")
    assert tries.failures() is None
    caplog.clear()
    tries.failed("a:1", "a:1 refused the connection")  # brokers restarting: the cluster's metadata log says it
    tries.say("a:1 refused the connection")
    assert [r.levelname for r in caplog.records if r.levelno >= logging.INFO] == []
    assert tries.failures() == "a:1 refused the connection (1 try)"
