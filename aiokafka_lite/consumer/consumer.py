"""The Consumer users hold: it owns the cluster, the fetcher, the group coordinator and the
background tasks, and closes them. Every awaitable method is bounded (KIP-266). The facade stays
thin: start() and close() are lifecycle's, commits are commits', the look-ups lookups', the `async
for` buffer iteration's, unsubscribe()'s task unsubscribing's; the poll path, the group member and
close() see the consumer through parts.ConsumerParts."""

from __future__ import annotations

import asyncio
import functools
import re
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from .. import arrow, structs
from .._net.cluster import Cluster
from ..arrow import ArrowBatch
from ..config import ConsumerConfig
from ..errors import ConsumerClosedError, IllegalStateError, InvalidArgumentError, KafkaTimeoutError
from ..fetch.completed import ValueConverter
from ..fetch.fetcher import Fetcher
from ..fetch.offset_lookup import OffsetLookup
from ..group.member import GroupMember
from ..liveness.closing import Closing
from ..liveness.deadlines import DEFAULT, Timeout, bounded, check_timeout, closed_not_cancelled, resolve_timeout
from ..liveness.stall import StallMonitor
from ..liveness.timers import LivenessTimers
from ..protocol import native
from ..structs import ConsumerRecord, ConsumerRecords, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition
from ..subscription import ResetStrategy, SubscriptionState, SubscriptionType
from .closing import close_gracefully, membership_operation
from .commits import Commits, commit_error, offsets_arg, outcome_of, retrieve_outcome
from .iteration import IterationBuffer
from .lifecycle import SideTasks, Startup, close_by_force
from .listener import ConsumerRebalanceListener
from .lookups import partition_args, partitions_arg, position_of, topic_partitions
from .metrics import snapshot
from .observers import ConsumerObservers
from .parts import ConsumerHooks, ConsumerParts, PollClock
from .poll_steps import PollSteps
from .polling import poll_once, update_positions
from .revocation import Revocation, revocation_of, revoking_context
from .telemetry import MetricsPush
from .unsubscribing import UnsubscribeTask, Unsubscribing, revoke_and_leave
from .wiring import make_fetcher, make_member, make_offset_lookup

T = TypeVar("T")

POLL_DEFAULT_TIMEOUT = 1.0


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
        self._subscription = SubscriptionState.for_reset(config.auto_offset_reset)
        self._cluster: Cluster | None = None
        self._fetcher: Fetcher | None = None
        self._offsets: OffsetLookup | None = None
        self._member: GroupMember | None = None
        self._poll_steps = PollSteps()
        self._side_tasks = SideTasks()
        self.observers = ConsumerObservers()  # instrumentation (aiokafka_lite.otel) sees each poll and commit
        self._commits = Commits(config, lambda: self._require_member("commit()"), self._ready_to_commit,
                                self._commits_standalone, lambda: self._closing.forcing, self.observers)
        self._timers = LivenessTimers(config.session_timeout, config.heartbeat_interval,
                                      config.max_poll_interval, config.retry_backoff, config.retry_backoff_max)
        self._timers_lock = threading.Lock()  # the heartbeat thread (heartbeat_mode="thread") shares the timers
        self._poll_clock = PollClock(self._timers, self._timers_lock)
        self._parts = ConsumerParts(config, self._subscription, self._poll_steps, self._commits, self._poll_clock,
                                    self._hooks())
        self._stall = StallMonitor(config.session_timeout, config.stall_warning_ratio, config.heartbeat_mode)
        self._telemetry = MetricsPush(config, self.metrics)  # KIP-714, from start() to close()
        self._closing = Closing("close")
        self._startup = Startup(config, self._connected, self._is_closed)
        self._unsubscribing = UnsubscribeTask()
        self._iter_buffer = IterationBuffer()
        self._polls = 0
        topic_list = list(topics)
        if topic_list:
            self.subscribe(topic_list)

    def _hooks(self) -> ConsumerHooks:
        return ConsumerHooks(
            started=lambda: self._startup.started, cluster=self._cluster_or_fail, fetcher=lambda: self._fetcher,
            offsets=self._offset_lookup, member=lambda: self._member, check_open=self._check_open,
            offsets_to_commit=lambda: self._offsets_to_commit(None), finish_unsubscribe=self._finish_unsubscribe)

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        # As asyncio does for an unclosed transport: a consumer that tried to connect and was
        # dropped without close() says so once.
        startup = getattr(self, "_startup", None)
        if startup is not None and startup.attempted and not self._closing.closed:
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
        limit = self._open_call(timeout)
        try:
            await bounded(self._startup.ensure_started(), limit, "connecting to the bootstrap servers",
                          self._is_closed)
        except KafkaTimeoutError as exc:
            raise self._startup.unreached(exc, limit) from exc.__cause__

    def _connected(self, cluster: Cluster) -> None:
        """What start() builds on the bootstrapped cluster."""
        self._cluster = cluster
        self._fetcher = make_fetcher(self.config, cluster, self._subscription)
        self._offsets = make_offset_lookup(self.config, cluster)
        if self.config.group_id is not None:
            self._member = make_member(cluster, self.config, self._parts, self._timers, self._timers_lock)
        self._stall.start()
        self._telemetry.start(cluster)

    async def close(self, timeout: float | None = 30.0,
                    group_membership: structs.GroupMembershipOperation | str = "default") -> None:
        """Commit (if auto-commit), revoke, LeaveGroup within the timeout, then close by force.
        `timeout=None` bounds the graceful part by request_timeout_ms, as Java does. `group_membership`
        (KIP-1092): "default" (dynamic members leave, static ones remain), "leave" (static ones too),
        "remain" (the group is told nothing). Idempotent: a second call waits for the first, but no
        longer than its own timeout, then cuts the graceful part short. Cancelled, it cuts the graceful
        part short too, waits for the forced part (nothing is left running), re-raises the CancelledError."""
        timeout = check_timeout(timeout)  # NaN or negative: refused before anything closes
        operation = membership_operation(group_membership)  # so is an unknown operation
        graceful_limit = self.config.request_timeout if timeout is None else timeout
        graceful = lambda: close_gracefully(self._parts, graceful_limit, operation, self._telemetry.finish)  # noqa: E731
        await self._closing.close(timeout, graceful, lambda: self._close_by_force(operation))

    async def _close_by_force(self, operation: structs.GroupMembershipOperation) -> None:
        """Cancel and await every task the consumer owns, close every connection."""
        self._closing.forcing = True
        await self._startup.stop()  # first: nothing it would open is left open
        await close_by_force(self._poll_steps, self._unsubscribing, self._commits, self._member, self._stall,
                             self._side_tasks, self._telemetry, self._fetcher, self._offsets, self._cluster, operation)

    def _cluster_or_fail(self) -> Cluster:
        if self._cluster is None:
            raise IllegalStateError("the consumer is not started")
        return self._cluster

    def _is_closed(self) -> bool:
        return self._closing.closed

    def _open_call(self, timeout: Timeout) -> float | None:
        """An awaitable call begins here: the consumer is open, and the call's time limit."""
        self._check_open()
        return resolve_timeout(timeout, self.config)

    def _check_open(self) -> None:
        # The listener that close() calls may still use the consumer (commit, position...), as
        # in Java; calls from anywhere else find it closed.
        if self._closing.closed and self._revocation() is None:
            raise ConsumerClosedError("the consumer is closed")

    def _revocation(self) -> Revocation | None:
        """The revocation of this consumer's close() or unsubscribe() running in this context."""
        return revocation_of(self._parts)

    def _raise_background_error(self) -> None:
        if self._member is not None and self._member.fatal_error is not None:
            raise self._member.fatal_error

    async def _ready_to_commit(self) -> None:
        """Started, no background error pending; not checked for open: a commit made before close() lands."""
        await self._startup.ensure_started()
        self._raise_background_error()

    async def _ready(self) -> None:
        """Started (lazily, within the caller's deadline) and no background error pending."""
        self._check_open()
        await self._startup.ensure_started()
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
            raise self._startup.unreached(exc, limit, what) from exc.__cause__

    # ------------------------------------------------------------ subscription

    def subscribe(self, topics: Iterable[str] = (), *, pattern: str | re.Pattern[str] | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        self._check_open()
        if self.config.group_id is None:
            raise IllegalStateError("subscribe() needs a group_id; without a group use assign()")
        topic_list = [topics] if isinstance(topics, str) else list(topics)
        if pattern is None and not topic_list:
            self.unsubscribe()  # as in Java: subscribing to nothing is unsubscribing
            return
        changed = self._subscription.subscribe_to(topic_list, pattern)
        if listener is not None:
            self._parts.listener = listener
        if self._member is not None and changed:  # as in Java: the same subscription again is no rejoin
            self._member.subscription_changed("subscription changed")

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._check_open()
        if self._member is not None and self.config.enable_auto_commit \
                and self._subscription.type is SubscriptionType.MANUAL:
            # As in Java: what was consumed from the partitions being replaced is committed first.
            offsets = self._offsets_to_commit(None)
            if offsets:
                self._commits.submit_own(offsets).add_done_callback(retrieve_outcome)
        self._subscription.assign_manually(partitions)

    def unsubscribe(self) -> Unsubscribing:
        """Drop the subscription (or the manual assignment) at once. A group member then runs
        on_partitions_revoked (or _lost) for what it owned, auto-commits what was consumed, and
        leaves the group, in a task the consumer owns (unsubscribing.py): `await
        consumer.unsubscribe()` waits for it; otherwise the next poll() or close() does."""
        self._check_open()
        member, sub = self._member, self._subscription
        owned = sub.assigned() if sub.uses_group else set()
        if member is None or not owned or self._unsubscribing.under_way:
            sub.unsubscribe()
            if member is not None and member.is_stable and not self._unsubscribing.under_way:
                self._side_tasks.spawn(member.leave("the consumer unsubscribed", timeout=self.config.request_timeout))
            return Unsubscribing(self._finish_unsubscribe)
        consumed = {tp: om for tp, om in self._offsets_to_commit(None).items() if tp in owned}
        lost = not (member.is_stable or member.mid_join)
        sub.unsubscribe()
        self._iter_buffer.drop(owned)
        self._unsubscribing.start(revoke_and_leave(self._parts, member, owned, lost),
                                  revoking_context(self._parts, consumed))
        return Unsubscribing(self._finish_unsubscribe)

    async def _finish_unsubscribe(self) -> None:
        """Wait for the revocation unsubscribe() started, and raise its error (once)."""
        if self._revocation() is None:  # not from inside the revocation itself
            await self._unsubscribing.finish()

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
        return await self._poll(timeout, max_records, None)

    async def _poll(self, timeout: float, max_records: int | None, convert: ValueConverter | None) -> ConsumerRecords:
        """poll(), with ``convert`` standing in for the deserializers (poll_arrow()'s value column)."""
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
            return self._iter_buffer.take(limit)
        with self.observers.poll() as seen:
            try:
                with closed_not_cancelled(self._is_closed, "poll()"):
                    async with asyncio.timeout(limit_s) as scope:
                        await self._finish_unsubscribe()  # the leave goes out before any rejoin
                        await self._ready()  # connecting counts against this poll's timeout too
                        return seen.got(await poll_once(self._parts, limit, scope.when(), convert))
            except TimeoutError:
                return ConsumerRecords()
            finally:
                # A cancelled or failed poll still counts as a poll: the watchdog must never get stuck.
                self._stamp_poll()

    async def poll_arrow(self, timeout: float = POLL_DEFAULT_TIMEOUT, max_records: int | None = None) -> ArrowBatch:
        """poll() as one Arrow record batch with the columns of Spark's Kafka source: key, value,
        topic, partition, offset, timestamp (ms, UTC), timestampType, headers. Positions, commits
        and timeouts behave as for poll(). Keys and values are raw bytes, except values decoded by
        a deserializer that gives their Arrow type (a schema registry AvroDeserializer with a reader
        schema: a struct column); other deserializers are refused (InvalidArgumentError). Without
        the native extension (or for typed values) it needs pyarrow (ArrowUnavailableError, raised
        before anything is consumed)."""
        check_timeout(timeout, none_ok=False, what="poll timeout")
        value_type = arrow.decoded_value_type(self.config.key_deserializer, self.config.value_deserializer)
        sink = None if value_type is None else arrow.value_sink(self.config.value_deserializer)  # native column
        return arrow.batch_of(await self._poll(timeout, max_records, sink and sink.convert), value_type, sink)

    def _stamp_poll(self) -> None:
        self._poll_clock.stamp()

    async def run_blocking(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run blocking or CPU-bound work in a worker thread, so the event loop (and with it the
        heartbeat task) stays free. The poll deadline still applies: the work must finish within
        max_poll_interval_ms of the last poll()."""
        return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        while not self._iter_buffer:
            if self._closing.closed:
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
        limit = self._open_call(timeout)
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
        outcome = outcome_of(self.submit_commit(to_commit, self.config.default_api_timeout))
        outcome.add_done_callback(retrieve_outcome)
        if callback is not None:
            outcome.add_done_callback(lambda f: callback(to_commit, commit_error(f)))
        return outcome

    def submit_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                      limit: float | None = None) -> asyncio.Task[None]:
        """Queue a commit behind every earlier one (commit_order); `limit` bounds it once it runs."""
        return self._commits.submit(offsets, limit)

    def _commits_standalone(self) -> bool:
        # A consumer that assigned its partitions by hand commits as a standalone consumer;
        # unsubscribe()'s revocation commits as the member that owned the partitions.
        revocation = self._revocation()
        return not self._subscription.uses_group and (revocation is None or revocation.offsets is None)

    def _offsets_to_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None
                           ) -> dict[TopicPartition, OffsetAndMetadata]:
        revocation = self._revocation()
        if offsets is None and revocation is not None and revocation.offsets is not None:
            return dict(revocation.offsets)  # unsubscribe()'s listener commits what was consumed
        if offsets is None:
            return self._iter_buffer.before_buffered(self._subscription.consumed_offsets())
        return offsets_arg(offsets)

    def _check_group_id(self, what: str) -> None:
        if self.config.group_id is None:
            raise IllegalStateError(f"{what} needs a group_id")

    def _require_member(self, what: str) -> GroupMember:
        self._check_group_id(what)
        if self._member is None:
            raise IllegalStateError(f"{what}: the consumer is not started")
        return self._member

    # ------------------------------------------------------------ positions and offsets

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._check_open()
        self._subscription.seek(tp, offset)
        self._iter_buffer.drop({tp})

    async def seek_to_beginning(self, *tps: TopicPartition, timeout: Timeout = DEFAULT) -> None:
        await self._seek_to(tps, ResetStrategy.EARLIEST, timeout)

    async def seek_to_end(self, *tps: TopicPartition, timeout: Timeout = DEFAULT) -> None:
        await self._seek_to(tps, ResetStrategy.LATEST, timeout)

    async def _seek_to(self, tps: Iterable[TopicPartition], strategy: ResetStrategy, timeout: Timeout) -> None:
        limit = self._open_call(timeout)
        targets = list(tps) or list(self._subscription.assigned())
        for tp in targets:
            self._subscription.state(tp)  # an unassigned partition is a misuse: raise before any change

        async def reset() -> None:
            self._iter_buffer.drop(set(targets))
            for tp in targets:
                self._subscription.request_reset(tp, strategy)
            assert self._offsets is not None
            await self._offsets.reset_positions(self._subscription, None)
        await self._call("seek", limit, reset)

    def pause(self, *tps: TopicPartition) -> None:
        self._check_open()
        self._subscription.pause(partition_args(tps, "pause"))

    def resume(self, *tps: TopicPartition) -> None:
        self._check_open()
        self._subscription.resume(partition_args(tps, "resume"))

    def paused(self) -> set[TopicPartition]:
        self._check_open()
        return self._subscription.paused()

    async def position(self, tp: TopicPartition, timeout: Timeout = DEFAULT) -> int:
        limit = self._open_call(timeout)
        self._subscription.state(tp)  # raises for an unassigned partition
        return await self._call("position", limit, lambda: position_of(
            self._subscription, tp, lambda: update_positions(self._parts, [tp])))

    async def committed(self, tps: Iterable[TopicPartition], timeout: Timeout = DEFAULT
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        limit = self._open_call(timeout)
        self._check_group_id("committed()")
        wanted = partitions_arg(tps, "committed()")
        return await self._call("committed", limit,
                                lambda: self._commits.committed(self._require_member("committed()"), wanted))

    async def beginning_offsets(self, tps: Iterable[TopicPartition], timeout: Timeout = DEFAULT
                                ) -> dict[TopicPartition, int]:
        limit = self._open_call(timeout)
        wanted = partitions_arg(tps, "beginning_offsets()")
        return await self._call("beginning_offsets", limit,
                                lambda: self._offset_lookup().beginning_offsets(wanted, None))

    async def end_offsets(self, tps: Iterable[TopicPartition], timeout: Timeout = DEFAULT
                          ) -> dict[TopicPartition, int]:
        limit = self._open_call(timeout)
        wanted = partitions_arg(tps, "end_offsets()")
        return await self._call("end_offsets", limit, lambda: self._offset_lookup().end_offsets(wanted, None))

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int], timeout: Timeout = DEFAULT
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the earliest offset whose timestamp is >= the one given (ms since
        the epoch), or None when there is no such record."""
        limit = self._open_call(timeout)
        partitions_arg(timestamps, "offsets_for_times()")
        wanted = dict(timestamps)
        return await self._call("offsets_for_times", limit,
                                lambda: self._offset_lookup().offsets_for_times(wanted, None))

    def _offset_lookup(self) -> OffsetLookup:
        assert self._offsets is not None  # set by start(), which _call awaits first
        return self._offsets

    async def partitions_for(self, topic: str, timeout: Timeout = DEFAULT) -> list[TopicPartition]:
        return (await self._topics([topic], timeout)).get(topic, [])

    async def list_topics(self, timeout: Timeout = DEFAULT) -> dict[str, list[TopicPartition]]:
        return await self._topics(None, timeout)

    async def _topics(self, names: list[str] | None, timeout: Timeout) -> dict[str, list[TopicPartition]]:
        limit = self._open_call(timeout)
        return await self._call("metadata", limit, lambda: topic_partitions(self._cluster_or_fail(), names))

    def metrics(self) -> dict[str, Any]:
        figures = {"client_id": self.config.client_id, "group_id": self.config.group_id,
                   "started": self._startup.started, "closed": self._closing.closed, "polls": self._polls,
                   "heartbeat_mode": self.config.heartbeat_mode, "loop_stalls": self._stall.stalls,
                   "longest_loop_stall_seconds": self._stall.longest_stall, "bootstrap_failures":
                   self._startup.failures(), "record_decoder": native.decoder(), **self._commits.figures.as_dict()}
        return snapshot(figures, self._subscription, self._timers, self._member, self._cluster, self._fetcher)

