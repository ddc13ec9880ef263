"""A consumer's attempt to connect (start(): the Consumer's and the ShareConsumer's), shared by the
calls that wait for it.

A call whose timeout lapses stops waiting, and the attempt goes on for the next call. It does not
go on for ever: while no call waits for it, it has `idle_limit` seconds (default_api_timeout_ms)
before it gives up, so a consumer dropped after a failed start leaves nothing running for long.
The next call then starts a fresh attempt.

The attempt's outcome is taken when it ends (a done-callback), so that an attempt that gave up with
nobody waiting, on a consumer dropped without close(), is not reported by asyncio as "Task exception
was never retrieved" (the consumer's ResourceWarning says what is wrong). The task keeps its outcome:
a caller that waits for it still gets its error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


class StartAttempt:
    def __init__(self, start: Callable[[], Coroutine[Any, Any, None]], idle_limit: float | None) -> None:
        self._idle_limit = idle_limit
        self._waiters = 0
        self._scope: asyncio.Timeout | None = None
        self.task = asyncio.create_task(self._run(start), name="aiokafka-lite start")
        self.task.add_done_callback(_retrieve)

    async def wait(self) -> None:
        """Wait for the attempt; a lapsed or cancelled caller leaves it running (shielded)."""
        self._waiters += 1
        self._reschedule()
        try:
            await asyncio.shield(self.task)
        finally:
            self._waiters -= 1
            self._reschedule()

    async def _run(self, start: Callable[[], Coroutine[Any, Any, None]]) -> None:
        async with asyncio.timeout(None) as scope:
            self._scope = scope
            self._reschedule()
            await start()

    def _reschedule(self) -> None:
        scope = self._scope
        if scope is None or self.task.done() or scope.expired():
            return
        if self._waiters or self._idle_limit is None:
            scope.reschedule(None)
        else:
            scope.reschedule(asyncio.get_running_loop().time() + self._idle_limit)


def _retrieve(task: asyncio.Task[None]) -> None:
    """The attempt has ended: its error, if any, is marked as taken (a caller saw it, or none will)."""
    if not task.cancelled():
        task.exception()
