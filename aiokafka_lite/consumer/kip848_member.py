"""The KIP-848 ("consumer" group protocol) member: the I/O shell around kip848_state.py.

Two owned tasks, as for the classic protocol (background.py):

- heartbeat: a ConsumerGroupHeartbeat every heartbeat_interval_ms *the broker* gives, at once
  after a state change (join, reconciliation done); failures said once (FailureLog);
- watchdog: when max_poll_interval_ms passes without poll(), leave (member epoch -1, static -2)
  with the classic WARNING, stop heartbeating; the next poll() gives the partitions up as lost and
  rejoins with epoch 0 and the same member id.

The poll path (rebalance_step) does the rest: revoke what the target dropped (commit first, then
on_partitions_revoked), add what it brought (on_partitions_assigned), give up lost partitions
after fencing (on_partitions_lost, no commit). Fatal errors are stored and raised by before_poll().
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from .._net.backoff import Backoff
from .._net.cluster import Cluster
from .._net.failure_log import FailureLog
from ..config import ConsumerConfig
from ..errors import (
    BrokerError,
    KafkaError,
    UnsupportedVersionError,
)
from ..protocol.messages import CONSUMER_GROUP_HEARTBEAT
from ..structs import OffsetAndMetadata, TopicPartition
from .health import HealthInputs
from .kip848_commits import MemberOffsets
from .kip848_errors import UNSUPPORTED_VERSION, protocol_mismatch
from .kip848_state import (
    IN_GROUP,
    Event,
    Kip848Machine,
    Plan,
    State,
    Subscription,
    broker_regex_usable,
    subscription_for,
)
from .liveness import LivenessTimers
from .member import GroupMember, ListenerEvent, MemberHost, RebalanceCounts
from .subscription import SubscriptionType

log = logging.getLogger("aiokafka_lite.consumer")


class Kip848Member(GroupMember):
    protocol = "consumer"

    def __init__(self, cluster: Cluster, config: ConsumerConfig, host: MemberHost,
                 timers: LivenessTimers, timers_lock: threading.Lock) -> None:
        assert config.group_id is not None
        self.cluster = cluster
        self.config = config
        self.host = host
        self.timers = timers
        self.timers_lock = timers_lock
        self.group_id: str = config.group_id
        self.machine = Kip848Machine(
            self.group_id, config.group_instance_id, rebalance_timeout_ms=config.max_poll_interval_ms,
            server_assignor=config.group_remote_assignor, rack_id=config.client_rack or None)
        self.counts = RebalanceCounts()
        self.rebalances = 0
        self.heartbeats_sent = 0
        self.poll_lapses = 0
        self.last_leave_delay: float | None = None
        self.heartbeat_failures = FailureLog(log, f"group {self.group_id}: heartbeat",
                                             warn_after_seconds=config.session_timeout)
        self.join_failures = FailureLog(log, f"group {self.group_id}: join",
                                        warn_after_seconds=config.max_poll_interval)
        self._fatal: BaseException | None = None
        self._lapse_reason: str | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        self._answered = asyncio.Condition()  # notified on every heartbeat answer (commit retries)
        self._send_lock = asyncio.Lock()  # one heartbeat (or the leave) in flight at a time
        self._next_heartbeat = 0.0  # monotonic
        self._backoff = Backoff(config.retry_backoff, config.retry_backoff_max)
        self._heartbeat_version: int | None = None
        self.offsets = MemberOffsets(cluster, config, self.machine, self._next_heartbeat_answer,
                                     self._stale_commit_reason)

    # ------------------------------------------------------------ the poll path

    def rebalance_due(self) -> bool:
        m, sub = self.machine, self.host.subscription_state()
        if m.state is State.UNSUBSCRIBED:
            return sub.uses_group
        if m.state in (State.FENCED, State.STALE):
            return True
        return m.state is State.RECONCILING or bool(sub.awaiting_callback())

    async def rebalance_step(self) -> None:
        m, sub = self.machine, self.host.subscription_state()
        self._start_liveness()
        if m.state is State.UNSUBSCRIBED and sub.uses_group:
            await self._subscribe()
        elif m.state is State.FENCED:
            await self._lose()
            m.lost_done()
            self._poke(now=True)
        elif m.state is State.STALE:
            await self._lose()
            self._lapse_reason = None
            m.rejoin()
            self._poke(now=True)
        elif m.state is State.RECONCILING:
            await self._reconcile()
        elif sub.awaiting_callback():
            await self._assigned_callback(sub.awaiting_callback())

    def before_poll(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    def subscription_changed(self, reason: str) -> None:
        log.debug("group %s: subscription changed: %s", self.group_id, reason)
        m, sub = self.machine, self.host.subscription_state()
        if not sub.uses_group:
            if m.state in IN_GROUP:  # unsubscribe(): leave in the background, as Java
                m.request_leave()
                self._tasks.append(asyncio.get_running_loop().create_task(
                    self._leave_quietly(), name="aiokafka-lite kip848 leave"))
            return
        if m.state in IN_GROUP:
            m.subscribe(self._subscription())
            self._poke(now=True)
        self.host.wake()

    async def _subscribe(self) -> None:
        sub = self.host.subscription_state()
        conn = await self.cluster.coordinator_connection(self.group_id, timeout=self.config.request_timeout)
        try:
            self._heartbeat_version = conn.version_for(CONSUMER_GROUP_HEARTBEAT)
        except UnsupportedVersionError as exc:
            error = protocol_mismatch(UNSUPPORTED_VERSION, self.group_id, str(exc))
            self._set_fatal(error)
            raise error from exc
        if sub.type is SubscriptionType.PATTERN and not self._broker_regex():
            await self.cluster.refresh_metadata(None, timeout=self.config.request_timeout)
            sub.match_pattern(self.cluster.topics(exclude_internal=self.config.exclude_internal_topics))
        self.machine.subscribe(self._subscription())
        self._poke(now=True)

    def _broker_regex(self) -> bool:
        return broker_regex_usable(self.host.subscription_state().pattern, self._heartbeat_version)

    def _subscription(self) -> Subscription:
        return subscription_for(self.host.subscription_state(), self._heartbeat_version)

    async def _reconcile(self) -> None:
        m, sub = self.machine, self.host.subscription_state()
        plan = m.plan(self.cluster.metadata.topic_name)
        if plan is not None and plan.unresolved:
            await self.cluster.refresh_metadata(None, timeout=self.config.request_timeout)
            plan = m.plan(self.cluster.metadata.topic_name)
        if plan is None:
            return
        if self.config.enable_auto_commit and sub.assigned():
            # As Java (ConsumerMembershipManager.signalReconciliationStarted): every reconciliation
            # starts with an auto-commit of everything consumed, whether or not anything is revoked.
            await self.host.commit_before_revoke(sub.assigned())
        revoked = set(plan.revoke) & sub.assigned()
        if revoked:
            try:
                await self.host.run_listener(ListenerEvent.REVOKED, revoked)
                await self.host.drain_commits()
            finally:  # given up however the callback ended: delivered once, not again
                sub.set_assignment(sub.assigned() - revoked)
        if m.state is not State.RECONCILING or m.member_epoch != plan.epoch:
            return  # fenced, left or a newer target meanwhile: the next step plans again
        await self._assigned_callback(self._take(plan, revoked))

    def _take(self, plan: Plan, revoked: set[TopicPartition]) -> set[TopicPartition]:
        sub = self.host.subscription_state()
        added = set(plan.add) - sub.assigned()
        sub.set_assignment(sub.assigned() | added)
        sub.set_awaiting_callback(added, True)
        if sub.type is SubscriptionType.PATTERN and self._broker_regex():
            sub.match_pattern({tp.topic for tp in sub.assigned()})
        self.machine.reconciled(plan)
        self.counts = RebalanceCounts(assigned=len(added), revoked=len(revoked))
        self.rebalances += 1
        log.info("group %s: member epoch %d, assigned %s (added %s, revoked %s)", self.group_id,
                 self.machine.member_epoch, sorted(sub.assigned()), sorted(added), sorted(revoked))
        self._poke(now=True)  # acknowledge at once
        self.host.member_joined()
        return added

    async def _assigned_callback(self, partitions: set[TopicPartition]) -> None:
        await self.host.run_listener(ListenerEvent.ASSIGNED, partitions)
        self.host.subscription_state().set_awaiting_callback(partitions, False)

    async def _lose(self) -> None:
        sub = self.host.subscription_state()
        lost = sub.assigned()
        self.counts = RebalanceCounts(lost=len(lost))
        if not lost:
            return
        try:
            await self.host.run_listener(ListenerEvent.LOST, lost)
        finally:
            sub.set_assignment(())

    # ------------------------------------------------------------ liveness

    def _start_liveness(self) -> None:
        if not self._tasks and self._fatal is None:
            self._tasks = [
                asyncio.create_task(self._heartbeat_loop(), name="aiokafka-lite kip848 heartbeat"),
                asyncio.create_task(self._watchdog_loop(), name="aiokafka-lite poll watchdog"),
            ]

    async def stop_liveness(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _poke(self, now: bool = False) -> None:
        if now:
            self._next_heartbeat = 0.0
        self._wake.set()

    async def _sleep(self, delay: float) -> None:
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(None if math.isinf(delay) else max(delay, 0.0)):
                await self._wake.wait()

    async def _heartbeat_loop(self) -> None:
        while self._fatal is None:
            if self.machine.state not in IN_GROUP:
                await self._sleep(math.inf)
                continue
            delay = self._next_heartbeat - time.monotonic()
            if delay > 0:
                await self._sleep(delay)
                continue
            await self._heartbeat_once()

    async def _heartbeat_once(self) -> None:
        m = self.machine
        async with self._send_lock:
            if m.state not in IN_GROUP:
                return
            joining = m.member_epoch == 0
            try:
                response = await self._send_heartbeat()
            except KafkaError as exc:
                m.heartbeat_failed()
                self._failed(exc, joining)
                return
            verdict = m.on_heartbeat_response(response)
        async with self._answered:
            self._answered.notify_all()
        if verdict.rediscover:
            self.cluster.mark_coordinator_dead(self.group_id)
        if verdict.retry:
            self._failed(BrokerError(verdict.code, "ConsumerGroupHeartbeat"), joining)
        elif verdict.fatal is not None:
            self._set_fatal(verdict.fatal)
        else:
            self._answered_ok(verdict.fenced, joining)

    async def _send_heartbeat(self) -> dict[str, Any]:
        conn = await self.cluster.coordinator_connection(self.group_id, timeout=self.config.request_timeout)
        try:
            version = conn.version_for(CONSUMER_GROUP_HEARTBEAT)
        except UnsupportedVersionError as exc:
            self._set_fatal(protocol_mismatch(UNSUPPORTED_VERSION, self.group_id, str(exc)))
            raise
        if version != self._heartbeat_version:
            self._heartbeat_version = version
            self.machine.subscription = self._subscription()
        body = self.machine.heartbeat_request()
        self.heartbeats_sent += 1
        with self.timers_lock:  # the timers measure the round trip (metrics' heartbeat_rtt_seconds)
            self.timers.on_heartbeat_sent(time.monotonic())
        try:
            return await conn.send(CONSUMER_GROUP_HEARTBEAT, version, body)
        except KafkaError:
            self.cluster.mark_coordinator_dead(self.group_id)
            raise

    def _failed(self, error: KafkaError, joining: bool) -> None:
        (self.join_failures if joining else self.heartbeat_failures).failed(error)
        now = time.monotonic()
        with self.timers_lock:
            self.timers.on_heartbeat_failure(now)
        self._backoff.failed(now)
        self._next_heartbeat = now + self._backoff.wait_time(now)

    def _answered_ok(self, fenced: bool, joining: bool) -> None:
        m = self.machine
        self.heartbeat_failures.recovered()
        self._backoff.succeeded()
        if joining and m.member_epoch > 0:
            self.join_failures.recovered(detail=f"member epoch {m.member_epoch}")
            log.info("group %s: joined as member %s, epoch %d", self.group_id, m.member_id, m.member_epoch)
        if fenced:
            log.info("group %s: fenced (member epoch %d); partitions lost, rejoining", self.group_id,
                     m.member_epoch)
        interval = (m.heartbeat_interval_ms or self.config.heartbeat_interval_ms) / 1000
        with self.timers_lock:
            self.timers.on_heartbeat_success(time.monotonic())
            self.timers.heartbeat_interval = interval
        self._next_heartbeat = time.monotonic() + interval
        if fenced or m.state is State.RECONCILING:
            self.host.wake()

    def _set_fatal(self, error: BaseException) -> None:
        if self._fatal is None:
            self._fatal = error
            log.error("group %s: %s", self.group_id, error)
        if self.machine.state is not State.FATAL:
            self.machine.fatal = error
            self.machine.handle(Event.FATAL)
        self.host.wake()

    async def _watchdog_loop(self) -> None:
        while self._fatal is None:
            if self.machine.state not in IN_GROUP:
                await self._sleep_watchdog(self.timers.max_poll_interval)
                continue
            with self.timers_lock:
                delay = self.timers.time_to_poll_deadline(time.monotonic())
            if delay > 0:
                await self._sleep_watchdog(delay)
                continue
            await self._leave_on_lapse()

    async def _sleep_watchdog(self, delay: float) -> None:
        # Naps of its own (the heartbeat loop owns the wake event): exactly to a near deadline, at
        # most 0.25 s otherwise, since poll() only ever moves the deadline later once armed.
        await asyncio.sleep(min(delay, 0.25))

    async def _leave_on_lapse(self) -> None:
        config = self.config
        with self.timers_lock:
            now = time.monotonic()
            lapse = self.timers.seconds_since_last_poll(now) or 0.0
            self.timers.disarm_poll_deadline()
        self.poll_lapses += 1
        self._lapse_reason = (f"this member left the group because {lapse:.1f} s passed between poll() "
                              f"calls, more than max_poll_interval_ms={config.max_poll_interval_ms}")
        log.warning(
            "group %s: %.1f s since the last poll() exceeds max_poll_interval_ms=%d: leaving the group "
            "so its partitions go to live members; the next poll() rejoins. If processing a batch "
            "takes this long, raise max_poll_interval_ms or lower max_poll_records (now %d).",
            self.group_id, lapse, config.max_poll_interval_ms, config.max_poll_records,
        )
        self.last_leave_delay = lapse - self.timers.max_poll_interval
        self.machine.poll_lapsed()
        await self._send_leave(lapsed=True, timeout=config.request_timeout)
        self.host.wake()

    # ------------------------------------------------------------ leaving

    async def leave(self, reason: str, timeout: float | None) -> bool:
        m = self.machine
        if m.state not in IN_GROUP:
            if m.state is State.STALE:
                m.request_leave()
            return False
        log.info("group %s: leaving (%s)", self.group_id, reason)
        m.request_leave()
        return await self._send_leave(lapsed=False, timeout=timeout)

    async def _leave_quietly(self) -> None:
        await self._send_leave(lapsed=False, timeout=self.config.request_timeout)

    async def _send_leave(self, lapsed: bool, timeout: float | None) -> bool:
        """The leave heartbeat (epoch -1, or -2 for a static member). With no coordinator known
        there is none to tell (as Java): the session timeout removes the member."""
        m = self.machine
        try:
            async with self._send_lock:
                if m.state is not State.PREPARE_LEAVING:
                    return False
                if self.cluster.coordinator(self.group_id) is None:
                    log.info("group %s: coordinator unknown, leaving without a heartbeat", self.group_id)
                    return False
                conn = await self.cluster.coordinator_connection(self.group_id, timeout=timeout)
                version = conn.version_for(CONSUMER_GROUP_HEARTBEAT)
                body = m.heartbeat_request()
                m.leave_sent()
                response = await conn.send(CONSUMER_GROUP_HEARTBEAT, version, body, timeout=timeout)
                if response["error_code"]:
                    log.info("group %s: the leave heartbeat answered %d", self.group_id, response["error_code"])
                return True
        except KafkaError as exc:
            log.info("group %s: the leave heartbeat failed: %s", self.group_id, exc)
            return False
        finally:
            if m.state in (State.PREPARE_LEAVING, State.LEAVING):
                m.leave_done(lapsed)

    # ------------------------------------------------------------ state

    @property
    def fatal_error(self) -> BaseException | None:
        return self._fatal

    @property
    def is_stable(self) -> bool:
        return self.machine.in_group

    @property
    def mid_join(self) -> bool:
        return self.machine.state is State.JOINING

    # ------------------------------------------------------------ offsets

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout: float | None,
                     standalone: bool = False) -> None:
        await self.offsets.commit(offsets, timeout, standalone)

    async def fetch_committed(self, tps: Iterable[TopicPartition], timeout: float | None
                              ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return await self.offsets.fetch_committed(tps, timeout)

    async def _next_heartbeat_answer(self) -> None:
        """For commits that met STALE_MEMBER_EPOCH: heartbeat now and wait for the answer."""
        self._poke(now=True)
        async with self._answered:
            await self._answered.wait()

    def _stale_commit_reason(self) -> str:
        why = self._lapse_reason or ("the member is not in the group with a current member epoch "
                                     f"(state {self.machine.state.value})")
        return (f"commit failed: {why}. The partitions may already be owned by another member, which "
                "will process the uncommitted records again. Poll more often, or raise "
                "max_poll_interval_ms or lower max_poll_records.")

    # ------------------------------------------------------------ metrics

    def metrics(self) -> dict[str, Any]:
        # The keys the classic member has mean the same here (dashboards and /health read them);
        # generation_id is the member epoch, as Java's groupMetadata().generationId() under KIP-848.
        m = self.machine
        return {
            "group_id": self.group_id, "group_protocol": self.protocol, "group_state": m.state.name,
            "generation_id": m.member_epoch, "member_epoch": m.member_epoch, "member_id": m.member_id,
            "group_instance_id": m.instance_id,
            "heartbeat_interval_ms": m.heartbeat_interval_ms,
            "rebalances": self.rebalances,
            "last_rebalance_partitions": vars(self.counts).copy(),
            "heartbeats_sent": self.heartbeats_sent,
            "heartbeat_failures": self.heartbeat_failures.total_failures,
            "poll_interval_lapses": self.poll_lapses, "last_leave_delay_seconds": self.last_leave_delay,
        }

    def health_inputs(self) -> HealthInputs:
        return HealthInputs(
            group_id=self.group_id, max_poll_interval_ms=self.config.max_poll_interval_ms,
            session_timeout_ms=self.config.session_timeout_ms, joins=self.join_failures,
            lookups=self.cluster.coordinator_lookups(self.group_id),
            heartbeats=self.heartbeat_failures, coordinator_unreachable_since=None)

