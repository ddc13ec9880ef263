"""heartbeat_mode="thread": heartbeats and the poll-deadline watchdog in a dedicated thread with
its own blocking connection to the coordinator, so a blocked event loop no longer costs the
membership, while max_poll_interval_ms is still enforced (a handler that blocks past it still
leaves the group, as KIP-62 intends).

The thread shares only two things with the loop, both under `lock`: the member's identity (a
snapshot taken by the loop whenever the membership changes) and the liveness timers (the poll
clock). It never touches the membership itself: what it learns is queued as callbacks that the
loop applies, at the start of the next poll() at the latest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..._net.backoff import Backoff
from ..._net.blocking import BlockingConnection
from ..._net.options import ConnectionOptions
from ...errors import BrokerError, KafkaError
from ...liveness.timers import LivenessTimers
from ...protocol.messages import HEARTBEAT, LEAVE_GROUP
from .coordinator import GroupCoordinator, heartbeat_body, leave_body
from .liveness_tasks import Outcome, apply_heartbeat_outcome, heartbeat_failure_log, heartbeat_outcome

log = logging.getLogger("aiokafka_lite.consumer")


@dataclass(frozen=True)
class MemberIdentity:
    generation_id: int
    member_id: str
    group_instance_id: str | None
    coordinator: tuple[str, int]


class HeartbeatThread:
    """Same interface as LivenessTasks: start(), stop(), poke(), fatal_error and the metrics."""

    def __init__(self, group: GroupCoordinator, timers: LivenessTimers, lock: threading.Lock,
                 options: ConnectionOptions) -> None:
        self.group = group
        self.timers = timers
        self.lock = lock
        self.options = options
        self.fatal_error: BaseException | None = None
        self.heartbeats_sent = 0
        self.heartbeat_failures = 0
        self.poll_lapses = 0
        self.last_leave_delay: float | None = None
        self.failure_log = heartbeat_failure_log(group, time.monotonic)  # written by the thread only
        self._identity: MemberIdentity | None = None
        self._pending: deque[Callable[[], None]] = deque()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._conn: BlockingConnection | None = None
        # Thread side only: connect attempts to the coordinator honour reconnect_backoff_ms.
        self._reconnect = Backoff(options.reconnect_backoff, options.reconnect_backoff_max)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------ loop side

    def start(self) -> None:
        if self._thread is None:
            self._loop = asyncio.get_running_loop()
            self._thread = threading.Thread(target=self._run, name="aiokafka-lite heartbeat", daemon=True)
            self._thread.start()

    def poke(self) -> None:
        """The membership changed (loop thread): take a new identity snapshot for the thread."""
        m = self.group.membership
        address = self.group.cluster.coordinator_address(self.group.group_id)
        identity = None
        if m.is_stable and address is not None:
            identity = MemberIdentity(m.generation_id, m.member_id, m.group_instance_id, address)
        with self.lock:
            self._identity = identity
        self._wake.set()

    def apply_pending(self) -> None:
        """Apply what the thread learned (loop thread); poll() calls this before anything else."""
        while self._pending:
            self._pending.popleft()()

    async def stop(self) -> None:
        thread, self._thread = self._thread, None
        self._stopping.set()
        self._wake.set()
        self._close_connection()
        if thread is not None:
            await asyncio.to_thread(thread.join, self.options.request_timeout)
        self._pending.clear()

    def _post(self, callback: Callable[[], None]) -> None:
        """Queue a membership change for the loop; wake the loop if it is free."""
        self._pending.append(callback)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            # The loop may close meanwhile: then there is nothing left to update.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.apply_pending)

    # ------------------------------------------------------------ thread side

    def _run(self) -> None:
        while not self._stopping.is_set():
            delay = self._step()
            if delay > 0:
                self._wake.wait(delay)
                self._wake.clear()
        self._close_connection()

    def _step(self) -> float:
        """One pass: lapse, heartbeat, or how long to sleep."""
        now = time.monotonic()
        with self.lock:
            identity = self._identity
            if identity is None:
                return self.timers.heartbeat_interval
            if self.timers.poll_deadline_lapsed(now):
                lapse = self.timers.seconds_since_last_poll(now) or 0.0
                self.timers.disarm_poll_deadline()
                self.timers.clear_session()
                self._identity = None
            else:
                lapse = None
                to_deadline = self.timers.time_to_poll_deadline(now)
                delay = min(self.timers.time_to_next_heartbeat(now), to_deadline)
                if self._conn is None:  # the heartbeat will connect first
                    delay = max(delay, min(self._reconnect.wait_time(now), to_deadline))
                if delay > 0:
                    return delay
                self.timers.on_heartbeat_sent(now)
        if lapse is not None:
            self._leave_on_lapse(identity, lapse)
        else:
            self._heartbeat(identity)
        return 0.0

    def _connection(self, identity: MemberIdentity) -> BlockingConnection:
        conn = self._conn
        if conn is None or (conn.host, conn.port) != identity.coordinator:
            self._close_connection()
            host, port = identity.coordinator
            try:
                conn = BlockingConnection(host, port, self.options, self.options.request_timeout)
            except KafkaError:
                self._reconnect.failed(time.monotonic())
                raise
            self._reconnect.succeeded()
            self._conn = conn
        return conn

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _heartbeat(self, identity: MemberIdentity) -> None:
        self.heartbeats_sent += 1
        group_id = self.group.group_id
        try:
            conn = self._connection(identity)
            body = heartbeat_body(group_id, identity.generation_id, identity.member_id, identity.group_instance_id)
            code = conn.send(HEARTBEAT, conn.version_for(HEARTBEAT), body,
                             timeout=self.options.request_timeout)["error_code"]
        except KafkaError as exc:
            self.failure_log.failed(exc)
            self._close_connection()
            self._failed()
            return
        now = time.monotonic()
        outcome = heartbeat_outcome(code)
        with self.lock:
            if outcome is Outcome.RETRY:
                self.timers.on_heartbeat_failure(now)
            elif outcome in (Outcome.ALIVE, Outcome.REJOIN):
                self.timers.on_heartbeat_success(now)
            else:
                self.timers.clear_session()
                self._identity = None
        if outcome is Outcome.RETRY:
            self.failure_log.failed(BrokerError(code, "Heartbeat"), now)
            self.heartbeat_failures += 1
            self._close_connection()
            self._post(lambda: self.group.cluster.mark_coordinator_dead(group_id, "heartbeat thread"))
        else:
            self.failure_log.recovered(now)
        if outcome not in (Outcome.ALIVE, Outcome.RETRY):
            self._post(lambda: self._apply(code, outcome, identity))

    def _failed(self) -> None:
        self.heartbeat_failures += 1
        with self.lock:
            self.timers.on_heartbeat_failure(time.monotonic())

    def _apply(self, code: int, outcome: Outcome, identity: MemberIdentity) -> None:
        error = apply_heartbeat_outcome(self.group, code, outcome, identity.generation_id)
        if error is not None and self.fatal_error is None:
            self.fatal_error = error

    def _leave_on_lapse(self, identity: MemberIdentity, lapse: float) -> None:
        config = self.group.config
        self.poll_lapses += 1
        reason = (f"this member left the group because {lapse:.1f} s passed between poll() calls, more "
                  f"than max_poll_interval_ms={config.max_poll_interval_ms}")
        log.warning(
            "group %s: %.1f s since the last poll() exceeds max_poll_interval_ms=%d: the heartbeat thread "
            "leaves the group so its partitions go to live members; the next poll() rejoins. If processing "
            "a batch takes this long, raise max_poll_interval_ms or lower max_poll_records (now %d).",
            self.group.group_id, lapse, config.max_poll_interval_ms, config.max_poll_records)
        self.last_leave_delay = lapse - self.timers.max_poll_interval
        if identity.group_instance_id is None:  # static members stay until their session expires
            try:
                conn = self._connection(identity)
                conn.send(LEAVE_GROUP, conn.version_for(LEAVE_GROUP),
                          leave_body(self.group.group_id, identity.member_id, "consumer poll timeout has expired"),
                          timeout=self.options.request_timeout)
            except KafkaError as exc:
                log.info("group %s: LeaveGroup (thread) failed: %s", self.group.group_id, exc)
        self._post(lambda: self.group.left_elsewhere(reason))
