"""The ShareConsumer's start attempt: one at a time, shared by the calls that wait for it
(liveness/start_attempt.py, as the Consumer's: it goes on when a caller's timeout lapses, and gives
up after default_api_timeout_ms with nobody waiting). close()'s two parts are liveness/closing.py's."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..errors import ConsumerClosedError
from ..liveness.closing import cancel
from ..liveness.start_attempt import StartAttempt

if TYPE_CHECKING:
    from .._net.cluster import Cluster


class StartOnce:
    """start(): the first call that needs the cluster starts ``start_once``; every caller waits
    for it within its own deadline; a failed attempt is tried again by the next call."""

    def __init__(self, start_once: Callable[[], Coroutine[Any, Any, None]], is_closed: Callable[[], bool],
                 idle_limit: float | None) -> None:
        self.started = False
        self._start_once = start_once
        self._is_closed = is_closed
        self._idle_limit = idle_limit
        self._attempt: StartAttempt | None = None

    @property
    def attempted(self) -> bool:
        return self._attempt is not None

    async def ensure_started(self) -> None:
        if self.started:
            return
        attempt = self._attempt
        if attempt is None or attempt.task.done():  # none yet, or a failed one: tried again
            if self._is_closed():
                raise ConsumerClosedError("the share consumer was closed before it connected")
            attempt = self._attempt = StartAttempt(self._run, self._idle_limit)
        await attempt.wait()

    async def _run(self) -> None:
        await self._start_once()
        self.started = True

    def failures(self, connecting: Cluster | None) -> str | None:
        """While start() has not succeeded: why ``connecting`` (the attempt's cluster) cannot reach
        the cluster, for metrics()["bootstrap_failures"]."""
        return None if self.started or connecting is None else connecting.bootstrap_failures()

    async def stop(self) -> None:
        await cancel(None if self._attempt is None else self._attempt.task)
