"""Event-loop stall detection: a small task measures how late its own timer fires.

A background heartbeat task only runs when the loop is free. If user code blocks the loop (CPU
work, a sync driver, time.sleep) for a good part of session_timeout_ms, the coordinator may drop
the member. This says so, loudly, with the stall's length and the remedies.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

log = logging.getLogger("aiokafka_lite.consumer")

# How often the monitor wakes: often enough to time a stall well, rarely enough to cost nothing.
MONITOR_INTERVAL = 0.5
# Lateness below this is scheduling noise, not a stall.
NOISE = 0.05


class StallMonitor:
    def __init__(self, session_timeout: float, warning_ratio: float, heartbeat_mode: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = session_timeout * warning_ratio
        self.session_timeout = session_timeout
        self.heartbeat_mode = heartbeat_mode
        self.clock = clock
        self.stalls = 0             # stalls longer than the threshold
        self.longest_stall = 0.0    # seconds, any stall
        self.last_stall: float | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="aiokafka-lite stall monitor")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise  # our caller was cancelled, not the task: propagate

    async def _run(self) -> None:
        while True:
            planned = self.clock() + MONITOR_INTERVAL
            await asyncio.sleep(MONITOR_INTERVAL)
            self.observe(self.clock() - planned)

    def observe(self, lateness: float) -> None:
        """Record one measurement: how many seconds after its due time the timer fired."""
        if lateness < NOISE:
            return
        self.longest_stall = max(self.longest_stall, lateness)
        self.last_stall = lateness
        if lateness < self.threshold:
            return
        self.stalls += 1
        risk = ("the heartbeat thread kept the membership alive" if self.heartbeat_mode == "thread" else
                f"no heartbeat could be sent meanwhile; past session_timeout_ms="
                f"{self.session_timeout * 1000:.0f} the coordinator removes this member and its partitions "
                "are rebalanced")
        log.warning(
            "the event loop was blocked for %.1f s (%s). Run blocking or CPU-bound work off the loop "
            "with `await consumer.run_blocking(fn, *args)` (or asyncio.to_thread), or set "
            "heartbeat_mode='thread' so heartbeats survive a blocked loop.", lateness, risk)
