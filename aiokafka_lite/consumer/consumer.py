"""The Consumer users hold: it owns the cluster, the fetcher, the group coordinator and the
background tasks, and closes them. Every awaitable method is bounded (KIP-266)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import logging
import re
import threading
import time
import warnings
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from .. import arrow
from .._net.backoff import Backoff
from .._net.cluster import Cluster
from ..arrow import ArrowBatch
from ..config import ConsumerConfig
from ..errors import (
    ConsumerClosedError,
    IllegalStateError,
    InvalidArgumentError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from ..protocol import native
from ..structs import ConsumerRecord, ConsumerRecords, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition
from ._bounded import DEFAULT, Timeout, bounded, check_timeout, closed_not_cancelled, resolve_timeout
from .closing import close_gracefully, leave_by_force
from .commit_order import CommitQueue
from .fetcher import Fetcher
from .listener import ConsumerRebalanceListener, call_listener
from .liveness import LivenessTimers
from .member import GroupMember, ListenerEvent, generation_moved
from .metrics import snapshot
from .offsets import OffsetLookup
from .poll_steps import PollPresence, PollSteps, Start
from .polling import poll_once, update_positions
from .stall import StallMonitor
from .start_attempt import StartAttempt
from .subscription import ResetStrategy, SubscriptionState, SubscriptionType
from .unsubscribing import Unsubscribing, revoke_and_leave, wait_quietly
from .wiring import make_cluster, make_fetcher, make_member, make_offset_lookup

log = logging.getLogger("aiokafka_lite.consumer")
T = TypeVar("T")

POLL_DEFAULT_TIMEOUT = 1.0


@dataclasses.dataclass(frozen=True)
class _Revocation:
    """A revocation that close() or unsubscribe() runs in this context (the listener and the
    tasks it starts): they may still use the consumer. `offsets`: what was consumed from the
    partitions being revoked by unsubscribe(), committed as the member that owned them."""

    consumer: Consumer
    offsets: dict[TopicPartition, OffsetAndMetadata] | None = None


_REVOKING: contextvars.ContextVar[_Revocation | None] = contextvars.ContextVar("aiokafka_lite_revoking", default=None)


class Consumer:
    """An asyncio Kafka consumer. See the README for the liveness model and the settings."""

    def __init__(self, *topics: str, **settings: Any) -> None:
        self._init(ConsumerConfig.from_kwargs(**settings), topics)

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any], *topics: str) -> Consumer:
        """Build from Java/librdkafka-style names: {"bootstrap.servers": ..., "group.id": ...}."""
        self = cls.__new__(cls)
        self._init(ConsumerConfig.from_properties(properties), topics)
        return self

    def _init(self, config: ConsumerConfig, topics: Iterable[str]) -> None:
        self.config = config
        self._subscription = SubscriptionState(default_reset=ResetStrategy(config.auto_offset_reset))
        self._listener: ConsumerRebalanceListener = ConsumerRebalanceListener()
        self._cluster: Cluster | None = None
        self._connecting: Cluster | None = None  # the start attempt's: why it cannot reach the cluster
        self._fetcher: Fetcher | None = None
        self._offsets: OffsetLookup | None = None
        self._member: GroupMember | None = None
        self._parts = _ConsumerParts(self)
        self._poll_steps = PollSteps()
        self._poll_clock_paused = False  # a listener callback runs: its time counts (KIP-62)
        self._side_tasks: set[asyncio.Future[Any]] = set()
        self._commits = CommitQueue()
        self._timers = LivenessTimers(config.session_timeout, config.heartbeat_interval,
                                      config.max_poll_interval, config.retry_backoff, config.retry_backoff_max)
        # The poll clock is shared with the heartbeat thread in heartbeat_mode="thread". Liveness
        # clocks read time.monotonic() in both modes (the thread cannot read the loop's clock).
        self._timers_lock = threading.Lock()
        self._stall = StallMonitor(config.session_timeout, config.stall_warning_ratio, config.heartbeat_mode)
        self._start_attempt: StartAttempt | None = None
        self._unsubscribing: asyncio.Task[None] | None = None  # unsubscribe()'s revocation and leave
        self._forcing_close = False  # the forced part of close() has begun: nothing is retried
        self._started = False
        self._closed = False
        self._close_task: asyncio.Task[None] | None = None
        self._graceful_close: asyncio.Task[None] | None = None
        self._iter_buffer: deque[ConsumerRecord] = deque()
        self._polls = 0
        topic_list = list(topics)
        if topic_list:
            self.subscribe(topic_list)

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        # As asyncio does for an unclosed transport: a consumer that tried to connect and was
        # dropped without close() says so once.
        if getattr(self, "_start_attempt", None) is not None and not self._closed:
            _warn(f"unclosed Consumer (group {self.config.group_id!r}): call close() or use 'async with'",
                  ResourceWarning, source=self)

    # ------------------------------------------------------------ life cycle

    async def __aenter__(self) -> Consumer:
        try:
            await self.start()
        except BaseException:
            await self.close()  # a failed `async with` leaves nothing running
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, timeout: Timeout = DEFAULT) -> None:
        """Connect to the cluster (bounded by the timeout). Called by `async with` and lazily by
        every other call, within that call's own timeout. An attempt that outlasts its caller's
        timeout goes on as a task the consumer owns; the next call waits for it, close() cancels it."""
        self._check_open()
        limit = resolve_timeout(timeout, self.config)
        try:
            await bounded(self._ensure_started(), limit, "connecting to the bootstrap servers", self._is_closed)
        except KafkaTimeoutError as exc:
            raise self._unreached(exc, limit) from exc.__cause__

    async def _ensure_started(self) -> None:
        if self._started:
            return
        attempt = self._start_attempt
        if attempt is None or attempt.task.done():
            if attempt is not None:
                attempt.retrieve()  # a failed attempt: tried again below
            if self._closed:  # a commit queued before close() must not start a fresh attempt
                raise ConsumerClosedError("the consumer was closed before it connected")
            attempt = self._start_attempt = StartAttempt(self._start_once, self.config.default_api_timeout)
        await attempt.wait()

    async def _start_once(self) -> None:
        cluster = self._connecting = make_cluster(self.config)
        try:
            await cluster.bootstrap(timeout=None)  # bounded by each caller waiting for it
        except BaseException:
            await cluster.close()
            raise
        self._cluster = cluster
        self._fetcher = make_fetcher(self.config, cluster, self._subscription)
        self._offsets = make_offset_lookup(self.config, cluster)
        if self.config.group_id is not None:
            self._member = make_member(cluster, self.config, self._parts, self._timers, self._timers_lock)
        self._stall.start()
        self._started = True

    async def close(self, timeout: float | None = 30.0) -> None:
        """Commit (if auto-commit), revoke, LeaveGroup within the timeout, then close by force.
        `timeout=None` bounds the graceful part by request_timeout_ms, as Java does for an
        unbounded close. Idempotent: a second call waits for the first, but no longer than its
        own timeout; then it cuts the graceful part short and waits only for the forced part.
        Cancelled, it cuts the graceful part short too, waits for the forced part (a brief
        LeaveGroup; nothing the consumer owns is left running) and then re-raises the CancelledError."""
        timeout = check_timeout(timeout)  # NaN or negative: refused before anything closes
        if self._close_task is None:
            self._closed = True
            graceful_limit = self.config.request_timeout if timeout is None else timeout
            self._graceful_close = asyncio.create_task(close_gracefully(self._parts, graceful_limit),
                                                       name="aiokafka-lite close (graceful)")
            self._close_task = asyncio.create_task(self._close(self._graceful_close), name="aiokafka-lite close")
        close_task, graceful = self._close_task, self._graceful_close
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.shield(close_task)
                    return
        except asyncio.CancelledError:
            if graceful is not None:
                graceful.cancel()
            await asyncio.wait({close_task})  # a second cancellation of ours ends this wait too
            if close_task.done() and not close_task.cancelled():
                close_task.exception()  # retrieved: this caller re-raises its cancellation instead
            raise
        if graceful is not None:
            graceful.cancel()
        await asyncio.shield(close_task)

    async def _close(self, graceful: asyncio.Task[None]) -> None:
        try:
            await asyncio.wait({graceful})  # its cancellation (a shorter close()) is not ours
        finally:
            await self._close_by_force()
        error = None if graceful.cancelled() else graceful.exception()
        if error is not None:
            raise error

    def _cluster_or_fail(self) -> Cluster:
        if self._cluster is None:
            raise IllegalStateError("the consumer is not started")
        return self._cluster

    def _is_closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        # The listener that close() calls may still use the consumer (commit, position...), as
        # in Java; calls from anywhere else find it closed.
        if self._closed and self._revocation() is None:
            raise ConsumerClosedError("the consumer is closed")

    def _revocation(self) -> _Revocation | None:
        """The revocation of this consumer's close() or unsubscribe() running in this context."""
        revocation = _REVOKING.get()
        return revocation if revocation is not None and revocation.consumer is self else None

    async def _close_by_force(self) -> None:
        """Cancel and await every task the consumer owns, close every connection."""
        self._forcing_close = True
        if self._start_attempt is not None:
            await _cancel(self._start_attempt.task)
        await self._poll_steps.cancel()
        await _cancel(self._unsubscribing)
        for commit in self._commits.pending():
            await _cancel(commit)
        if self._member is not None:
            await self._member.stop_liveness()
            await leave_by_force(self._member)
        await self._stall.stop()
        for fut in list(self._side_tasks):
            await _cancel(fut)
        if self._fetcher is not None:
            await self._fetcher.close()
        if self._cluster is not None:
            await self._cluster.close()

    def _raise_background_error(self) -> None:
        if self._member is not None and self._member.fatal_error is not None:
            raise self._member.fatal_error

    async def _ready(self) -> None:
        """Started (lazily, within the caller's deadline) and no background error pending."""
        self._check_open()
        await self._ensure_started()
        self._check_open()  # close() may have run while we waited
        self._raise_background_error()

    async def _call(self, what: str, limit: float | None, work: Callable[[], Awaitable[T]]) -> T:
        """One deadline for the whole call, connecting included (KIP-266)."""
        async def ready_then_work() -> T:
            await self._ready()
            return await work()
        try:
            return await bounded(ready_then_work(), limit, what, self._is_closed)
        except KafkaTimeoutError as exc:
            raise self._unreached(exc, limit, what) from exc.__cause__

    def _unreached(self, exc: KafkaTimeoutError, limit: float | None, what: str | None = None) -> KafkaTimeoutError:
        """A call that timed out before the cluster ever answered: each bootstrap server's last failure."""
        unreached = None if self._started or self._connecting is None else self._connecting.unreachable(limit)
        if unreached is None:
            return exc
        return unreached if what is None else KafkaTimeoutError(f"{what} did not complete within {limit} s: "
                                                                f"{unreached}")

    # ------------------------------------------------------------ subscription

    def subscribe(self, topics: Iterable[str] = (), *, pattern: str | re.Pattern[str] | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        self._check_open()
        if self.config.group_id is None:
            raise IllegalStateError("subscribe() needs a group_id; without a group use assign()")
        topic_list = [topics] if isinstance(topics, str) else list(topics)
        if pattern is not None:
            if topic_list:
                raise InvalidArgumentError("subscribe() takes topics or a pattern, not both")
            self._subscription.subscribe_pattern(pattern)
        elif not topic_list:
            self.unsubscribe()  # as in Java: subscribing to nothing is unsubscribing
            return
        else:
            self._subscription.subscribe(topic_list)
        if listener is not None:
            self._listener = listener
        if self._member is not None:
            self._member.subscription_changed("subscription changed")

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._check_open()
        if self._member is not None and self.config.enable_auto_commit \
                and self._subscription.type is SubscriptionType.MANUAL:
            # As in Java: what was consumed from the partitions being replaced is committed first.
            offsets = self._offsets_to_commit(None)
            if offsets:
                self._queue_commit(offsets).add_done_callback(_retrieve_outcome)
        self._subscription.assign_manually(partitions)

    def unsubscribe(self) -> Unsubscribing:
        """Drop the subscription (or the manual assignment) at once. A group member then runs
        on_partitions_revoked (or _lost) for what it owned, auto-commits what was consumed, and
        leaves the group, in a task the consumer owns (unsubscribing.py): `await
        consumer.unsubscribe()` waits for it; otherwise the next poll() or close() does."""
        self._check_open()
        member, sub = self._member, self._subscription
        owned = sub.assigned() if sub.uses_group else set()
        if member is None or not owned or self._unsubscribing is not None:
            sub.unsubscribe()
            if member is not None and member.is_stable and self._unsubscribing is None:
                self._spawn(member.leave("the consumer unsubscribed", timeout=self.config.request_timeout))
            return Unsubscribing(self._finish_unsubscribe)
        consumed = {tp: om for tp, om in self._offsets_to_commit(None).items() if tp in owned}
        lost = not (member.is_stable or member.mid_join)
        sub.unsubscribe()
        self._drop_buffered(owned)
        revocation = contextvars.copy_context()
        revocation.run(_REVOKING.set, _Revocation(self, consumed))
        self._unsubscribing = asyncio.create_task(revoke_and_leave(self._parts, member, owned, lost),
                                                  name="aiokafka-lite unsubscribe", context=revocation)
        return Unsubscribing(self._finish_unsubscribe)

    async def _finish_unsubscribe(self) -> None:
        """Wait for the revocation unsubscribe() started, and raise its error (once)."""
        task = self._unsubscribing
        if task is None or self._revocation() is not None:
            return  # nothing under way, or called from inside the revocation itself
        await asyncio.wait({task})  # its cancellation by close() is not raised here: told apart below
        if self._unsubscribing is task:
            self._unsubscribing = None
            if task.cancelled():
                raise ConsumerClosedError("the consumer was closed before unsubscribe() completed")
            task.result()

    def assignment(self) -> set[TopicPartition]:
        self._check_open()
        return self._subscription.assigned()

    def subscription(self) -> set[str]:
        self._check_open()
        return set(self._subscription.topics)

    # ------------------------------------------------------------ poll

    async def poll(self, timeout: float = POLL_DEFAULT_TIMEOUT, max_records: int | None = None) -> ConsumerRecords:
        """Records fetched so far, waiting up to `timeout` seconds for some. Empty on timeout,
        even while the group rebalances or the coordinator is unknown; never raises a timeout."""
        self._check_open()
        limit_s = check_timeout(timeout, none_ok=False, what="poll timeout")
        limit = self.config.max_poll_records if max_records is None else max_records
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgumentError(f"max_records must be an int >= 1, got {max_records!r}")
        # Checked before start(): a misuse must not cost a connection attempt.
        if not self._subscription.assigned() and self._subscription.type.value == "none":
            raise IllegalStateError("poll() before subscribe() or assign()")
        self._stamp_poll()
        self._polls += 1
        if self._iter_buffer:  # fetched for an `async for` that stopped early: handed out first
            return self._take_buffered(limit)
        try:
            with closed_not_cancelled(self._is_closed, "poll()"):
                async with asyncio.timeout(limit_s):
                    await self._finish_unsubscribe()  # the leave goes out before any rejoin
                    await self._ready()  # connecting counts against this poll's timeout too
                    return await poll_once(self._parts, limit)
        except TimeoutError:
            return ConsumerRecords()
        finally:
            # A cancelled or failed poll still counts as a poll: the watchdog must never get stuck.
            self._stamp_poll()

    async def poll_arrow(self, timeout: float = POLL_DEFAULT_TIMEOUT, max_records: int | None = None) -> ArrowBatch:
        """poll() as one Arrow record batch with the columns of Spark's Kafka source: key, value,
        topic, partition, offset, timestamp (ms, UTC), timestampType, headers. Positions, commits
        and timeouts behave as for poll(). Keys and values are raw bytes, so a consumer with
        deserializers refuses (InvalidArgumentError); without the native extension it needs pyarrow
        (ArrowUnavailableError, raised before anything is consumed)."""
        check_timeout(timeout, none_ok=False, what="poll timeout")
        if self.config.key_deserializer is not None or self.config.value_deserializer is not None:
            raise InvalidArgumentError("poll_arrow() hands out raw bytes: use poll() with key_deserializer "
                                       "or value_deserializer, or leave them unset")
        arrow.check_available()
        return arrow.batch_of(await self.poll(timeout, max_records))

    def _stamp_poll(self) -> None:
        if self._poll_clock_paused:
            return
        with self._timers_lock:
            self._timers.on_poll(time.monotonic())

    async def run_blocking(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run blocking or CPU-bound work in a worker thread, so the event loop (and with it the
        heartbeat task) stays free. The poll deadline still applies: the work must finish within
        max_poll_interval_ms of the last poll()."""
        return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        while not self._iter_buffer:
            if self._closed:
                raise StopAsyncIteration
            try:
                batch = await self.poll(POLL_DEFAULT_TIMEOUT)
            except ConsumerClosedError:
                raise StopAsyncIteration from None
            self._iter_buffer.extend(batch)
        return self._iter_buffer.popleft()

    # ------------------------------------------------------------ commits

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     timeout: Timeout = DEFAULT) -> None:
        """Commit the given offsets, or the offsets of every record handed out so far. Returns
        after every commit made before it (commit_async included) has completed, as in Java."""
        self._check_open()
        limit = resolve_timeout(timeout, self.config)
        self._check_group_id("commit()")
        to_commit = self._offsets_to_commit(offsets)
        # The deadline covers connecting and the wait for earlier commits; on lapse the queued
        # commit is cancelled.
        await bounded(self.submit_commit(to_commit), limit, "commit", self._is_closed)

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: Callable[[Mapping[TopicPartition, OffsetAndMetadata], BaseException | None], Any]
                     | None = None) -> asyncio.Future[None]:
        """Start a commit; the future (and the callback, if any) get its outcome. A commit that
        did not complete is never reported as a success: the callback gets the error
        (ConsumerClosedError when close() stopped it), and cancelling the future cancels the commit."""
        self._check_open()
        self._check_group_id("commit_async()")
        to_commit = self._offsets_to_commit(offsets)
        outcome = _outcome_of(self.submit_commit(to_commit, self.config.default_api_timeout))
        outcome.add_done_callback(_retrieve_outcome)
        if callback is not None:
            outcome.add_done_callback(lambda f: callback(to_commit, _commit_error(f)))
        return outcome

    def submit_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                      limit: float | None = None) -> asyncio.Task[None]:
        """Queue a commit behind every earlier one (commit_order); `limit` bounds it once it runs."""
        async def send() -> None:
            # No open check here: a commit made before close() still lands (close drains them).
            async def started_then_send() -> None:
                await self._ensure_started()
                self._raise_background_error()
                await self._send_commit(offsets)
            await bounded(started_then_send(), limit, "commit")
        return self._commits.submit(send)

    def _queue_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> asyncio.Task[None]:
        """The consumer's own commits (auto-commit, before a rebalance, at close), in the same
        order as the user's; they run while the consumer is started (or closing). Bounded by
        default_api_timeout_ms once they run (Java's commitSync bound): none holds the queue,
        and every commit behind it, for ever."""
        return self._commits.submit(lambda: bounded(self._send_commit(offsets), self.config.default_api_timeout,
                                                    "auto-commit"))

    async def _send_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        member = self._require_member("commit()")
        if not offsets:
            return
        # A consumer that assigned its partitions by hand is no group member: it commits as a
        # standalone consumer (generation -1, no member id), as in Java.
        revocation = self._revocation()
        standalone = not self._subscription.uses_group and (revocation is None or revocation.offsets is None)
        # Bound to the generation it is first sent in: a retry after the member lost it and
        # rejoined would commit old offsets in the new one (a zombie commit).
        sent_in = member.commit_generation()

        async def attempt() -> None:
            if not standalone and member.commit_generation() != sent_in:
                raise generation_moved(member.group_id)
            await member.commit(offsets, None, standalone=standalone)
        await self._retry_on_connection(attempt)

    def _offsets_to_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None
                           ) -> dict[TopicPartition, OffsetAndMetadata]:
        revocation = self._revocation()
        if offsets is None and revocation is not None and revocation.offsets is not None:
            return dict(revocation.offsets)  # unsubscribe()'s listener commits what was consumed
        if offsets is None:
            consumed = self._subscription.consumed_offsets()
            # Records still waiting in the `async for` buffer were not handed to the user yet.
            for record in reversed(self._iter_buffer):
                tp = TopicPartition(record.topic, record.partition)
                if tp in consumed:
                    consumed[tp] = OffsetAndMetadata(record.offset, "", record.leader_epoch)
            return consumed
        result = {}
        for tp, value in offsets.items():
            if not isinstance(tp, TopicPartition):
                raise InvalidArgumentError(f"commit() keys must be TopicPartition, got {tp!r}")
            om = OffsetAndMetadata(value) if isinstance(value, int) else value
            if not isinstance(om, OffsetAndMetadata) or om.offset < 0:
                raise InvalidArgumentError(f"invalid offset {value!r} for {tp}")
            result[tp] = om
        return result

    async def _retry_on_connection(self, call: Callable[[], Any]) -> Any:
        backoff = Backoff(self.config.retry_backoff, self.config.retry_backoff_max)
        while True:
            try:
                return await call()
            except (KafkaConnectionError, KafkaTimeoutError) as exc:  # one request's; `bounded` ends the call
                if self._forcing_close:
                    raise ConsumerClosedError("the consumer was closed") from exc
                # The connection's own failure log has said it; here only the retry.
                backoff.failed(time.monotonic())
                log.debug("retrying after a connection error: %s", exc)
                await asyncio.sleep(backoff.delay())

    def _check_group_id(self, what: str) -> None:
        if self.config.group_id is None:
            raise IllegalStateError(f"{what} needs a group_id")

    def _require_member(self, what: str) -> GroupMember:
        self._check_group_id(what)
        if self._member is None:
            raise IllegalStateError(f"{what}: the consumer is not started")
        return self._member

    def _spawn(self, coro: Any) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.ensure_future(coro)
        self._side_tasks.add(fut)
        fut.add_done_callback(self._side_task_done)
        return fut

    def _side_task_done(self, fut: asyncio.Future[Any]) -> None:
        self._side_tasks.discard(fut)
        if not fut.cancelled() and fut.exception() is not None:
            log.info("background operation failed: %s", fut.exception())

    # ------------------------------------------------------------ positions and offsets

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._check_open()
        self._subscription.seek(tp, offset)
        self._drop_buffered({tp})

    def _take_buffered(self, limit: int) -> ConsumerRecords:
        by_partition: dict[TopicPartition, list[ConsumerRecord]] = {}
        for _ in range(min(limit, len(self._iter_buffer))):
            record = self._iter_buffer.popleft()
            by_partition.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
        return ConsumerRecords(by_partition)

    def _drop_buffered(self, tps: set[TopicPartition]) -> None:
        """Records of `tps` that `async for` fetched but has not handed out: no longer next."""
        if self._iter_buffer:
            self._iter_buffer = deque(r for r in self._iter_buffer if TopicPartition(r.topic, r.partition) not in tps)

    async def seek_to_beginning(self, *tps: TopicPartition, timeout: Timeout = DEFAULT) -> None:
        await self._seek_to(tps, ResetStrategy.EARLIEST, timeout)

    async def seek_to_end(self, *tps: TopicPartition, timeout: Timeout = DEFAULT) -> None:
        await self._seek_to(tps, ResetStrategy.LATEST, timeout)

    async def _seek_to(self, tps: Iterable[TopicPartition], strategy: ResetStrategy, timeout: Timeout) -> None:
        self._check_open()
        limit = resolve_timeout(timeout, self.config)
        targets = list(tps) or list(self._subscription.assigned())
        for tp in targets:
            self._subscription.state(tp)  # an unassigned partition is a misuse: raise before any change

        async def reset() -> None:
            self._drop_buffered(set(targets))
            for tp in targets:
                self._subscription.request_reset(tp, strategy)
            assert self._offsets is not None
            await self._offsets.reset_positions(self._subscription, None)
        await self._call("seek", limit, reset)

    def pause(self, *tps: TopicPartition) -> None:
        self._check_open()
        self._subscription.pause(_partition_args(tps, "pause"))

    def resume(self, *tps: TopicPartition) -> None:
        self._check_open()
        self._subscription.resume(_partition_args(tps, "resume"))

    def paused(self) -> set[TopicPartition]:
        self._check_open()
        return self._subscription.paused()

    async def position(self, tp: TopicPartition, timeout: Timeout = DEFAULT) -> int:
        self._check_open()
        limit = resolve_timeout(timeout, self.config)
        self._subscription.state(tp)  # raises for an unassigned partition

        async def lookup() -> int:
            # Looked at again after every await: a seek, a reset or a revoke and re-assign may
            # have replaced the state the lookup was for (the loop ends with the timeout).
            while True:
                if not self._subscription.is_assigned(tp):
                    raise IllegalStateError(f"{tp} is no longer assigned: you can only check the position "
                                            "for partitions assigned to this consumer")
                position = self._subscription.state(tp).position
                if position is not None:
                    return position
                await update_positions(self._parts, [tp])
        return await self._call("position", limit, lookup)

    async def committed(self, tps: Iterable[TopicPartition], timeout: Timeout = DEFAULT
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        self._check_open()
        limit = resolve_timeout(timeout, self.config)
        self._check_group_id("committed()")
        wanted = _partitions_arg(tps, "committed()")

        async def fetch() -> dict[TopicPartition, OffsetAndMetadata | None]:
            member = self._require_member("committed()")
            result: dict[TopicPartition, OffsetAndMetadata | None] = await self._retry_on_connection(
                lambda: member.fetch_committed(wanted, None))
            return result
        return await self._call("committed", limit, fetch)

    async def beginning_offsets(self, tps: Iterable[TopicPartition], timeout: Timeout = DEFAULT
                                ) -> dict[TopicPartition, int]:
        self._check_open()
        limit = resolve_timeout(timeout, self.config)
        wanted = _partitions_arg(tps, "beginning_offsets()")
        return await self._call("beginning_offsets", limit,
                                lambda: self._offset_lookup().beginning_offsets(wanted, None))

    async def end_offsets(self, tps: Iterable[TopicPartition], timeout: Timeout = DEFAULT
                          ) -> dict[TopicPartition, int]:
        self._check_open()
        limit = resolve_timeout(timeout, self.config)
        wanted = _partitions_arg(tps, "end_offsets()")
        return await self._call("end_offsets", limit, lambda: self._offset_lookup().end_offsets(wanted, None))

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int], timeout: Timeout = DEFAULT
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the earliest offset whose timestamp is >= the one given (ms since
        the epoch), or None when there is no such record."""
        self._check_open()
        limit = resolve_timeout(timeout, self.config)
        _partitions_arg(timestamps, "offsets_for_times()")
        wanted = dict(timestamps)
        return await self._call("offsets_for_times", limit,
                                lambda: self._offset_lookup().offsets_for_times(wanted, None))

    def _offset_lookup(self) -> OffsetLookup:
        assert self._offsets is not None  # set by start(), which _call awaits first
        return self._offsets

    async def partitions_for(self, topic: str, timeout: Timeout = DEFAULT) -> list[TopicPartition]:
        topics = await self._topics([topic], timeout)
        return topics.get(topic, [])

    async def list_topics(self, timeout: Timeout = DEFAULT) -> dict[str, list[TopicPartition]]:
        return await self._topics(None, timeout)

    async def _topics(self, names: list[str] | None, timeout: Timeout) -> dict[str, list[TopicPartition]]:
        self._check_open()
        limit = resolve_timeout(timeout, self.config)

        async def refresh() -> dict[str, list[TopicPartition]]:
            cluster = self._cluster_or_fail()
            await cluster.refresh_metadata(names, timeout=None)
            cluster.raise_topic_errors(names or ())
            # exclude_internal_topics is about subscribing by pattern; listing shows every topic, as in Java.
            wanted = names if names is not None else cluster.topics()
            return {t: [TopicPartition(t, p) for p in sorted(cluster.partitions_for(t) or ())] for t in wanted
                    if cluster.partitions_for(t)}
        return await self._call("metadata", limit, refresh)

    def metrics(self) -> dict[str, Any]:
        figures = {"started": self._started, "closed": self._closed, "polls": self._polls,
                   "heartbeat_mode": self.config.heartbeat_mode, "loop_stalls": self._stall.stalls,
                   "longest_loop_stall_seconds": self._stall.longest_stall,
                   "record_decoder": native.decoder(),
                   "fetch_sessions": {} if self._fetcher is None else self._fetcher.sessions(),
                   "fetching_from": {} if self._fetcher is None else {
                       f"{tp.topic}-{tp.partition}": node for tp, node in self._fetcher.fetch_sources().items()}}
        return snapshot(figures, self._subscription, self._timers, self._member, self._cluster)


def _retrieve_outcome(fut: asyncio.Future[None]) -> None:
    """A background commit's error goes to its future and callback; logged here for people."""
    if not fut.cancelled() and fut.exception() is not None:
        log.info("commit_async failed: %s", fut.exception())


def _outcome_of(commit: asyncio.Task[None]) -> asyncio.Future[None]:
    """The future commit_async() hands out. close() cancels the commit task; the caller's future
    then fails with ConsumerClosedError rather than being cancelled itself (a CancelledError
    would reach a task that was not cancelled). Cancelling the future cancels the commit."""
    outcome: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def commit_done(task: asyncio.Task[None]) -> None:
        if outcome.done():
            return
        if task.cancelled():
            outcome.set_exception(ConsumerClosedError("the consumer was closed before the commit completed"))
        elif task.exception() is not None:
            outcome.set_exception(task.exception())  # type: ignore[arg-type]
        else:
            outcome.set_result(None)

    def outcome_done(fut: asyncio.Future[None]) -> None:
        if fut.cancelled():
            commit.cancel()

    commit.add_done_callback(commit_done)
    outcome.add_done_callback(outcome_done)
    return outcome


def _commit_error(outcome: asyncio.Future[None]) -> BaseException | None:
    """What a commit_async callback is told: None only for a commit that completed."""
    if outcome.cancelled():
        return KafkaError("the commit was cancelled before it completed")
    return outcome.exception()


def _partitions_arg(tps: Iterable[TopicPartition], what: str) -> list[TopicPartition]:
    """The partitions a call asks about; a bare string or a non-TopicPartition is a misuse."""
    if isinstance(tps, str | TopicPartition):
        raise InvalidArgumentError(f"{what} takes a collection of TopicPartition, got {tps!r}")
    wanted = list(tps)
    for tp in wanted:
        if not isinstance(tp, TopicPartition):
            raise InvalidArgumentError(f"{what} takes TopicPartition objects, got {tp!r}")
    return wanted


def _partition_args(tps: tuple[Any, ...], what: str) -> tuple[TopicPartition, ...]:
    """pause()/resume() take partitions as arguments (``pause(tp1, tp2)``), not one collection."""
    for tp in tps:
        if not isinstance(tp, TopicPartition):
            unpack = isinstance(tp, Iterable) and not isinstance(tp, str | bytes)
            hint = f"; to pass a collection, unpack it: {what}(*partitions)" if unpack else ""
            raise InvalidArgumentError(f"{what}() takes TopicPartition arguments, got {tp!r}{hint}")
    return tps


async def _cancel(fut: asyncio.Future[Any] | None) -> None:
    if fut is None or fut.done():
        if fut is not None and not fut.cancelled():
            fut.exception()  # retrieved, so asyncio does not log "exception never retrieved"
        return
    fut.cancel()
    with contextlib.suppress(asyncio.CancelledError, KafkaError):
        await fut


class _ConsumerParts:
    """The consumer's parts as its helpers see them: the group member (MemberHost), the poll
    path (polling.PollParts) and close() (closing.CloseParts). It lives in this module because
    it works on the Consumer's own state; the helpers never touch that state themselves."""

    def __init__(self, consumer: Consumer) -> None:
        self._c = consumer
        self.config = consumer.config
        self.next_auto_commit = 0.0  # loop time; the poll path's auto-commit schedule
        self.presence = PollPresence()

    # -- parts ----------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._c._started

    @property
    def cluster(self) -> Cluster:
        return self._c._cluster_or_fail()

    @property
    def fetcher(self) -> Fetcher:
        assert self._c._fetcher is not None
        return self._c._fetcher

    @property
    def offsets(self) -> OffsetLookup:
        return self._c._offset_lookup()

    @property
    def member(self) -> GroupMember | None:
        return self._c._member

    def subscription_state(self) -> SubscriptionState:
        return self._c._subscription

    # -- poll path ------------------------------------------------------------------------

    def check_open(self) -> None:
        self._c._check_open()

    def stamp_poll(self) -> None:
        self._c._stamp_poll()

    async def poll_step(self, name: str, start: Start | None) -> None:
        """Wait for the poll step `name` (see poll_steps), starting it when needed; its error
        is raised here, once."""
        task = await self._c._poll_steps.wait(name, start)
        self._c._check_open()  # close() cancelled the step: not the caller's cancellation
        if task is not None:
            task.result()

    def poll_step_nowait(self, name: str, start: Start | None) -> None:
        """Start the poll step `name` when needed without waiting; its error, once it has
        ended, is raised here. Its end wakes a poll() waiting for records."""
        task = self._c._poll_steps.start(name, start, self.wake)
        if task is not None:
            self._c._check_open()
            task.result()

    def running_poll_step(self, name: str) -> asyncio.Task[None] | None:
        return self._c._poll_steps.running(name)

    async def cancel_poll_steps(self, name: str | None = None) -> None:
        await self._c._poll_steps.cancel(name)

    def offsets_to_commit(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self._c._offsets_to_commit(None)

    def queue_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> asyncio.Task[None]:
        return self._c._queue_commit(offsets)

    async def drain_commits(self) -> None:
        await self._c._commits.drain()

    async def until_polled(self) -> None:
        await self.presence.until_polled(self.wake)

    def callbacks_done(self) -> None:
        self.presence.callbacks_done()

    async def refresh_pattern(self) -> bool:
        cluster = self.cluster
        await cluster.refresh_metadata(None, timeout=None)
        return self._c._subscription.match_pattern(
            cluster.topics(exclude_internal=self.config.exclude_internal_topics))

    # -- the group member's host -------------------------------------------------------------

    async def run_listener(self, event: ListenerEvent, partitions: set[TopicPartition]) -> None:
        # poll() calls made while a callback runs do not restart the poll clock, so the
        # callback's time counts toward max_poll_interval_ms, as in Java where it runs inside poll().
        listener = self._c._listener
        callback = {ListenerEvent.ASSIGNED: listener.on_partitions_assigned,
                    ListenerEvent.REVOKED: listener.on_partitions_revoked,
                    ListenerEvent.LOST: listener.on_partitions_lost}[event]
        self._c._poll_clock_paused = True
        try:
            await call_listener(callback, partitions, event.value)
        finally:
            self._c._poll_clock_paused = False

    async def commit_before_revoke(self, partitions: set[TopicPartition]) -> None:
        member = self._c._member
        offsets = {tp: om for tp, om in self.offsets_to_commit().items() if tp in partitions}
        if not offsets or member is None or not member.is_stable:
            return
        try:
            await self.queue_commit(offsets)
        except KafkaError as exc:
            log.warning("group %s: auto-commit before rebalance failed: %s", member.group_id, exc)

    def member_joined(self) -> None:
        self.next_auto_commit = asyncio.get_running_loop().time() + self.config.auto_commit_interval

    def wake(self) -> None:
        if self._c._fetcher is not None:
            self._c._fetcher.wake()

    # -- close --------------------------------------------------------------------------------

    async def finish_unsubscribe(self) -> None:
        await wait_quietly(self._c._finish_unsubscribe())

    def subscribed_again(self) -> bool:
        return self._c._subscription.uses_group

    async def revoke_on_close(self, partitions: set[TopicPartition]) -> None:
        """on_partitions_revoked from close(): code in the callback (and the tasks it starts)
        may still use the consumer; the commits it makes land before the member leaves."""
        token = _REVOKING.set(_Revocation(self._c))
        try:
            await call_listener(self._c._listener.on_partitions_revoked, partitions, "on_partitions_revoked")
            await self.drain_commits()
        finally:
            _REVOKING.reset(token)
