"""A listener that accepts the TCP connection and never answers our TLS ClientHello (a plaintext
service that waits for more, a port of something else) is said 2 s in, once, naming the TLS
handshake, while the attempt still waits out the handshake's own timeout (issue 41, "say why, early";
the same as test_silent_server.py for ApiVersions)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite._net import connection

from ...tcp_proxy import silent_server
from .silence_notices import said_once_over_three_tries, said_within

NOTICE = "accepted the connection but has not answered the TLS handshake for"
SAID_WITHIN = 5.0


@pytest.mark.asyncio
async def test_a_listener_silent_to_the_client_hello_is_said_within_seconds(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aiokafka_lite")
    async with silent_server() as address:
        consumer = Consumer(bootstrap_servers=address, security_protocol="SSL",
                            request_timeout_ms=30000, default_api_timeout_ms=60000)
        starting = asyncio.create_task(consumer.start())
        try:
            took = await said_within(caplog, SAID_WITHIN, NOTICE)
            await asyncio.sleep(1.0)  # nothing more is said while the same handshake waits on
            assert not starting.done(), "gave up before the handshake's timeout: it only had to say it"
        finally:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            await consumer.close()
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert said == [f"cannot reach the cluster yet: {address} accepted the connection but has not answered the "
                    "TLS handshake for 2 s (not a TLS listener?); waiting up to 10 s for it (the TLS handshake's "
                    "timeout); still trying for 60 s (default_api_timeout_ms)"], said
    assert took < SAID_WITHIN


@pytest.mark.asyncio
async def test_the_tls_notice_is_said_once_however_many_handshakes_go_unanswered(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three handshakes told (counted as they are said: a fixed 2 s window held too few tries under
    CPU starvation, "2 failures in a row over 1.1 s"): one WARNING, the rest DEBUG."""
    caplog.set_level(logging.DEBUG, logger="aiokafka_lite")
    monkeypatch.setattr(connection, "SILENCE_SAID_AFTER", 0.1)
    async with silent_server() as address:
        consumer = Consumer(bootstrap_servers=address, security_protocol="SSL", request_timeout_ms=300,
                            fetch_max_wait_ms=100, reconnect_backoff_ms=10, reconnect_backoff_max_ms=50)
        await said_once_over_three_tries(caplog, consumer, NOTICE)
