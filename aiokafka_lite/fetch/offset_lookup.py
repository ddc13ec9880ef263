"""Offset lookups with ListOffsets: earliest/latest offsets, offsets for timestamps, position resets.

One lookup sends one ListOffsets request per partition leader, all brokers at once, and retries the
partitions that failed with a retriable error (after a metadata refresh and a backoff) until the
caller's timeout, which bounds the whole call.
"""

# The public API contract gives every awaitable a `timeout` (see DESIGN.md), implemented with
# exactly one asyncio.timeout() per call, which is what ASYNC109 asks for anyway.

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from .._net.backoff import Backoff
from ..errors import (
    ERROR_CODE_BY_NAME,
    BrokerError,
    ConsumerClosedError,
    InvalidArgumentError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
)
from ..protocol.api import Api
from ..protocol.messages import LIST_OFFSETS
from ..structs import OffsetAndTimestamp, TopicPartition
from ..subscription import ResetStrategy, SubscriptionState

log = logging.getLogger("aiokafka_lite.consumer.offsets")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# Errors after which the partition is asked again, once metadata has been refreshed.
RETRIABLE_CODES = frozenset(
    ERROR_CODE_BY_NAME[name]
    for name in (
        "NOT_LEADER_OR_FOLLOWER",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "LEADER_NOT_AVAILABLE",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "OFFSET_NOT_AVAILABLE",
        "REQUEST_TIMED_OUT",
        "KAFKA_STORAGE_ERROR",
        "REPLICA_NOT_AVAILABLE",
    )
)

_STRATEGY_TIMESTAMPS = {ResetStrategy.EARLIEST: EARLIEST_TIMESTAMP, ResetStrategy.LATEST: LATEST_TIMESTAMP}



class ConnectionLike(Protocol):
    """What the consumer needs of a broker connection (``_net.connection.Connection``)."""

    @property
    def closed(self) -> bool: ...

    def version_for(self, api: Api, client_max: int | None = None) -> int: ...

    async def send(self, api: Api, version: int, body: Mapping[str, Any], *,
                   timeout: float | None) -> dict[str, Any]: ...


class ClusterLike(Protocol):
    """What the consumer needs of the metadata cache and connection pool (``_net.cluster.Cluster``)."""

    def leader_for(self, tp: TopicPartition) -> int | None: ...

    def leaders_for(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]: ...

    def leader_epoch_for(self, tp: TopicPartition) -> int | None: ...

    async def connection(self, node_id: int, timeout: float | None, lane: int = 0) -> Any: ...

    async def refresh_metadata(self, topics: Sequence[str] | None, timeout: float | None) -> Any: ...


class OffsetLookup:
    """ListOffsets for many partitions at once, with retries bounded by one timeout."""

    def __init__(self, cluster: ClusterLike, *, isolation_level: int = READ_UNCOMMITTED,
                 retry_backoff: float = 0.1, request_timeout: float = 30.0,
                 retry_backoff_max: float = 1.0) -> None:
        self._cluster = cluster
        self._isolation_level = isolation_level
        self._retry_backoff = retry_backoff
        self._retry_backoff_max = retry_backoff_max
        self._request_timeout = request_timeout
        # Each round's ListOffsets, one task per broker: close() cancels and awaits them, so none
        # outlives the consumer (the call that started them then ends with ConsumerClosedError).
        self._asking: set[asyncio.Task[None]] = set()
        self._closed = False

    # ------------------------------------------------------------------ public helpers

    async def beginning_offsets(self, tps: Iterable[TopicPartition],
                                timeout: float | None) -> dict[TopicPartition, int]:
        found = await self.list_offsets(dict.fromkeys(tps, EARLIEST_TIMESTAMP), timeout)
        return {tp: offset for tp, (offset, _ts) in found.items()}

    async def end_offsets(self, tps: Iterable[TopicPartition],
                          timeout: float | None) -> dict[TopicPartition, int]:
        found = await self.list_offsets(dict.fromkeys(tps, LATEST_TIMESTAMP), timeout)
        return {tp: offset for tp, (offset, _ts) in found.items()}

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int], timeout: float | None
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest (offset, timestamp) with a timestamp >= the one asked; None when no such record."""
        for tp, ts in timestamps.items():
            if not isinstance(ts, int) or isinstance(ts, bool) or ts < 0:
                raise InvalidArgumentError(f"offsets_for_times needs timestamps >= 0 in ms, got {ts!r} for {tp}")
        found = await self.list_offsets(timestamps, timeout)
        return {tp: (None if found[tp].offset < 0 else found[tp]) for tp in timestamps}

    async def reset_positions(self, subscription: SubscriptionState, timeout: float | None) -> None:
        """Resolve every pending reset (EARLIEST/LATEST) into a position; NONE raises."""
        pending: dict[TopicPartition, ResetStrategy] = {}
        for tp in subscription.needing_reset():
            strategy = subscription.state(tp).reset_to
            if strategy is not None:
                pending[tp] = strategy
        if not pending:
            return
        no_reset = sorted(tp for tp, strategy in pending.items() if strategy is ResetStrategy.NONE)
        if no_reset:
            raise NoOffsetForPartitionError(
                f"no offset to start from for {', '.join(map(_tp_str, no_reset))} and "
                f"auto_offset_reset='none': seek() these partitions or choose 'earliest'/'latest'"
            )
        since_ms = int(time.time() * 1000) - subscription.reset_duration_ms
        asked = {tp: _STRATEGY_TIMESTAMPS.get(strategy, since_ms) for tp, strategy in pending.items()}
        found = await self.list_offsets(asked, timeout)
        # by_duration with every record older than that: the end, as Java (KIP-1106).
        newest = [tp for tp, (offset, _ts) in found.items() if offset < 0]
        found.update(await self.list_offsets(dict.fromkeys(newest, LATEST_TIMESTAMP), timeout))
        for tp, (offset, _ts) in found.items():
            # The user may have seeked, or a rebalance revoked the partition, while we waited.
            state = subscription.assignment.get(tp)
            if state is None or state.reset_to is not pending[tp]:
                continue
            how = pending[tp].value
            if pending[tp] is ResetStrategy.BY_DURATION:
                how = f"{how} {subscription.reset_duration_ms} ms{', no newer record: the end' if tp in newest else ''}"
            log.info("resetting %s to offset %d (%s)", _tp_str(tp), offset, how)
            subscription.seek(tp, offset)

    # ------------------------------------------------------------------ the lookup

    async def list_offsets(self, timestamps: Mapping[TopicPartition, int],
                           timeout: float | None) -> dict[TopicPartition, OffsetAndTimestamp]:
        """{tp: (offset, timestamp)} for {tp: timestamp_ms | -1 latest | -2 earliest}.

        An offset of -1 means the partition has no record at or after the timestamp.
        """
        pending = dict(timestamps)
        found: dict[TopicPartition, OffsetAndTimestamp] = {}
        if not pending:
            return found
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                await self._until_done(pending, found, scope)
        except TimeoutError as exc:
            if not scope.expired():
                raise
            raise KafkaTimeoutError(
                f"ListOffsets did not complete within {timeout} s; still unanswered: "
                f"{', '.join(map(_tp_str, sorted(pending)))}"
            ) from exc
        return found

    async def _until_done(self, pending: dict[TopicPartition, int],
                          found: dict[TopicPartition, OffsetAndTimestamp], scope: asyncio.Timeout) -> None:
        backoff = Backoff(self._retry_backoff, self._retry_backoff_max)
        while True:
            await self._one_round(pending, found, scope)
            if not pending:
                return
            backoff.failed(time.monotonic())
            await asyncio.sleep(backoff.delay())
            topics = sorted({tp.topic for tp in pending})
            await self._cluster.refresh_metadata(topics, timeout=self._request_timeout_within(scope))

    async def _one_round(self, pending: dict[TopicPartition, int],
                         found: dict[TopicPartition, OffsetAndTimestamp], scope: asyncio.Timeout) -> None:
        by_leader: dict[int, dict[TopicPartition, int]] = defaultdict(dict)
        for tp, ts in pending.items():
            leader = self._cluster.leader_for(tp)
            if leader is not None and leader >= 0:
                by_leader[leader][tp] = ts
        fatal: list[BaseException] = []
        if self._closed:
            raise ConsumerClosedError("the consumer was closed while ListOffsets was in flight")
        try:
            async with asyncio.TaskGroup() as group:
                for node_id, asked in by_leader.items():
                    task = group.create_task(self._ask_broker(node_id, asked, pending, found, fatal, scope))
                    self._asking.add(task)
                    task.add_done_callback(self._asking.discard)
        except BaseExceptionGroup as failed:  # not ours to show the caller: its first error, typed
            raise failed.exceptions[0] from None
        if fatal:
            raise fatal[0]

    async def close(self) -> None:
        """Cancel and await the ListOffsets in flight; a lookup after this raises ConsumerClosedError."""
        self._closed = True
        asking = list(self._asking)
        for task in asking:
            task.cancel()
        if asking:
            await asyncio.wait(asking)

    async def _ask_broker(self, node_id: int, asked: dict[TopicPartition, int],
                          pending: dict[TopicPartition, int], found: dict[TopicPartition, OffsetAndTimestamp],
                          fatal: list[BaseException], scope: asyncio.Timeout) -> None:
        """One ListOffsets to one broker; answers land in `found`, retriable failures stay pending."""
        try:
            request_timeout = self._request_timeout_within(scope)
            conn: ConnectionLike = await self._cluster.connection(node_id, timeout=request_timeout)
            version = conn.version_for(LIST_OFFSETS)
            body = self._request_body(asked, version, request_timeout)
            response = await conn.send(LIST_OFFSETS, version, body, timeout=request_timeout)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            # Only this request's own timeout: the caller's overall timeout cancels us instead.
            log.debug("ListOffsets to broker %d failed (%s); retrying", node_id, exc)  # the connection said it
            return
        except KafkaError as exc:  # e.g. ConsumerClosedError: the call's error, not a TaskGroup's
            fatal.append(exc)
            return
        for tp, answer, code in _partition_answers(response):
            if tp not in asked:
                continue
            if code == 0:
                found[tp] = answer
                del pending[tp]
            elif code in RETRIABLE_CODES:
                log.debug("ListOffsets for %s: %s; retrying", _tp_str(tp), BrokerError(code).name)
            else:
                fatal.append(BrokerError(code, f"ListOffsets for {_tp_str(tp)} from broker {node_id}"))

    def _request_body(self, asked: Mapping[TopicPartition, int], version: int,
                      timeout: float | None) -> dict[str, Any]:
        by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for tp, ts in asked.items():
            by_topic[tp.topic].append(
                {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": ts}
            )
        body: dict[str, Any] = {
            "replica_id": -1,
            "isolation_level": self._isolation_level,
            "topics": [{"name": topic, "partitions": parts} for topic, parts in by_topic.items()],
        }
        if version >= 10:  # the broker's own wait for remote-storage lookups (KIP-1075)
            body["timeout_ms"] = int((timeout if timeout is not None else self._request_timeout) * 1000)
        return body

    def _request_timeout_within(self, scope: asyncio.Timeout) -> float:
        deadline = scope.when()
        if deadline is None:
            return self._request_timeout
        left = deadline - asyncio.get_running_loop().time()
        return max(min(self._request_timeout, left), 0.001)


def _partition_answers(response: Mapping[str, Any]
                       ) -> Iterable[tuple[TopicPartition, OffsetAndTimestamp, int]]:
    # ListOffsets v0 (a list of offsets per partition) is gone since Kafka 4.0; our schema starts at v1.
    for topic in response["topics"]:
        name = topic["name"]
        for part in topic["partitions"]:
            answer = OffsetAndTimestamp(part["offset"], part["timestamp"])
            yield TopicPartition(name, part["partition_index"]), answer, part["error_code"]


def _tp_str(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"
