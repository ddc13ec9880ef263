"""The background tasks a member owns: their wake-up, and stopping them."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Iterable


class Wakeup:
    """What a member's background loop sleeps on: up to a delay, or until poked (the membership
    changed, so the loop plans again)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def poke(self) -> None:
        self._event.set()

    async def sleep(self, delay: float) -> None:
        """Up to ``delay`` seconds (math.inf: until poked); a poke before the call does not count."""
        self._event.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(None if math.isinf(delay) else max(delay, 0.0)):
                await self._event.wait()


async def cancel_and_await(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Cancel every task, then wait for each to end. The tasks' own ends (their cancellation,
    an error) are not raised here; a cancellation of the caller is: asyncio.wait() lets it
    through, where awaiting a cancelled task under suppress(CancelledError) swallowed it."""
    owned = list(tasks)
    for task in owned:
        task.cancel()
    running = [task for task in owned if not task.done()]
    if running:
        await asyncio.wait(running)
    for task in owned:
        if not task.cancelled():
            task.exception()  # retrieved: the error of a task being stopped has no taker now
