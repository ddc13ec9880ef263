"""The two background paths of KIP-62, as owned asyncio tasks:

- heartbeat: while the member is STABLE, a Heartbeat every heartbeat_interval_ms on the
  coordinator's own connection; sooner after a failure (retry_backoff_ms, doubling while failures
  last); failures are said once (heartbeat_failure_log), WARNING only past session_timeout_ms;
- watchdog: when the time since the last poll() passes max_poll_interval_ms, stop heartbeating
  and leave the group; the next poll() rejoins.

Fatal errors are stored and raised from the next poll(); nothing here raises into the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from enum import Enum

from ..._net.failure_log import FailureLog
from ...errors import BrokerError, KafkaError, broker_error
from ...liveness.timers import LivenessTimers
from ..tasks import Wakeup, cancel_and_await
from .codes import (
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from .coordinator import GroupCoordinator
from .membership import Event

log = logging.getLogger("aiokafka_lite.consumer")

GROUP_AUTHORIZATION_FAILED = 30
FATAL_HEARTBEAT_CODES = {FENCED_INSTANCE_ID, GROUP_AUTHORIZATION_FAILED}


class LivenessTasks:
    def __init__(self, group: GroupCoordinator, timers: LivenessTimers, clock: Callable[[], float]) -> None:
        self.group = group
        self.timers = timers
        self.clock = clock
        self.fatal_error: BaseException | None = None
        self.wake = Wakeup()  # poked when membership changes, so sleeping loops re-plan
        self._tasks: list[asyncio.Task[None]] = []
        # metrics
        self.heartbeats_sent = 0
        self.heartbeat_failures = 0
        self.poll_lapses = 0
        self.last_leave_delay: float | None = None  # seconds from the poll deadline to LeaveGroup sent
        self.failure_log = heartbeat_failure_log(group, clock)

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._heartbeat_loop(), name="aiokafka-lite heartbeat"),
                asyncio.create_task(self._watchdog_loop(), name="aiokafka-lite poll watchdog"),
            ]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_await(tasks)

    def poke(self) -> None:
        self.wake.poke()

    def apply_pending(self) -> None:
        """Nothing to apply: the tasks change the membership directly (see HeartbeatThread)."""

    # ------------------------------------------------------------ heartbeat

    async def _heartbeat_loop(self) -> None:
        membership = self.group.membership
        while self.fatal_error is None:
            now = self.clock()
            if not membership.is_stable or not self.timers.has_session:
                await self.wake.sleep(self.timers.heartbeat_interval)
                continue
            if self.timers.session_expired(now):
                self.failure_log.failed(session_expired_message(self.group), now)
                self.group.cluster.mark_coordinator_dead(self.group.group_id)
                self.timers.reset_session(now)
            delay = self.timers.time_to_next_heartbeat(now)
            if delay > 0:
                await self.wake.sleep(delay)
                continue
            await self._heartbeat_once()

    async def _heartbeat_once(self) -> None:
        sent = self.clock()
        generation = self.group.membership.generation_id
        self.timers.on_heartbeat_sent(sent)
        self.heartbeats_sent += 1
        try:
            code = await self.group.heartbeat()
        except KafkaError as exc:  # connection lost, timeout, coordinator lookup failed: retry
            self.failure_log.failed(exc)
            self.heartbeat_failures += 1
            self.timers.on_heartbeat_failure(self.clock())
            return
        self._on_heartbeat_code(code, self.clock(), generation)

    def _on_heartbeat_code(self, code: int, now: float, generation: int) -> None:
        outcome = heartbeat_outcome(code)
        if outcome is Outcome.RETRY:
            self.failure_log.failed(BrokerError(code, "Heartbeat"), now)
            self.heartbeat_failures += 1
            self.timers.on_heartbeat_failure(now)
            return
        self.failure_log.recovered(now)  # the coordinator answered
        if outcome in (Outcome.ALIVE, Outcome.REJOIN):
            self.timers.on_heartbeat_success(now)
        else:
            self.timers.clear_session()
        self.fatal_error = apply_heartbeat_outcome(self.group, code, outcome, generation) or self.fatal_error


    # ------------------------------------------------------------ poll-deadline watchdog

    async def _watchdog_loop(self) -> None:
        membership = self.group.membership
        while self.fatal_error is None:
            if not membership.is_stable:
                await self.wake.sleep(self.timers.max_poll_interval)
                continue
            delay = self.timers.time_to_poll_deadline(self.clock())
            if delay > 0:
                await self.wake.sleep(delay)
                continue
            await self._leave_on_lapse()

    async def _leave_on_lapse(self) -> None:
        now = self.clock()
        lapse = self.timers.seconds_since_last_poll(now) or 0.0
        config = self.group.config
        self.poll_lapses += 1
        self.timers.disarm_poll_deadline()
        self.timers.clear_session()  # no more heartbeats until the next poll() rejoins
        self.group.lapse(
            f"this member left the group because {lapse:.1f} s passed between poll() calls, more than "
            f"max_poll_interval_ms={config.max_poll_interval_ms}"
        )
        log.warning(
            "group %s: %.1f s since the last poll() exceeds max_poll_interval_ms=%d: leaving the group "
            "so its partitions go to live members; the next poll() rejoins. If processing a batch "
            "takes this long, raise max_poll_interval_ms or lower max_poll_records (now %d).",
            self.group.group_id, lapse, config.max_poll_interval_ms, config.max_poll_records,
        )
        self.last_leave_delay = lapse - self.timers.max_poll_interval
        try:
            await self.group.leave("consumer poll timeout has expired", timeout=config.request_timeout)
        except KafkaError as exc:
            log.info("group %s: LeaveGroup after the poll lapse failed: %s", self.group.group_id, exc)


def heartbeat_failure_log(group: GroupCoordinator, clock: Callable[[], float]) -> FailureLog:
    """Heartbeat failures: a broker restart causes a few (INFO, then DEBUG); a WARNING only once
    they have lasted session_timeout_ms, when the coordinator has evicted this member anyway."""
    return FailureLog(log, f"group {group.group_id}: heartbeat", clock=clock,
                      warn_after_seconds=group.config.session_timeout)


def session_expired_message(group: GroupCoordinator) -> str:
    return (f"no heartbeat succeeded for session_timeout_ms={group.config.session_timeout_ms}; "
            "rediscovering the coordinator")


class Outcome(Enum):
    ALIVE = "alive"      # session extended
    REJOIN = "rejoin"    # alive, but the group is rebalancing: the next poll() rejoins
    LOST = "lost"        # the generation or member id is gone: rejoin, partitions lost
    FATAL = "fatal"      # fenced or not authorized: raised from the next poll()
    RETRY = "retry"      # no verdict (coordinator moved, busy...): try again after the backoff


def heartbeat_outcome(code: int) -> Outcome:
    """What a Heartbeat answer means; the task and the heartbeat thread both go by this."""
    if code == NONE:
        return Outcome.ALIVE
    if code == REBALANCE_IN_PROGRESS:
        return Outcome.REJOIN
    if code in (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
        return Outcome.LOST
    if code in FATAL_HEARTBEAT_CODES:
        return Outcome.FATAL
    return Outcome.RETRY


def apply_heartbeat_outcome(group: GroupCoordinator, code: int, outcome: Outcome,
                            generation: int) -> BrokerError | None:
    """Apply a heartbeat verdict (about the generation it was sent in) to the membership, in the
    loop's thread; returns a fatal error. Verdicts about an older generation are ignored."""
    membership = group.membership
    if outcome is Outcome.REJOIN and membership.is_stable:
        log.info("group %s: rebalance in progress; the next poll() rejoins", group.group_id)
        membership.handle(Event.REBALANCE_IN_PROGRESS, generation_id=generation)
    elif outcome is Outcome.LOST:
        log.info("group %s: heartbeat says %s; the next poll() rejoins", group.group_id, BrokerError(code).name)
        membership.handle(Event.UNKNOWN_MEMBER_ID if code == UNKNOWN_MEMBER_ID else Event.ILLEGAL_GENERATION,
                          generation_id=generation)
    elif outcome is Outcome.FATAL:
        if code == FENCED_INSTANCE_ID:
            membership.handle(Event.FENCED)
        group.on_rejoin_needed()  # let a waiting poll() raise it now
        return broker_error(code, f"Heartbeat for group {group.group_id!r}")
    if outcome is not Outcome.ALIVE:
        group.on_rejoin_needed()  # a waiting poll() rejoins now, not after its wait slice
    return None
