"""Stopping the background tasks a member owns."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


async def cancel_and_await(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Cancel every task, then await each. Only the tasks' own cancellation is suppressed: awaiting
    a task we cancelled re-raises its CancelledError; a cancellation of the caller still propagates."""
    owned = list(tasks)
    for task in owned:
        task.cancel()
    for task in owned:
        with contextlib.suppress(asyncio.CancelledError):
            await task
