"""The Consumer users hold: it owns the cluster, the fetcher, the group coordinator and the
background tasks, and closes them. Every awaitable method is bounded (KIP-266)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from .._net.cluster import Cluster
from ..config import ConsumerConfig
from ..errors import (
    ConsumerClosedError,
    IllegalStateError,
    InvalidArgumentError,
    KafkaConnectionError,
)
from ..structs import ConsumerRecord, ConsumerRecords, OffsetAndMetadata, TopicPartition
from ._bounded import DEFAULT, Timeout, bounded, resolve_timeout
from .background import LivenessTasks
from .fetcher import Fetcher
from .group import GroupCoordinator
from .listener import ConsumerRebalanceListener
from .liveness import LivenessTimers
from .offsets import OffsetLookup
from .subscription import ResetStrategy, SubscriptionState
from .wiring import make_cluster, make_fetcher, make_offset_lookup

log = logging.getLogger("aiokafka_lite.consumer")
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
        self._subscription = SubscriptionState(default_reset=ResetStrategy(config.auto_offset_reset))
        self._listener: ConsumerRebalanceListener = ConsumerRebalanceListener()
        self._cluster: Cluster | None = None
        self._fetcher: Fetcher | None = None
        self._offsets: OffsetLookup | None = None
        self._group: GroupCoordinator | None = None
        self._liveness: LivenessTasks | None = None
        self._join_task: asyncio.Task[Any] | None = None
        self._side_tasks: set[asyncio.Future[Any]] = set()
        self._timers = LivenessTimers(config.session_timeout, config.heartbeat_interval,
                                      config.max_poll_interval, config.retry_backoff)
        self._start_lock: asyncio.Lock | None = None
        self._started = False
        self._closed = False
        self._close_task: asyncio.Task[None] | None = None
        self._iter_buffer: deque[ConsumerRecord] = deque()
        self._next_auto_commit = 0.0
        self._polls = 0
        topic_list = list(topics)
        if topic_list:
            self.subscribe(topic_list)

    # ------------------------------------------------------------ life cycle

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, timeout: Timeout = DEFAULT) -> None:
        """Connect to the cluster (bounded by the timeout). Called by `async with` and lazily by poll()."""
        self._check_open()
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started:
                return
            cluster = make_cluster(self.config)
            try:
                await bounded(cluster.bootstrap(timeout=None), resolve_timeout(timeout, self.config),
                              "connecting to the bootstrap servers")
            except BaseException:
                await cluster.close()
                raise
            self._cluster = cluster
            self._fetcher = make_fetcher(self.config, cluster, self._subscription)
            self._offsets = make_offset_lookup(self.config, cluster)
            if self.config.group_id is not None:
                self._group = GroupCoordinator(cluster, self.config)
                self._liveness = LivenessTasks(self._group, self._timers, asyncio.get_running_loop().time)
            self._started = True

    async def close(self, timeout: float | None = 30.0) -> None:
        """Commit (if auto-commit), revoke, LeaveGroup within the timeout, then close by force.
        Idempotent: a second call waits for the first."""
        if self._close_task is None:
            self._closed = True
            self._close_task = asyncio.create_task(self._close(timeout), name="aiokafka-lite close")
        await asyncio.shield(self._close_task)

    async def _close(self, timeout: float | None) -> None:
        from .closing import close_by_force, close_gracefully
        try:
            await close_gracefully(self, timeout)
        finally:
            await close_by_force(self)

    def _cluster_or_fail(self) -> Cluster:
        if self._cluster is None:
            raise IllegalStateError("the consumer is not started")
        return self._cluster

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("the consumer is closed")

    def _raise_background_error(self) -> None:
        if self._liveness is not None and self._liveness.fatal_error is not None:
            raise self._liveness.fatal_error

    async def _ready(self) -> None:
        self._check_open()
        if not self._started:
            await self.start()
        self._raise_background_error()

    # ------------------------------------------------------------ subscription

    def subscribe(self, topics: Iterable[str] = (), *, pattern: str | re.Pattern[str] | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        self._check_open()
        if self.config.group_id is None:
            raise IllegalStateError("subscribe() needs a group_id; without a group use assign()")
        if isinstance(topics, str):
            topics = [topics]
        if pattern is not None:
            if list(topics):
                raise InvalidArgumentError("subscribe() takes topics or a pattern, not both")
            self._subscription.subscribe_pattern(pattern)
        else:
            self._subscription.subscribe(topics)
        if listener is not None:
            self._listener = listener
        if self._group is not None:
            self._group.request_rejoin("subscription changed")

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._check_open()
        self._subscription.assign_manually(partitions)

    def unsubscribe(self) -> None:
        self._check_open()
        self._subscription.unsubscribe()
        if self._group is not None and self._group.membership.is_stable:
            self._spawn(self._group.leave("the consumer unsubscribed", timeout=self.config.request_timeout))

    def assignment(self) -> set[TopicPartition]:
        return self._subscription.assigned()

    def subscription(self) -> set[str]:
        return set(self._subscription.topics)

    # ------------------------------------------------------------ poll

    async def poll(self, timeout: float = POLL_DEFAULT_TIMEOUT, max_records: int | None = None) -> ConsumerRecords:
        """Records fetched so far, waiting up to `timeout` seconds for some. Empty on timeout,
        even while the group rebalances or the coordinator is unknown; never raises a timeout."""
        from .polling import poll_once
        if timeout is None or timeout < 0:
            raise InvalidArgumentError(f"poll timeout must be a number of seconds >= 0, got {timeout!r}")
        limit = self.config.max_poll_records if max_records is None else max_records
        if not isinstance(limit, int) or limit < 1:
            raise InvalidArgumentError(f"max_records must be an int >= 1, got {max_records!r}")
        await self._ready()
        if not self._subscription.assigned() and self._subscription.type.value == "none":
            raise IllegalStateError("poll() before subscribe() or assign()")
        loop = asyncio.get_running_loop()
        self._timers.on_poll(loop.time())
        self._polls += 1
        try:
            async with asyncio.timeout(timeout):
                return await poll_once(self, limit)
        except TimeoutError:
            return ConsumerRecords()
        finally:
            # A cancelled or failed poll still counts as a poll: the watchdog must never get stuck.
            self._timers.on_poll(loop.time())

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
        """Commit the given offsets, or the offsets of every record handed out so far."""
        await self._ready()
        group = self._require_group("commit()")
        to_commit = self._offsets_to_commit(offsets)
        if to_commit:
            await bounded(self._retry_on_connection(lambda: group.commit(to_commit, None)),
                          resolve_timeout(timeout, self.config), "commit")

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: Callable[[Mapping[TopicPartition, OffsetAndMetadata], BaseException | None], Any]
                     | None = None) -> asyncio.Future[None]:
        """Start a commit; the future (and the callback, if any) get its outcome."""
        self._check_open()
        to_commit = self._offsets_to_commit(offsets)
        fut = self._spawn(self.commit(to_commit))
        if callback is not None:
            fut.add_done_callback(lambda f: callback(to_commit, None if f.cancelled() else f.exception()))
        return fut

    def _offsets_to_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None
                           ) -> dict[TopicPartition, OffsetAndMetadata]:
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
        while True:
            try:
                return await call()
            except KafkaConnectionError as exc:
                log.info("retrying after a connection error: %s", exc)
                await asyncio.sleep(self.config.retry_backoff)

    def _require_group(self, what: str) -> GroupCoordinator:
        if self._group is None:
            raise IllegalStateError(f"{what} needs a group_id")
        return self._group

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

    async def seek_to_beginning(self, *tps: TopicPartition, timeout: Timeout = DEFAULT) -> None:
        await self._seek_to(tps, ResetStrategy.EARLIEST, timeout)

    async def seek_to_end(self, *tps: TopicPartition, timeout: Timeout = DEFAULT) -> None:
        await self._seek_to(tps, ResetStrategy.LATEST, timeout)

    async def _seek_to(self, tps: Iterable[TopicPartition], strategy: ResetStrategy, timeout: Timeout) -> None:
        await self._ready()
        targets = list(tps) or list(self._subscription.assigned())
        for tp in targets:
            self._subscription.request_reset(tp, strategy)
        assert self._offsets is not None
        await bounded(self._offsets.reset_positions(self._subscription, None),
                      resolve_timeout(timeout, self.config), "seek")

    def pause(self, *tps: TopicPartition) -> None:
        self._subscription.pause(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self._subscription.resume(tps)

    def paused(self) -> set[TopicPartition]:
        return self._subscription.paused()

    async def position(self, tp: TopicPartition, timeout: Timeout = DEFAULT) -> int:
        from .polling import update_positions
        await self._ready()
        state = self._subscription.state(tp)
        if state.position is None:
            await bounded(update_positions(self, [tp]), resolve_timeout(timeout, self.config), "position")
        position = self._subscription.state(tp).position
        assert position is not None
        return position

    async def committed(self, tps: Iterable[TopicPartition], timeout: Timeout = DEFAULT
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        await self._ready()
        group = self._require_group("committed()")
        wanted = list(tps)
        result: dict[TopicPartition, OffsetAndMetadata | None] = await bounded(
            self._retry_on_connection(lambda: group.fetch_committed(wanted, None)),
            resolve_timeout(timeout, self.config), "committed")
        return result

    async def beginning_offsets(self, tps: Iterable[TopicPartition], timeout: Timeout = DEFAULT
                                ) -> dict[TopicPartition, int]:
        await self._ready()
        assert self._offsets is not None
        result: dict[TopicPartition, int] = await bounded(self._offsets.beginning_offsets(list(tps), None),
                                                          resolve_timeout(timeout, self.config),
                                                          "beginning_offsets")
        return result

    async def end_offsets(self, tps: Iterable[TopicPartition], timeout: Timeout = DEFAULT
                          ) -> dict[TopicPartition, int]:
        await self._ready()
        assert self._offsets is not None
        result: dict[TopicPartition, int] = await bounded(self._offsets.end_offsets(list(tps), None),
                                                          resolve_timeout(timeout, self.config), "end_offsets")
        return result

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int], timeout: Timeout = DEFAULT
                                ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        await self._ready()
        assert self._offsets is not None
        result: dict[TopicPartition, Any] = await bounded(self._offsets.offsets_for_times(dict(timestamps), None),
                                                          resolve_timeout(timeout, self.config),
                                                          "offsets_for_times")
        return result

    async def partitions_for(self, topic: str, timeout: Timeout = DEFAULT) -> list[TopicPartition]:
        topics = await self._topics([topic], timeout)
        return topics.get(topic, [])

    async def list_topics(self, timeout: Timeout = DEFAULT) -> dict[str, list[TopicPartition]]:
        return await self._topics(None, timeout)

    async def _topics(self, names: list[str] | None, timeout: Timeout) -> dict[str, list[TopicPartition]]:
        await self._ready()
        cluster = self._cluster
        assert cluster is not None
        await bounded(cluster.refresh_metadata(names, timeout=None), resolve_timeout(timeout, self.config),
                      "metadata")
        wanted = names if names is not None else cluster.topics(exclude_internal=self.config.exclude_internal_topics)
        return {t: [TopicPartition(t, p) for p in sorted(cluster.partitions_for(t) or ())] for t in wanted
                if cluster.partitions_for(t)}

    def metrics(self) -> dict[str, Any]:
        from .metrics import snapshot
        return snapshot(self)
