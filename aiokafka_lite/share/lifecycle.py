"""The ShareConsumer's start attempt: one at a time, shared by the calls that wait for it, going on
as an owned task when a caller's timeout lapses. close()'s two parts are liveness/closing.py's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from ..errors import ConsumerClosedError
from ..liveness.closing import cancel


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
