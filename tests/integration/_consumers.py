"""Small helpers for consumer integration tests: poll or wait until a condition holds, bounded."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from aiokafka_lite import Consumer, ConsumerRecord
from aiokafka_lite.errors import AuthenticationError


def report(row: dict[str, object], variable: str = "CLUSTER_REPORT") -> None:
    """Print a test's figures, and append them to the file named by $``variable`` (JSON lines) if set."""
    print(json.dumps(row))
    if path := os.environ.get(variable):
        with open(path, "a") as out:
            out.write(json.dumps(row) + "\n")


async def refused_at_once(**settings: Any) -> str:
    """The message of the AuthenticationError a consumer with ``settings`` meets on its first call,
    which must come within 5 s (a refused credential is not retried)."""
    began = time.monotonic()
    with pytest.raises(AuthenticationError) as caught:
        async with Consumer(**settings) as consumer:
            await consumer.list_topics(timeout=10.0)
    assert time.monotonic() - began < 5.0, "a refused credential fails at once"
    return str(caught.value)


async def until(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    """Wait until `condition()` holds; fail the test after `timeout` seconds, saying `what` was awaited."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(interval)


async def poll_until(consumer: Consumer, done: Callable[[list[ConsumerRecord]], bool], *,
                     timeout: float = 60.0, poll_timeout: float = 0.5) -> list[ConsumerRecord]:
    """Poll, collecting records, until `done(records)`; fail the test after `timeout` seconds."""
    got: list[ConsumerRecord] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done(got):
        if loop.time() > deadline:
            raise AssertionError(f"condition not met after {timeout} s; {len(got)} records, "
                                 f"assignment {sorted(consumer.assignment())}")
        got.extend(await consumer.poll(timeout=poll_timeout))
    return got


async def join_as_the_block_does(code: str) -> None:
    """Run a documentation block that makes a ``consumer`` (its settings as written, the address
    already replaced), then start it and poll until the group gives it partitions."""
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    consumer: Consumer = namespace["consumer"]
    async with consumer:
        while not consumer.assignment():
            await consumer.poll(timeout=0.5)


class Poller:
    """Keeps a consumer polling in a background task (a live group member), collecting records."""

    def __init__(self, consumer: Consumer, poll_timeout: float = 0.2) -> None:
        self.consumer = consumer
        self.records: list[ConsumerRecord] = []
        self.poll_timeout = poll_timeout
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Poller:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        if self._task.done() and not self._task.cancelled() and self._task.exception():
            raise self._task.exception()  # type: ignore[misc]

    async def _run(self) -> None:
        while True:
            self.records.extend(await self.consumer.poll(timeout=self.poll_timeout))

    async def wait_for(self, condition: Callable[[], bool], timeout: float) -> float:
        """Seconds until `condition()` held; fails after `timeout`."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        while not condition():
            assert self._task is not None
            if self._task.done():
                self._task.result()
            if loop.time() - start > timeout:
                raise AssertionError(f"condition not met within {timeout} s; assignment "
                                     f"{sorted(self.consumer.assignment())}")
            await asyncio.sleep(0.02)
        return loop.time() - start
