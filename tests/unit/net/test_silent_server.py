"""A server that accepts the connection and never answers ApiVersions (an HTTP server, a port of
something else) is said within a few seconds, once, while the client still waits for the answer up
to request_timeout_ms: a slow broker may still answer (issue 41, "say why, early").

No broker: a loopback socket that listens and never accepts, so the kernel completes the TCP
handshake and takes the request, and nothing ever answers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite._net import connection
from aiokafka_lite.errors import KafkaTimeoutError

from .silence_notices import said_once_over_three_tries, said_within

NOTICE = "accepted the connection but has not answered ApiVersions for"
SAID_WITHIN = 5.0


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """An address whose connections are accepted (by the kernel) and never answered."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.asyncio
async def test_a_server_silent_to_api_versions_is_said_within_seconds_not_at_the_request_timeout(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aiokafka_lite")
    with silent_server() as address:
        consumer = Consumer(bootstrap_servers=address, request_timeout_ms=30000, default_api_timeout_ms=60000)
        starting = asyncio.create_task(consumer.start())
        try:
            took = await said_within(caplog, SAID_WITHIN, NOTICE)
            await asyncio.sleep(1.0)  # nothing more is said while the same attempt waits on
            assert not starting.done(), "gave up before request_timeout_ms: it only had to say it"
        finally:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            await consumer.close()
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert said == [f"cannot reach the cluster yet: {address} accepted the connection but has not answered "
                    f"ApiVersions for 2 s (not a Kafka broker?); waiting up to 30 s for it (request_timeout_ms); "
                    "still trying for 60 s (default_api_timeout_ms)"], said
    assert took < SAID_WITHIN


@pytest.mark.asyncio
async def test_start_ends_at_its_timeout_saying_the_server_did_not_answer_api_versions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "SILENCE_SAID_AFTER", 0.1)
    with silent_server() as address:
        consumer = Consumer(bootstrap_servers=address, request_timeout_ms=300, fetch_max_wait_ms=100,
                            reconnect_backoff_ms=10, reconnect_backoff_max_ms=50)
        try:
            with pytest.raises(KafkaTimeoutError) as caught:
                await consumer.start(timeout=2.0)
        finally:
            await consumer.close()
    assert "did not answer ApiVersions" in str(caught.value), str(caught.value)


@pytest.mark.asyncio
async def test_the_notice_is_said_once_however_many_tries_go_unanswered(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three tries told (counted as they are said: under CPU starvation a 2 s window held fewer
    tries than a quiet machine's, which is no fault of the client's): one WARNING, the rest DEBUG."""
    caplog.set_level(logging.DEBUG, logger="aiokafka_lite")
    monkeypatch.setattr(connection, "SILENCE_SAID_AFTER", 0.1)
    with silent_server() as address:
        consumer = Consumer(bootstrap_servers=address, request_timeout_ms=300, fetch_max_wait_ms=100,
                            reconnect_backoff_ms=10, reconnect_backoff_max_ms=50)
        await said_once_over_three_tries(caplog, consumer, NOTICE)


def test_a_slow_broker_said_early_then_answering_is_one_warning_and_one_recovery(
        caplog: pytest.LogCaptureFixture) -> None:
    from aiokafka_lite._net.bootstrap_tries import BootstrapTries

    caplog.set_level(logging.DEBUG, logger="aiokafka_lite")
    tries = BootstrapTries(logging.getLogger("aiokafka_lite.net"), [("a", 1)], "60 s")
    tries.waiting("a:1 accepted the connection but has not answered ApiVersions for 2 s")
    tries.failed("a:1", "a:1 timed out asking for the API versions")  # its attempt ends: counted, said quietly
    tries.say("a:1 timed out asking for the API versions")
    tries.waiting("a:1 accepted the connection but has not answered ApiVersions for 2 s")  # the next try
    tries.succeeded("a:1")
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert said[0] == ("WARNING", "cannot reach the cluster yet: a:1 accepted the connection but has not answered "
                                  "ApiVersions for 2 s; still trying for 60 s")
    assert [level for level, _ in said] == ["WARNING", "INFO", "DEBUG", "INFO"], said
    assert said[-1][1].startswith("cannot reach the cluster yet: recovered (a:1 answered) after 1 failure in "), said
