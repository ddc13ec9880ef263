"""heartbeat_mode="thread" for the KIP-848 member: ConsumerGroupHeartbeat and the poll-deadline
watchdog in a dedicated thread with its own blocking connection to the coordinator, so a blocked
event loop no longer costs the membership, while max_poll_interval_ms is still enforced.

Who sends what. Under KIP-848 the heartbeat *is* the protocol (joining, subscription changes,
acknowledging a reconciled assignment, leaving), so two senders would race: two requests in
flight could carry different member epochs, and an answer applied late could move the epoch
backwards. So in thread mode the thread is the only sender of heartbeats while the member is in
the group; the loop never sends one itself (except the leave of close()/unsubscribe(), sent
after :meth:`quiet` has waited out the thread's request in flight and paused it). The loop
stays the owner of the membership (state.Kip848Machine):

- the loop *publishes* an :class:`Outbox` whenever the machine changes (after every poll(),
  after a reconciliation, after applying an answer): the coordinator's address and the next
  request, built by the machine itself (``heartbeat_request()``: only the fields the broker
  lacks), plus what a keep-alive needs. Publishing happens under the lock and only while no
  request is in flight and every answer has been applied; otherwise it is deferred until
  :meth:`apply_pending` has applied them. So the published request always carries the newest
  epoch, and the machine's record of "what the broker has from us" stays exact;
- the thread sends the published request once, at the broker's heartbeat interval (at once when
  the loop asks, e.g. to acknowledge); until the loop publishes again it sends *keep-alives*:
  the same member at the epoch of the last answer, every other field null ("unchanged"), which
  the broker accepts in any member state. After a lost answer the keep-alive also carries the
  owned partitions, so a bump the broker made meanwhile is accepted rather than fenced;
- every answer, failure and lapse is queued and applied by the loop (``_post``), in order,
  through the member's callbacks: a new target assignment, a new epoch, fencing, fatal errors
  all change the machine in the loop's thread only. An answer to a keep-alive is applied with
  ``carried=False``: it confirms no field.

One request at a time (the in-flight flag), epochs only from the newest answer: the member epoch
never goes backwards. A poll-deadline lapse makes the thread send the leave (epoch -1, static -2)
itself, log the classic WARNING and queue the lapse; a coordinator that moved (NOT_COORDINATOR)
stops the thread until the loop has looked the new one up and published again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..._net.backoff import Backoff
from ..._net.blocking import BlockingConnection
from ..._net.options import ConnectionOptions
from ...errors import KafkaError
from ...liveness.timers import LivenessTimers
from ...protocol.messages import CONSUMER_GROUP_HEARTBEAT
from ..lapse import PollLapses
from .errors import classify
from .state import keepalive_body

log = logging.getLogger("aiokafka_lite.consumer")


@dataclass(frozen=True)
class Outbox:
    """What the loop gives the thread: where, the next request, and what keep-alives need."""

    coordinator: tuple[str, int]
    request: dict[str, Any]           # Kip848Machine.heartbeat_request()
    owned: list[dict[str, Any]]       # owned_field(machine.owned): resent after a lost answer
    leave: dict[str, Any]             # the leave heartbeat, for a poll-deadline lapse
    watch: bool                       # in the group: the poll deadline applies


@dataclass(frozen=True)
class ThreadCallbacks:
    """The member's handlers, run by the loop (never by the thread)."""

    answer: Callable[[dict[str, Any], bool, float], None]  # response, carried, when
    failed: Callable[[KafkaError, bool, float], None]      # error, joining, when
    lapsed: Callable[[str], None]                          # reason


class Kip848HeartbeatThread:
    def __init__(self, group_id: str, timers: LivenessTimers, lock: threading.Lock,
                 options: ConnectionOptions, lapses: PollLapses, callbacks: ThreadCallbacks) -> None:
        self.group_id = group_id
        self.timers = timers
        self.lock = lock  # guards everything below that both threads touch
        self.options = options
        self.lapses = lapses
        self.callbacks = callbacks
        self.heartbeats_sent = 0
        self._outbox: Outbox | None = None
        self._unsent = False        # the outbox request is still to go out
        self._epoch = 0             # for keep-alives: the newest epoch known
        self._resend_owned = False  # after a lost answer
        self._in_flight = False
        self._paused = False
        self._deferred = False      # a publish waits for apply_pending
        self._due = 0.0             # monotonic: next send
        self._pending: deque[Callable[[], None]] = deque()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._conn: BlockingConnection | None = None
        self._reconnect = Backoff(options.reconnect_backoff, options.reconnect_backoff_max)
        self._backoff = Backoff(options.retry_backoff, options.retry_backoff_max)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._republish: Callable[[], None] = lambda: None

    # ------------------------------------------------------------ loop side

    def start(self, republish: Callable[[], None]) -> None:
        if self._thread is None:
            self._republish = republish
            self._loop = asyncio.get_running_loop()
            self._thread = threading.Thread(target=self._run, name="aiokafka-lite kip848 heartbeat",
                                            daemon=True)
            self._thread.start()

    def publish(self, build: Callable[[], Outbox | None], now: bool = False) -> None:
        """Give the thread the member as it is now; ``build`` runs under the lock, and only when
        no request is in flight and no answer waits to be applied (else later, from
        apply_pending). ``now``: send the request at once rather than at the next interval."""
        with self.lock:
            if self._in_flight or self._pending:
                self._deferred = True
                return
            self._deferred = False
            box = self._outbox = build()
            if box is not None:
                self._unsent = True
                self._epoch = box.request["member_epoch"]
                if now:
                    self._due = 0.0
        self._wake.set()

    def request_now(self) -> None:
        with self.lock:
            self._due = 0.0
        self._wake.set()

    def apply_pending(self) -> None:
        """Apply what the thread learned, in order (loop thread), then publish again if due."""
        while True:
            with self.lock:
                if not self._pending:
                    deferred = self._deferred
                    break
                callback = self._pending.popleft()
            callback()
        if deferred:
            self._republish()

    @contextlib.asynccontextmanager
    async def quiet(self) -> Any:
        """Pause the thread once its request in flight is answered (and applied): the loop
        sends the leave itself, with no other heartbeat in flight."""
        with self.lock:
            self._paused = True
        try:
            while True:
                with self.lock:
                    if not self._in_flight or self._thread is None:  # answered, or stopped
                        break
                await asyncio.sleep(0.01)
            self.apply_pending()
            yield
        finally:
            with self.lock:
                self._paused = False
            self._wake.set()

    async def stop(self) -> None:
        thread, self._thread = self._thread, None
        self._stopping.set()
        self._wake.set()
        self._close_connection()
        if thread is not None:
            await asyncio.to_thread(thread.join, self.options.request_timeout)
        with self.lock:
            self._pending.clear()

    # ------------------------------------------------------------ thread side

    def _post(self, callback: Callable[[], None]) -> None:
        """Queue a change for the loop (caller holds the lock) and wake the loop if it is free."""
        self._pending.append(callback)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nothing to update
                loop.call_soon_threadsafe(self.apply_pending)

    def _run(self) -> None:
        while not self._stopping.is_set():
            delay = self._step()
            if delay > 0:
                self._wake.wait(None if math.isinf(delay) else delay)
                self._wake.clear()
        self._close_connection()

    def _step(self) -> float:
        """One pass: leave at the poll deadline, send a heartbeat, or say how long to sleep."""
        now = time.monotonic()
        with self.lock:
            box = self._outbox
            if box is None or self._paused:
                return math.inf
            to_deadline = self.timers.time_to_poll_deadline(now) if box.watch else math.inf
            if to_deadline <= 0:
                reason = self.lapses.lapsed(self.timers, now, who="the heartbeat thread is ")
                self._outbox = None
                self._in_flight = True
            else:
                reason = None
                delay = min(self._due - now, to_deadline)
                if self._conn is None:
                    delay = max(delay, min(self._reconnect.wait_time(now), to_deadline))
                if delay > 0:
                    return delay
                body, carried = self._next_request(box)
                self._in_flight = True
                self._due = now + self.timers.heartbeat_interval
        if reason is not None:
            self._leave(box, reason)
        else:
            self._heartbeat(box, body, carried)
        return 0.0

    def _next_request(self, box: Outbox) -> tuple[dict[str, Any], bool]:
        carried, self._unsent = self._unsent, False
        body = dict(box.request) if carried else keepalive_body(box.request, self._epoch)
        if self._resend_owned and body["topic_partitions"] is None and body["member_epoch"] > 0:
            body["topic_partitions"] = box.owned
        return body, carried

    def _connection(self, box: Outbox) -> BlockingConnection:
        conn = self._conn
        if conn is None or (conn.host, conn.port) != box.coordinator:
            self._close_connection()
            host, port = box.coordinator
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

    def _send(self, box: Outbox, body: dict[str, Any]) -> dict[str, Any]:
        conn = self._connection(box)
        version = conn.version_for(CONSUMER_GROUP_HEARTBEAT)
        return conn.send(CONSUMER_GROUP_HEARTBEAT, version, body, timeout=self.options.request_timeout)

    def _heartbeat(self, box: Outbox, body: dict[str, Any], carried: bool) -> None:
        self.heartbeats_sent += 1
        joining = body["member_epoch"] == 0
        try:
            response = self._send(box, body)
        except KafkaError as exc:
            error = exc  # the name exc is gone once the except block ends
            self._close_connection()
            self._lost_answer(carried)
            now = time.monotonic()
            with self.lock:
                self._in_flight = False
                self._post(lambda: self.callbacks.failed(error, joining, now))
            return
        self._answered(box, response, carried)

    def _lost_answer(self, carried: bool) -> None:
        """No answer: the broker may or may not have it. Back off; resend the request (or the
        owned partitions with the keep-alives); the loop resets the machine's record too."""
        now = time.monotonic()
        with self.lock:
            self._backoff.failed(now)
            self._due = now + self._backoff.wait_time(now)
            self._resend_owned = True
            self._unsent = self._unsent or carried

    def _answered(self, box: Outbox, response: dict[str, Any], carried: bool) -> None:
        verdict = classify(response["error_code"], self.group_id)
        if verdict.retry:
            self._lost_answer(carried)
            if verdict.rediscover:
                self._close_connection()
        now = time.monotonic()
        with self.lock:
            self._in_flight = False
            if verdict.code == 0:
                self._backoff.succeeded()
                self._resend_owned = False
                self._epoch = max(self._epoch, response["member_epoch"])
                if response.get("heartbeat_interval_ms", 0) > 0:
                    self.timers.heartbeat_interval = response["heartbeat_interval_ms"] / 1000
                    self._due = min(self._due, now + self.timers.heartbeat_interval)
            elif verdict.fenced or verdict.fatal is not None or verdict.rediscover:
                self._outbox = None  # until the loop has applied it and publishes again
            self._post(lambda: self.callbacks.answer(response, carried, now))

    def _leave(self, box: Outbox, reason: str) -> None:
        try:
            response = self._send(box, box.leave)
            if response["error_code"]:
                log.info("group %s: the leave heartbeat (thread) answered %d", self.group_id,
                         response["error_code"])
        except KafkaError as exc:
            self._close_connection()
            log.info("group %s: the leave heartbeat (thread) failed: %s", self.group_id, exc)
        with self.lock:
            self._in_flight = False
            self._post(lambda: self.callbacks.lapsed(reason))
