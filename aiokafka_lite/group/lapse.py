"""The poll-deadline watchdog of the heartbeat-protocol members (KIP-848's consumer member, KIP-932's
share member): when max_poll_interval_ms passes without poll(), the member leaves (member epoch -1,
a static KIP-848 member -2) with the classic WARNING, so its partitions (a share member: its
acquired records) go to live members; the next poll() rejoins.

:class:`PollLapses` is the bookkeeping and the WARNING, shared by the asyncio watchdog task
(:func:`watchdog_loop`) and the KIP-848 heartbeat thread (consumer_protocol/heartbeat_thread.py).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from ..liveness.timers import LivenessTimers

log = logging.getLogger("aiokafka_lite.consumer")


class PollLimits(Protocol):
    """The two settings the WARNING names (ConsumerConfig has them)."""

    @property
    def max_poll_interval_ms(self) -> int: ...

    @property
    def max_poll_records(self) -> int: ...


class PollLapses:
    def __init__(self, config: PollLimits, group_id: str, handed_on: str = "its partitions") -> None:
        """``handed_on``: what goes to live members when this member leaves, for the WARNING."""
        self.config = config
        self.group_id = group_id
        self.handed_on = handed_on
        self.count = 0
        self.last_leave_delay: float | None = None
        self.reason: str | None = None  # why commits fail until the member rejoins

    def lapsed(self, timers: LivenessTimers, now: float, who: str = "") -> str:
        """A lapse seen at ``now`` (caller holds the timers lock): disarm the deadline, count it,
        log the WARNING; returns the reason later commits fail with."""
        config = self.config
        lapse = timers.seconds_since_last_poll(now) or 0.0
        timers.disarm_poll_deadline()
        self.count += 1
        self.last_leave_delay = lapse - timers.max_poll_interval
        log.warning(
            "group %s: %.1f s since the last poll() exceeds max_poll_interval_ms=%d: %sleaving the group "
            "so %s go to live members; the next poll() rejoins. If processing a batch "
            "takes this long, raise max_poll_interval_ms or lower max_poll_records (now %d).",
            self.group_id, lapse, config.max_poll_interval_ms, who, self.handed_on, config.max_poll_records,
        )
        return (f"this member left the group because {lapse:.1f} s passed between poll() calls, more "
                f"than max_poll_interval_ms={config.max_poll_interval_ms}")


async def watchdog_loop(timers: LivenessTimers, lock: threading.Lock, watching: Callable[[], bool],
                        on_lapse: Callable[[str], Awaitable[None]], lapses: PollLapses) -> None:
    """heartbeat_mode="task": runs until cancelled. Naps of its own: exactly to a near deadline,
    at most 0.25 s otherwise, since poll() only ever moves the deadline later once armed."""
    while True:
        if not watching():
            await asyncio.sleep(min(timers.max_poll_interval, 0.25))
            continue
        with lock:
            now = time.monotonic()
            delay = timers.time_to_poll_deadline(now)
            reason = lapses.lapsed(timers, now) if delay <= 0 else None
        if reason is None:
            await asyncio.sleep(min(delay, 0.25))
        else:
            await on_lapse(reason)
