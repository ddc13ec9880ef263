"""The KIP-932 share-group member: the asyncio shell around state.py.

Three owned tasks: the heartbeat task (a ShareGroupHeartbeat every interval *the broker* gives, at
once after a change; on the coordinator's own connection, so heartbeats never queue behind a
ShareFetch long poll), the poll-deadline watchdog (group/lapse.py: when max_poll_interval_ms
passes without before_poll(), one WARNING, the leave heartbeat, no more heartbeats; the next
before_poll() rejoins with epoch 0 and the same member id) and a metadata task that names the
assigned topic ids. close() cancels and awaits them. A fatal answer is stored and raised by the
next before_poll(); so is an unexpected error that ended one of the tasks.

The share consumer (the facade) drives it: subscribe(), before_poll() at the start of every poll,
assignment() / assignment_by_id() for what to fetch, member_id for ShareFetch, leave() and close().
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

from ..._net.backoff import Backoff
from ..._net.cluster import Cluster
from ..._net.failure_log import FailureLog
from ...errors import BrokerError, IllegalStateError, KafkaError, UnsupportedVersionError
from ...liveness.timers import LivenessTimers
from ...protocol.messages import SHARE_GROUP_HEARTBEAT
from ...structs import TopicPartition
from ..lapse import PollLapses, watchdog_loop
from ..tasks import Wakeup, cancel_and_await
from .errors import no_share_groups
from .state import IN_GROUP, ShareMachine, State

log = logging.getLogger("aiokafka_lite.consumer")

# The broker owns the share session (group.share.session.timeout.ms); the timers keep only the
# poll clock and the heartbeat round trip here, so their session figure is nominal.
_NOMINAL_SESSION = 45.0
_MISSING_TOPIC_RECHECK = 5.0  # seconds; the broker's assignment, not this, is what reads a new topic


@dataclass(frozen=True)
class ShareMemberSettings:
    """What the member takes of the share consumer's settings (Java's names in snake case)."""

    max_poll_interval_ms: int = 300000
    max_poll_records: int = 500  # named by the lapse WARNING only
    request_timeout_ms: int = 30000  # each heartbeat, and the coordinator lookup before it
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    heartbeat_interval_ms: int = 5000  # until the broker's first answer gives its own
    client_rack: str | None = None

    @property
    def request_timeout(self) -> float:
        return self.request_timeout_ms / 1000


class ShareMember:
    protocol = "share"

    def __init__(self, cluster: Cluster, group_id: str, settings: ShareMemberSettings | None = None,
                 on_change: Callable[[], None] | None = None) -> None:
        """``on_change``: called (in the loop) when the named assignment changes or the member
        leaves the group, e.g. to wake a fetcher."""
        if not group_id:
            raise ValueError("a share member needs a group id")
        self.cluster = cluster
        self.group_id = group_id
        self.settings = settings = settings or ShareMemberSettings()
        self.machine = ShareMachine(group_id, rack_id=settings.client_rack or None)
        self.on_change = on_change
        self.timers = LivenessTimers(_NOMINAL_SESSION, min(settings.heartbeat_interval_ms / 1000, 15.0),
                                     settings.max_poll_interval_ms / 1000, settings.retry_backoff_ms / 1000,
                                     settings.retry_backoff_max_ms / 1000)
        self.timers_lock = threading.Lock()  # the watchdog's contract (shared with heartbeat threads)
        self.lapses = PollLapses(settings, group_id, handed_on="its acquired records")
        self.heartbeat_failures = FailureLog(log, f"share group {group_id}: heartbeat",
                                             warn_after_seconds=_NOMINAL_SESSION / 3)
        self.join_failures = FailureLog(log, f"share group {group_id}: join",
                                        warn_after_seconds=settings.max_poll_interval_ms / 1000)
        self.heartbeats_sent = 0
        self.last_leave_delay: float | None = None  # seconds from the poll deadline to the leave's answer
        self._last_answer: float | None = None  # monotonic
        self._fatal: BaseException | None = None
        self._closed = False
        self._tasks: list[asyncio.Task[None]] = []
        self._wake = Wakeup()
        self._names_wanted = asyncio.Event()
        self._topic_error: KafkaError | None = None  # an invalid or unauthorized subscribed topic
        self._send_lock = asyncio.Lock()  # one heartbeat (or the leave) in flight at a time
        self._next_heartbeat = 0.0  # monotonic
        self._backoff = Backoff(settings.retry_backoff_ms / 1000, settings.retry_backoff_max_ms / 1000)
        self._notified: frozenset[TopicPartition] = frozenset()

    # ------------------------------------------------------------ what the facade calls

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join with these topics, or send the new set in the next heartbeat. An empty set leaves
        the group in the background (as unsubscribe())."""
        self._check_usable()
        wanted = frozenset(topics)
        m = self.machine
        if not wanted:
            if m.state in IN_GROUP:
                self._start_tasks()
                m.request_leave()
                self._tasks.append(asyncio.get_running_loop().create_task(
                    self._leave_quietly(), name="aiokafka-lite share leave"))
            elif m.state is State.STALE:
                m.request_leave()
            return
        self._start_tasks()
        m.subscribe(wanted)
        self._names_wanted.set()  # do the topics exist?
        self._poke()

    def before_poll(self) -> None:
        """The start of every poll: raise a stored fatal error, stamp the poll clock, rejoin after
        a poll lapse (epoch 0, the same member id)."""
        self._check_usable()
        if self._fatal is not None:
            raise self._fatal
        error, self._topic_error = self._topic_error, None
        if error is not None:
            raise error
        with self.timers_lock:
            self.timers.on_poll(time.monotonic())
        if self.machine.state is State.STALE:
            self.lapses.reason = None
            self.machine.rejoin()
            log.info("share group %s: rejoining after the poll lapse, as member %s", self.group_id,
                     self.machine.member_id)
            self._poke()

    def assignment(self) -> set[TopicPartition]:
        """The partitions this member may fetch from (topic ids the metadata names already)."""
        return set(self.machine.named_assignment())

    def assignment_by_id(self) -> dict[uuid.UUID, frozenset[int]]:
        """The same by topic id, as ShareFetch names them (named or not)."""
        by_id: dict[uuid.UUID, set[int]] = {}
        for topic_id, partition in self.machine.assignment:
            by_id.setdefault(topic_id, set()).add(partition)
        return {topic_id: frozenset(ps) for topic_id, ps in by_id.items()}

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.machine.names.get(topic_id)

    @property
    def member_id(self) -> str:
        return self.machine.member_id

    @property
    def member_epoch(self) -> int:
        return self.machine.member_epoch

    @property
    def state(self) -> State:
        return self.machine.state

    @property
    def in_group(self) -> bool:
        return self.machine.in_group

    @property
    def fatal_error(self) -> BaseException | None:
        return self._fatal

    async def leave(self, timeout: float | None) -> bool:
        """Leave the group now (epoch -1), waiting at most ``timeout`` seconds (None: the request
        timeout) for the answer. True when the broker answered; a failure or a lapse is logged
        (INFO) and the member is out of the group either way (the session timeout removes it)."""
        m = self.machine
        if m.state is State.STALE:
            m.request_leave()
            return False
        if m.state not in IN_GROUP:
            return False
        log.info("share group %s: leaving (member %s, epoch %d)", self.group_id, m.member_id, m.member_epoch)
        m.request_leave()
        return await self._send_leave(lapsed=False, timeout=self._seconds(timeout))

    async def close(self, timeout: float | None = None) -> None:
        """Leave (within ``timeout``, None: the request timeout), then stop every task. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._fatal is None:
                await self.leave(timeout)
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Cancel and await the member's tasks (no leave: close() leaves first). Idempotent."""
        tasks, self._tasks = self._tasks, []
        await cancel_and_await(tasks)

    def _check_usable(self) -> None:
        if self._closed:
            raise IllegalStateError(f"share group {self.group_id}: the member is closed")

    def _seconds(self, timeout: float | None) -> float:
        return self.settings.request_timeout if timeout is None else max(timeout, 0.0)

    # ------------------------------------------------------------ tasks

    def _start_tasks(self) -> None:
        if self._tasks or self._fatal is not None:
            return
        self._tasks = [
            self._own(self._heartbeat_loop(), "aiokafka-lite share heartbeat"),
            self._own(watchdog_loop(self.timers, self.timers_lock,
                                    lambda: self._fatal is None and self.machine.state in IN_GROUP,
                                    self._leave_on_lapse, self.lapses), "aiokafka-lite share poll watchdog"),
            self._own(self._names_loop(), "aiokafka-lite share topic names"),
        ]

    def _own(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro, name=name)
        task.add_done_callback(self._task_ended)
        return task

    def _task_ended(self, task: asyncio.Task[None]) -> None:
        """A task that ended with an error (a bug: they run until cancelled) ends the membership:
        the error is raised from the next before_poll()."""
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("share group %s: %s failed: %r", self.group_id, task.get_name(), error)
            self._set_fatal(error)

    def _poke(self) -> None:
        self._next_heartbeat = 0.0
        self._wake.poke()

    async def _heartbeat_loop(self) -> None:
        while self._fatal is None:
            if not self.machine.wants_heartbeat:
                await self._wake.sleep(math.inf)
                continue
            delay = self._next_heartbeat - time.monotonic()
            if delay > 0:
                await self._wake.sleep(delay)
                continue
            await self._heartbeat_once()

    async def _heartbeat_once(self) -> None:
        m = self.machine
        async with self._send_lock:
            if not m.wants_heartbeat:
                return
            joining = m.member_epoch == 0
            try:
                response = await self._send_heartbeat()
            except KafkaError as exc:
                m.heartbeat_failed()
                if self._fatal is None:
                    self._failed(exc, joining)
                return
            self._on_answer(response, joining)

    async def _send_heartbeat(self) -> dict[str, Any]:
        timeout = self.settings.request_timeout
        conn = await self.cluster.coordinator_connection(self.group_id, timeout=timeout)
        try:
            version = conn.version_for(SHARE_GROUP_HEARTBEAT)
        except UnsupportedVersionError as exc:
            self._set_fatal(no_share_groups(self.group_id, str(exc)))
            raise
        body = self.machine.heartbeat_request()
        self.heartbeats_sent += 1
        with self.timers_lock:
            self.timers.on_heartbeat_sent(time.monotonic())
        try:
            return await conn.send(SHARE_GROUP_HEARTBEAT, version, body, timeout=timeout)
        except KafkaError:
            self.cluster.mark_coordinator_dead(self.group_id)
            raise

    def _on_answer(self, response: dict[str, Any], joining: bool) -> None:
        m = self.machine
        verdict = m.on_heartbeat_response(response)
        if verdict.rediscover:
            self.cluster.mark_coordinator_dead(self.group_id, f"ShareGroupHeartbeat answered {verdict.code}")
        if verdict.fatal is not None:
            self._set_fatal(verdict.fatal)
        elif verdict.retry:
            self._failed(BrokerError(verdict.code, f"ShareGroupHeartbeat for group {self.group_id!r}"), joining)
        else:
            self._answered_ok(joining, verdict.code if verdict.fenced else None)

    def _failed(self, error: KafkaError, joining: bool) -> None:
        now = time.monotonic()
        (self.join_failures if joining else self.heartbeat_failures).failed(error, now)
        with self.timers_lock:
            self.timers.on_heartbeat_failure(now)
        self._backoff.failed(now)
        self._next_heartbeat = now + self._backoff.wait_time(now)

    def _answered_ok(self, joining: bool, fenced: int | None) -> None:
        """``fenced``: the fencing code (the broker dropped the member), else None."""
        m, now = self.machine, time.monotonic()
        self._last_answer = now
        self.heartbeat_failures.recovered()
        self._backoff.succeeded()
        if fenced is not None:
            log.info("share group %s: the broker no longer knows member %s at this epoch (%s); rejoining",
                     self.group_id, m.member_id, BrokerError(fenced).name)
            self._next_heartbeat = now  # rejoin at once
            self._assignment_moved()
            return
        if joining and m.member_epoch > 0:
            self.join_failures.recovered(detail=f"member epoch {m.member_epoch}")
            log.info("share group %s: joined as member %s, epoch %d", self.group_id, m.member_id, m.member_epoch)
        interval = (m.heartbeat_interval_ms or self.settings.heartbeat_interval_ms) / 1000
        with self.timers_lock:
            self.timers.on_heartbeat_success(now)
            self.timers.heartbeat_interval = min(interval, _NOMINAL_SESSION / 3)
        self._next_heartbeat = now + interval
        self._assignment_moved()

    def _assignment_moved(self) -> None:
        """Name what the broker assigned; ids the metadata cannot name yet go to the names task."""
        if self.machine.resolve(self.cluster.metadata.topic_name):
            self._names_wanted.set()
        self._notify()

    def _notify(self) -> None:
        named = self.machine.named_assignment()
        if named == self._notified:
            return
        self._notified = named
        log.info("share group %s: member epoch %d, assigned %s", self.group_id, self.machine.member_epoch,
                 sorted(named))
        if self.on_change is not None:
            self.on_change()

    async def _names_loop(self) -> None:
        """Refresh the metadata until every assigned topic id has a name (the subscribed topics
        first, then every topic), backing off between tries; and, as the Consumer does, say once
        that a subscribed topic does not exist (then look again every few seconds, to say when it
        does), and raise an invalid or unauthorized one from the next poll."""
        backoff = Backoff(self.settings.retry_backoff_ms / 1000, self.settings.retry_backoff_max_ms / 1000)
        every_topic = False
        recheck: float | None = None  # while a subscribed topic is missing: look again after this
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(recheck):
                    await self._names_wanted.wait()
            self._names_wanted.clear()
            subscribed = sorted(self.machine.topics)
            missing: set[str] = set()
            try:
                await self.cluster.refresh_metadata(None if every_topic else subscribed,
                                                    timeout=self.settings.request_timeout)
                missing = self.cluster.raise_topic_errors(subscribed, subscribed=True)
            except BrokerError as exc:
                self._topic_error = exc
            except KafkaError as exc:
                log.debug("share group %s: metadata refresh for topic names failed: %s", self.group_id, exc)
            if self.machine.resolve(self.cluster.metadata.topic_name):
                every_topic = True
                backoff.failed(time.monotonic())
                await asyncio.sleep(backoff.wait_time(time.monotonic()))
                self._names_wanted.set()
            else:
                every_topic = False
                backoff.succeeded()
            recheck = _MISSING_TOPIC_RECHECK if missing else None
            self._notify()

    def _set_fatal(self, error: BaseException) -> None:
        if self._fatal is None:
            self._fatal = error
            log.error("share group %s: %s", self.group_id, error)
        if self.machine.state is not State.FATAL:
            self.machine.fail(error)
        self._wake.poke()
        self._notify()

    # ------------------------------------------------------------ leaving

    async def _leave_quietly(self) -> None:
        await self._send_leave(lapsed=False, timeout=self.settings.request_timeout)

    async def _leave_on_lapse(self, reason: str) -> None:
        self.lapses.reason = reason
        self.machine.poll_lapsed()
        if await self._send_leave(lapsed=True, timeout=self.settings.request_timeout):
            with self.timers_lock:
                since = self.timers.seconds_since_last_poll(time.monotonic())
                if since is not None:
                    self.last_leave_delay = since - self.timers.max_poll_interval

    async def _send_leave(self, lapsed: bool, timeout: float) -> bool:
        """The leave heartbeat (epoch -1). With no coordinator known there is none to tell (as
        Java): the session timeout removes the member. True when the broker answered it."""
        m = self.machine
        try:
            async with asyncio.timeout(timeout), self._send_lock:
                if m.state is not State.LEAVING:
                    return False
                if self.cluster.coordinator(self.group_id) is None:
                    log.info("share group %s: coordinator unknown, leaving without a heartbeat", self.group_id)
                    return False
                conn = await self.cluster.coordinator_connection(self.group_id, timeout=None)
                body = m.leave_request()
                self.heartbeats_sent += 1
                response = await conn.send(SHARE_GROUP_HEARTBEAT, conn.version_for(SHARE_GROUP_HEARTBEAT),
                                           body, timeout=None)
                if response["error_code"]:
                    log.info("share group %s: the leave heartbeat answered %s", self.group_id,
                             BrokerError(response["error_code"]))
                return True
        except TimeoutError:
            log.info("share group %s: the leave heartbeat got no answer within %.1f s", self.group_id, timeout)
            return False
        except KafkaError as exc:
            log.info("share group %s: the leave heartbeat failed: %s", self.group_id, exc)
            return False
        finally:
            if m.state is State.LEAVING:
                m.leave_done(lapsed)
            self._notify()

    # ------------------------------------------------------------ metrics

    def metrics(self) -> dict[str, Any]:
        m, now = self.machine, time.monotonic()
        with self.timers_lock:
            since_poll = self.timers.seconds_since_last_poll(now)
            rtt = self.timers.last_heartbeat_rtt
        return {
            "group_id": self.group_id, "group_protocol": self.protocol, "group_state": m.state.name,
            "member_id": m.member_id, "member_epoch": m.member_epoch,
            "heartbeat_interval_ms": m.heartbeat_interval_ms,
            "heartbeats_sent": self.heartbeats_sent,
            "heartbeat_failures": self.heartbeat_failures.total_failures + self.join_failures.total_failures,
            "last_heartbeat_seconds_ago": None if self._last_answer is None else now - self._last_answer,
            "heartbeat_rtt_seconds": rtt,
            "last_poll_seconds_ago": since_poll,
            "assigned_partitions": len(m.assignment), "assignments": m.assignments,
            "joins": m.joins, "fenced": m.fenced,
            "poll_interval_lapses": self.lapses.count, "last_leave_delay_seconds": self.last_leave_delay,
        }
