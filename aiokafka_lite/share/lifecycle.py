"""The ShareConsumer's life cycle: the start attempt (one at a time, shared by the calls that wait
for it, going on as an owned task when a caller's timeout lapses) and close() (a graceful part
bounded by its limit, then always the forced part, both as owned tasks so a second or cancelled
close() can wait for them or cut them short)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ..errors import ConsumerClosedError


class StartOnce:
    """start(): the first call that needs the cluster starts ``start_once`` as a task; every
    caller waits for it within its own deadline; a failed attempt is tried again by the next call."""

    def __init__(self, start_once: Callable[[], Coroutine[Any, Any, None]], is_closed: Callable[[], bool]) -> None:
        self.started = False
        self._start_once = start_once
        self._is_closed = is_closed
        self._task: asyncio.Task[None] | None = None

    @property
    def attempted(self) -> bool:
        return self._task is not None

    async def ensure_started(self) -> None:
        if self.started:
            return
        task = self._task
        if task is None or task.done():
            if task is not None and not task.cancelled():
                task.exception()  # retrieved: it is tried again below
            if self._is_closed():
                raise ConsumerClosedError("the share consumer was closed before it connected")
            task = self._task = asyncio.get_running_loop().create_task(
                self._run(), name="aiokafka-lite share consumer start")
        await asyncio.shield(task)

    async def _run(self) -> None:
        await self._start_once()
        self.started = True

    async def stop(self) -> None:
        await cancel(self._task)


class Closing:
    """Closed from the first close() on; the graceful part and the forced part are tasks."""

    def __init__(self) -> None:
        self.closed = False
        self._task: asyncio.Task[None] | None = None
        self._graceful: asyncio.Task[None] | None = None

    async def close(self, timeout: float | None, graceful: Callable[[], Coroutine[Any, Any, None]],
                    by_force: Callable[[], Awaitable[None]]) -> None:
        if self._task is None:
            self.closed = True
            self._graceful = asyncio.create_task(graceful(), name="aiokafka-lite share close (graceful)")
            self._task = asyncio.create_task(_close(self._graceful, by_force), name="aiokafka-lite share close")
        close_task, graceful_task = self._task, self._graceful
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.shield(close_task)
                    return
        except asyncio.CancelledError:
            if graceful_task is not None:
                graceful_task.cancel()
            await asyncio.wait({close_task})
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
    """Cancel and await an owned task; its outcome is retrieved, never raised here."""
    if fut is None:
        return
    if not fut.done():
        fut.cancel()
        await asyncio.wait({fut})
    if not fut.cancelled():
        fut.exception()
