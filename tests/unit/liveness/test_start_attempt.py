"""A start attempt that gave up with nobody waiting (liveness/start_attempt.py), on a consumer
dropped without close(): the consumer's ResourceWarning says so, once, and asyncio reports nothing
(no "Task exception was never retrieved" with the attempt's TimeoutError, issue 40 item 5).

No broker here: a closed loopback port refuses every connection.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import warnings
from typing import Any

import pytest

from aiokafka_lite import Consumer, ShareConsumer
from aiokafka_lite.errors import KafkaTimeoutError
from aiokafka_lite.liveness.start_attempt import StartAttempt

ATTEMPT = "aiokafka-lite start"  # the attempt task's name


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nothing listens there now: connections are refused


async def wait_for_the_attempt_to_give_up() -> None:
    """Until the attempt task ends (without retrieving its outcome), then keep no reference to it."""
    attempts = [t for t in asyncio.all_tasks() if t.get_name() == ATTEMPT]
    assert len(attempts) == 1, attempts
    await asyncio.wait(attempts, timeout=5)
    assert attempts[0].done()
    attempts.clear()


@pytest.mark.parametrize("kind", [Consumer, ShareConsumer], ids=["Consumer", "ShareConsumer"])
@pytest.mark.asyncio
async def test_a_dropped_consumer_whose_attempt_gave_up_warns_once_and_asyncio_says_nothing(kind: Any) -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        consumer = kind(bootstrap_servers=f"127.0.0.1:{closed_port()}", group_id="g-dropped",
                        default_api_timeout_ms=300)
        with pytest.raises(KafkaTimeoutError):
            await consumer.start(timeout=0.1)
        await wait_for_the_attempt_to_give_up()  # after 0.3 s with nobody waiting
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            del consumer
            gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert [c.get("message") for c in reported] == []
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == [
        f"unclosed {kind.__name__} (group 'g-dropped'): call close() or use 'async with'"]


@pytest.mark.asyncio
async def test_an_attempt_that_failed_with_nobody_waiting_keeps_its_error_for_a_caller() -> None:
    async def fails() -> None:
        raise KafkaTimeoutError("the attempt's own error")
    attempt = StartAttempt(fails, idle_limit=None)
    await asyncio.wait([attempt.task])  # ended with nobody waiting: its outcome taken, not lost
    with pytest.raises(KafkaTimeoutError, match="the attempt's own error"):
        await attempt.wait()
