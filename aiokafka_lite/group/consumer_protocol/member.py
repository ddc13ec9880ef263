"""The KIP-848 ("consumer" group protocol) member: the I/O shell around state.py.

Liveness, heartbeat_mode="task": a heartbeat task (a ConsumerGroupHeartbeat every interval *the
broker* gives, at once after a state change; failures said once) and the poll-deadline watchdog
(lapse.py). heartbeat_mode="thread": heartbeat_thread.py sends every heartbeat and watches the
poll deadline from a thread; this module publishes the requests to it and applies its answers
(apply_pending, in the loop), and a small task looks the coordinator up when it is unknown.

The poll path (rebalance_step) reconciles (reconcile.py), gives up lost partitions after
fencing or a lapse and rejoins with epoch 0 and the same member id. Fatal errors are stored and
raised by before_poll().
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from ..._net.backoff import Backoff
from ..._net.cluster import Cluster
from ..._net.failure_log import FailureLog
from ...config import ConsumerConfig
from ...errors import (
    BrokerError,
    KafkaError,
    UnsupportedVersionError,
)
from ...liveness.health import HealthInputs
from ...liveness.timers import LivenessTimers
from ...protocol.messages import CONSUMER_GROUP_HEARTBEAT
from ...structs import GroupMembershipOperation, OffsetAndMetadata, TopicPartition
from ...subscription import SubscriptionType
from ..lapse import PollLapses, watchdog_loop
from ..member import GroupMember, MemberHost
from ..tasks import Wakeup, cancel_and_await
from .commits import MemberOffsets
from .errors import UNSUPPORTED_VERSION, protocol_mismatch
from .heartbeat_thread import Kip848HeartbeatThread, Outbox, ThreadCallbacks
from .reconcile import Reconciler
from .state import (
    IN_GROUP,
    Event,
    Kip848Machine,
    State,
    Subscription,
    broker_regex_usable,
    leave_body,
    owned_field,
    subscription_for,
)

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
        self.heartbeats_sent = 0
        self.lapses = PollLapses(config, self.group_id)
        self.heartbeat_failures = FailureLog(log, f"group {self.group_id}: heartbeat",
                                             warn_after_seconds=config.session_timeout)
        self.join_failures = FailureLog(log, f"group {self.group_id}: join",
                                        warn_after_seconds=config.max_poll_interval)
        self._fatal: BaseException | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._topics_unchecked = True  # the subscribed names are checked against metadata in poll()
        self._wake = Wakeup()
        self._answer_waiters: list[asyncio.Future[None]] = []  # commit retries after STALE_MEMBER_EPOCH
        self._send_lock = asyncio.Lock()  # one heartbeat (or the leave) in flight at a time
        self._next_heartbeat = 0.0  # monotonic
        self._backoff = Backoff(config.retry_backoff, config.retry_backoff_max)
        self._heartbeat_version: int | None = None
        self.reconciler = Reconciler(self.machine, host, cluster, config, lambda: self._poke(now=True),
                                     self._broker_regex)
        self.offsets = MemberOffsets(cluster, config, self.machine, self._next_heartbeat_answer,
                                     self._stale_commit_reason)
        self._thread: Kip848HeartbeatThread | None = None
        if config.heartbeat_mode == "thread":
            self._thread = Kip848HeartbeatThread(
                self.group_id, timers, timers_lock, cluster.options, self.lapses,
                ThreadCallbacks(self._thread_answer, self._failed_at, self._thread_lapsed))

    # ------------------------------------------------------------ the poll path

    def rebalance_due(self) -> bool:
        m, sub = self.machine, self.host.subscription_state()
        if self._topics_unchecked and sub.type is SubscriptionType.TOPICS:
            return True
        if m.state is State.UNSUBSCRIBED:
            return sub.uses_group
        if m.state in (State.FENCED, State.STALE):
            return True
        return m.state is State.RECONCILING or bool(sub.awaiting_callback())

    async def rebalance_step(self) -> None:
        m, sub = self.machine, self.host.subscription_state()
        if self._topics_unchecked and sub.type is SubscriptionType.TOPICS:
            # The broker takes any name in a heartbeat; as in Java, a subscribed topic the
            # metadata calls invalid or unauthorized is raised from poll().
            await self.cluster.refresh_metadata(sorted(sub.topics), timeout=self.config.request_timeout)
            self.cluster.raise_topic_errors(sub.topics, subscribed=True)
            self._topics_unchecked = False
        self._start_liveness()
        if m.state is State.UNSUBSCRIBED and sub.uses_group:
            await self._subscribe()
        elif m.state is State.FENCED:
            await self.reconciler.lose()
            m.lost_done()
            self._poke(now=True)
        elif m.state is State.STALE:
            await self.reconciler.lose()
            self.lapses.reason = None
            m.rejoin()
            self._poke(now=True)
        elif m.state is State.RECONCILING:
            await self.reconciler.reconcile()
        elif sub.awaiting_callback():
            await self.reconciler.assigned_callback(sub.awaiting_callback())

    def before_poll(self) -> None:
        if self._thread is not None:
            self._thread.apply_pending()  # what the heartbeat thread learned, in order
        if self._fatal is not None:
            raise self._fatal

    def after_poll(self) -> None:
        self._publish()

    def subscription_changed(self, reason: str) -> None:
        log.debug("group %s: subscription changed: %s", self.group_id, reason)
        self._topics_unchecked = True
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

    # ------------------------------------------------------------ liveness

    def _start_liveness(self) -> None:
        if self._tasks or self._fatal is not None:
            return
        if self._thread is not None:  # the thread heartbeats and watches the poll deadline
            self._thread.start(self._publish)
            self._publish()
            self._tasks = [asyncio.create_task(self._coordinator_loop(), name="aiokafka-lite kip848 coordinator")]
            return
        self._tasks = [
            asyncio.create_task(self._heartbeat_loop(), name="aiokafka-lite kip848 heartbeat"),
            asyncio.create_task(watchdog_loop(self.timers, self.timers_lock,
                                              lambda: self._fatal is None and self.machine.state in IN_GROUP,
                                              self._leave_on_lapse, self.lapses),
                                name="aiokafka-lite poll watchdog"),
        ]

    async def stop_liveness(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_await(tasks)
        if self._thread is not None:
            await self._thread.stop()
        self._wake_commits()  # no heartbeat answer comes any more

    def _poke(self, now: bool = False) -> None:
        if now:
            self._next_heartbeat = 0.0
        self._wake.poke()
        self._publish(now)

    def _publish(self, now: bool = False) -> None:
        """Thread mode: give the heartbeat thread the member as it is now (heartbeat_thread.py)."""
        if self._thread is not None:
            self._thread.publish(self._outbox, now)

    def _outbox(self) -> Outbox | None:
        m = self.machine
        address = self.cluster.coordinator_address(self.group_id)
        if m.state not in IN_GROUP or address is None or self._fatal is not None:
            return None
        return Outbox(address, m.heartbeat_request(), owned_field(m.owned),
                      leave_body(self.group_id, m.member_id, m.instance_id), watch=m.state in IN_GROUP)

    async def _heartbeat_loop(self) -> None:
        while self._fatal is None:
            if self.machine.state not in IN_GROUP:
                await self._wake.sleep(math.inf)
                continue
            delay = self._next_heartbeat - time.monotonic()
            if delay > 0:
                await self._wake.sleep(delay)
                continue
            await self._heartbeat_once()

    async def _coordinator_loop(self) -> None:
        """Thread mode: look the coordinator up when it is unknown (the thread cannot)."""
        while self._fatal is None:
            m = self.machine
            if m.state in IN_GROUP and self.cluster.coordinator_address(self.group_id) is None:
                try:
                    await self.cluster.coordinator_connection(self.group_id, timeout=self.config.request_timeout)
                except KafkaError as exc:
                    self._failed(exc, m.member_epoch == 0)
                    await asyncio.sleep(self._next_heartbeat - time.monotonic())
                    continue
                self._publish(now=True)
            await self._wake.sleep(math.inf)

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
            self._on_answer(response, joining, carried=True)

    def _on_answer(self, response: dict[str, Any], joining: bool, carried: bool) -> None:
        verdict = self.machine.on_heartbeat_response(response, carried)
        self._wake_commits()
        if verdict.rediscover:
            self.cluster.mark_coordinator_dead(self.group_id)
            self._wake.poke()
        if verdict.retry:
            self._failed(BrokerError(verdict.code, "ConsumerGroupHeartbeat"), joining)
        elif verdict.fatal is not None:
            self._set_fatal(verdict.fatal)
        else:
            self._answered_ok(verdict.fenced, joining)

    def _thread_answer(self, response: dict[str, Any], carried: bool, when: float) -> None:
        """An answer the heartbeat thread got (applied here, in the loop's thread)."""
        if self.machine.state not in IN_GROUP:
            return  # e.g. the lapse leave went out meanwhile: the leave wins
        self._on_answer(response, self.machine.member_epoch == 0, carried)

    def _thread_lapsed(self, reason: str) -> None:
        """The heartbeat thread left the group at the poll deadline."""
        m = self.machine
        self.lapses.reason = reason
        if m.state in IN_GROUP:
            m.poll_lapsed()
            m.leave_sent()
            m.leave_done(lapsed=True)
        self._wake_commits()
        self.host.wake()

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
        self._failed_at(error, joining, time.monotonic())

    def _failed_at(self, error: KafkaError, joining: bool, now: float) -> None:
        if isinstance(error, UnsupportedVersionError):  # the thread's coordinator lacks KIP-848
            self._set_fatal(protocol_mismatch(UNSUPPORTED_VERSION, self.group_id, str(error)))
            return
        if self._thread is not None:
            self.machine.heartbeat_failed()  # the thread's request got no answer: resend it all
        (self.join_failures if joining else self.heartbeat_failures).failed(error, now)
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
        self._wake_commits()
        self.host.wake()

    async def _leave_on_lapse(self, reason: str) -> None:
        self.lapses.reason = reason
        self.machine.poll_lapsed()
        await self._send_leave(lapsed=True, timeout=self.config.request_timeout)
        self.host.wake()

    # ------------------------------------------------------------ leaving

    async def leave(self, reason: str, timeout: float | None,
                    operation: GroupMembershipOperation = GroupMembershipOperation.DEFAULT) -> bool:
        m = self.machine
        permanently = operation is GroupMembershipOperation.LEAVE
        if m.state not in IN_GROUP:
            if m.state is State.STALE:
                m.request_leave(permanently)
            return False
        # A static member that remains still says so (epoch -2, as by default); a dynamic one says nothing.
        silent = operation is GroupMembershipOperation.REMAIN and m.instance_id is None
        log.info("group %s: %s (%s)", self.group_id,
                 "closing without leaving, the session timeout removes the member" if silent else "leaving", reason)
        m.request_leave(permanently)
        return await self._send_leave(lapsed=False, timeout=timeout, tell_broker=not silent)

    async def _leave_quietly(self) -> None:
        await self._send_leave(lapsed=False, timeout=self.config.request_timeout)

    async def _send_leave(self, lapsed: bool, timeout: float | None, tell_broker: bool = True) -> bool:
        """The leave heartbeat (epoch -1, or -2 for a static member). With no coordinator known
        there is none to tell (as Java): the session timeout removes the member."""
        m = self.machine
        quiet = self._thread.quiet() if self._thread is not None else contextlib.nullcontext()
        try:
            async with self._send_lock, quiet:
                if m.state is not State.PREPARE_LEAVING or not tell_broker:
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
            self._wake_commits()  # out of the group (lapse, unsubscribe, close): they fail now

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

    def commit_generation(self) -> Hashable:
        return self.machine.member_id, self.machine.joins

    async def _next_heartbeat_answer(self) -> None:
        """For commits that met STALE_MEMBER_EPOCH: heartbeat now and wait for the answer, or
        for the member to leave the group (a lapse, fencing, leaving, heartbeats stopped): the
        commit then looks at the member again (and fails when it is no longer in the group)."""
        if not self.machine.in_group:
            return
        self._poke(now=True)
        waiter = asyncio.get_running_loop().create_future()
        self._answer_waiters.append(waiter)
        await waiter

    def _wake_commits(self) -> None:
        waiters, self._answer_waiters = self._answer_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _stale_commit_reason(self) -> str:
        why = self.lapses.reason or ("the member is not in the group with a current member epoch "
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
            "rebalances": self.reconciler.rebalances,
            "last_rebalance_partitions": vars(self.reconciler.counts).copy(),
            "heartbeats_sent": self.heartbeats_sent + (self._thread.heartbeats_sent if self._thread else 0),
            "heartbeat_failures": self.heartbeat_failures.total_failures,
            "poll_interval_lapses": self.lapses.count, "last_leave_delay_seconds": self.lapses.last_leave_delay,
        }

    def health_inputs(self) -> HealthInputs:
        return HealthInputs(
            group_id=self.group_id, max_poll_interval_ms=self.config.max_poll_interval_ms,
            session_timeout_ms=self.config.session_timeout_ms, joins=self.join_failures,
            lookups=self.cluster.coordinator_lookups(self.group_id),
            heartbeats=self.heartbeat_failures, coordinator_unreachable_since=None)

