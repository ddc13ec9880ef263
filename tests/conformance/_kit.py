"""Shared pieces of the conformance suite: the settings, listener and helpers that Kafka's own
consumer tests (clients-integration-tests, ClientsTestUtils) rely on, expressed with our public API.

Records are produced with the reference producer in ``aiokafka_lite.testing.helpers`` in the same
shape as Kafka's ``sendRecords``: key ``key i``, value ``value i``, timestamp ``start + i``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from aiokafka_lite import Consumer, ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from aiokafka_lite.structs import TimestampType
from aiokafka_lite.testing.helpers import produce

from ..integration._consumers import Poller, poll_until
from ..integration._protocols import GroupProtocol

__all__ = [
    "KEEP_OLD_RECORDS", "CountingListener", "Poller", "await_assignment", "await_rebalance", "consume_and_verify",
    "consume_records",
    "poll_until", "poll_until_raises", "poll_until_true", "send_records", "settings",
]


# Kafka's tests stamp records from 1970 on (send_records). Time-based retention deletes such records
# the next time the broker checks (30 s after it starts, then every 5 minutes), and the log start
# offset jumps to the end mid-test. Kafka's harness, a cluster per test, never meets that check.
KEEP_OLD_RECORDS = {"retention.ms": "-1"}


def settings(broker: Any, group: str | None = None, protocol: GroupProtocol | None = None,
             **extra: Any) -> dict[str, Any]:
    """Kafka's test-consumer defaults (earliest, no auto-commit) with short group timers; under
    ``protocol`` (the ``group_protocol`` fixture) if given, as Kafka's tests set group.protocol."""
    base: dict[str, Any] = dict(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                                enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)
    if group is not None:
        base["group_id"] = group
    return (protocol or GroupProtocol("classic")).settings(base, **extra)


def send_records(broker: Any, tp: TopicPartition, count: int, start_ts: int = 1000, first: int = 0) -> None:
    """``count`` records to ``tp``: key ``key i``, value ``value i``, timestamp ``start_ts + i``.

    librdkafka reads a timestamp of 0 as "now", so Kafka's ``startingTimestamp = 0`` is 1000 here.
    """
    assert start_ts + first > 0, "a timestamp of 0 means 'now' to librdkafka"
    # Idempotent, as Kafka's test producer is: offsets are asserted against the produce order.
    produce(broker, tp.topic, [{"key": f"key {i}", "value": f"value {i}", "partition": tp.partition,
                                "timestamp": start_ts + i} for i in range(first, first + count)],
            enable_idempotence=True)


class CountingListener(ConsumerRebalanceListener):
    """Counts callbacks, like Kafka's TestConsumerReassignmentListener; hooks run inside them."""

    def __init__(self) -> None:
        self.calls_to_assigned = 0
        self.calls_to_revoked = 0
        self.calls_to_lost = 0
        self.assigned: list[set[TopicPartition]] = []
        self.revoked: list[set[TopicPartition]] = []

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.calls_to_assigned += 1
        self.assigned.append(set(assigned))

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.calls_to_revoked += 1
        self.revoked.append(set(revoked))

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.calls_to_lost += 1
        await self.on_partitions_revoked(lost)


async def poll_until_true(consumer: Consumer, condition: Callable[[], bool], timeout: float = 30.0,
                          poll_timeout: float = 0.1) -> list[ConsumerRecord]:
    """Kafka's pollUntilTrue: poll until ``condition()`` holds; fail after ``timeout``."""
    return await poll_until(consumer, lambda _: condition(), timeout=timeout, poll_timeout=poll_timeout)


async def await_rebalance(consumer: Consumer, listener: CountingListener, timeout: float = 30.0) -> None:
    """Kafka's awaitRebalance: poll until one more on_partitions_assigned call happened."""
    before = listener.calls_to_assigned
    await poll_until_true(consumer, lambda: listener.calls_to_assigned > before, timeout=timeout)


async def await_assignment(consumer: Consumer, expected: Iterable[TopicPartition], timeout: float = 30.0) -> None:
    wanted = set(expected)
    await poll_until_true(consumer, lambda: consumer.assignment() == wanted, timeout=timeout)


async def consume_records(consumer: Consumer, count: int, timeout: float = 30.0,
                          max_poll_records: int | None = None) -> list[ConsumerRecord]:
    """Poll until ``count`` records arrived (never more than ``max_poll_records`` per poll)."""
    got: list[ConsumerRecord] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(got) < count:
        assert loop.time() < deadline, f"{len(got)} of {count} records after {timeout} s"
        batch = await consumer.poll(timeout=0.5)
        if max_poll_records is not None:
            assert len(batch) <= max_poll_records, f"{len(batch)} records in one poll"
        got.extend(batch)
    return got


async def consume_and_verify(consumer: Consumer, tp: TopicPartition, count: int, start_offset: int,
                             start_index: int = 0, start_ts: int | None = None,
                             timestamp_type: int = TimestampType.CREATE_TIME,
                             max_poll_records: int | None = None) -> list[ConsumerRecord]:
    """Kafka's consumeAndVerifyRecords: offsets, keys, values and timestamps in produce order."""
    records = await consume_records(consumer, count, max_poll_records=max_poll_records)
    for i, record in enumerate(records[:count]):
        index = start_index + i
        assert (record.topic, record.partition) == tp
        assert record.offset == start_offset + i
        # Key and value together: a record out of place shows a matching pair, a decoder mix-up a torn one.
        assert (record.key, record.value) == (f"key {index}".encode(), f"value {index}".encode())
        assert record.timestamp_type == timestamp_type
        if start_ts is not None and timestamp_type == TimestampType.CREATE_TIME:
            assert record.timestamp == start_ts + index
        elif start_ts is not None:
            assert record.timestamp >= start_ts
    return records


async def poll_until_raises(consumer: Consumer, error: type[BaseException], timeout: float = 15.0,
                            poll_timeout: float = 0.0) -> BaseException:
    """Kafka's waitForPollThrowException: poll until ``error`` is raised; fail after ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        try:
            await consumer.poll(timeout=poll_timeout)
        except error as exc:
            return exc
        await asyncio.sleep(0.01)
    raise AssertionError(f"poll() did not raise {error.__name__} within {timeout} s")
