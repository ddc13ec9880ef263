"""close() in two parts, for the Consumer and the ShareConsumer alike: a graceful part bounded by
the caller's timeout, then always the forced part. Both run as tasks the facade owns, so a second
close(), or a cancelled one, can wait for them or cut the graceful part short. And ``cancel``: how
an owned task is cancelled and awaited without losing the caller's own cancellation."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any


class Closing:
    """Closed from the first close() on; that call starts the graceful part and the forced part."""

    def __init__(self, name: str) -> None:
        self.closed = False
        self.forcing = False  # the forced part has begun: nothing is retried
        self._name = name
        self._task: asyncio.Task[None] | None = None
        self._graceful: asyncio.Task[None] | None = None

    async def close(self, timeout: float | None, graceful: Callable[[], Coroutine[Any, Any, None]],
                    by_force: Callable[[], Awaitable[None]]) -> None:
        """close() with a checked timeout: ``graceful`` and ``by_force`` start on the first call."""
        if self._task is None:
            self.closed = True
            self._graceful = asyncio.create_task(graceful(), name=f"aiokafka-lite {self._name} (graceful)")
            self._task = asyncio.create_task(_close(self._graceful, by_force), name=f"aiokafka-lite {self._name}")
        close_task, graceful_task = self._task, self._graceful
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.shield(close_task)
                    return
        except asyncio.CancelledError:
            if graceful_task is not None:
                graceful_task.cancel()
            await asyncio.wait({close_task})  # a second cancellation of ours ends this wait too
            if close_task.done() and not close_task.cancelled():
                close_task.exception()  # retrieved: this caller re-raises its cancellation instead
            raise
        if graceful_task is not None:  # this call's timeout lapsed: cut the graceful part short
            graceful_task.cancel()
        await asyncio.shield(close_task)


async def _close(graceful: asyncio.Task[None], by_force: Callable[[], Awaitable[None]]) -> None:
    try:
        await asyncio.wait({graceful})  # its cancellation (a shorter close()) is not ours
    finally:
        await by_force()
    error = None if graceful.cancelled() else graceful.exception()
    if error is not None:
        raise error


async def cancel(fut: asyncio.Future[Any] | None) -> None:
    """Cancel and await an owned task; its outcome is retrieved, never raised here. A cancellation
    of the caller while it waits is the caller's and goes on."""
    if fut is None:
        return
    if not fut.done():
        fut.cancel()
        await asyncio.wait({fut})
    if not fut.cancelled():
        fut.exception()  # retrieved, so asyncio does not log "exception never retrieved"
