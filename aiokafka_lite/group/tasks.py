"""Stopping the background tasks a member owns."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


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
