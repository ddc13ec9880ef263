"""Kafka's ConsumerIntegrationTest (clients-integration-tests), the scenarios a client can check from
outside, under both group protocols as Kafka's ...WithGroupProtocolClassic/...WithGroupProtocolConsumer
(and ...Classic/...Consumer) pairs."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce

from ._kit import poll_until, settings

pytestmark = pytest.mark.asyncio


class FailingAssigned(ConsumerRebalanceListener):
    """on_partitions_assigned raises on its first ``failures`` calls (all calls when None)."""

    def __init__(self, failures: int | None) -> None:
        self.failures = failures
        self.calls = 0

    def on_partitions_assigned(self, assigned):
        self.calls += 1
        if self.failures is None or self.calls <= self.failures:
            raise ValueError("listener failed")


async def test_fetch_partitions_after_failed_listener(broker, unique_topic, unique_group, group_protocol):
    """ConsumerIntegrationTest.testFetchPartitionsAfterFailedListenerWithGroupProtocolClassic."""
    create_topic(broker, unique_topic, partitions=1)
    produce(broker, unique_topic, [("key", "value")])
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.subscribe([unique_topic], listener=FailingAssigned(1))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        got = []
        while not got:
            assert loop.time() < deadline, "no record within 5 s after a failed on_partitions_assigned"
            with contextlib.suppress(ValueError):  # the listener's error, raised from poll() once
                got = list(await consumer.poll(timeout=1))
        assert [(r.key, r.value) for r in got] == [(b"key", b"value")]


async def test_fetch_partitions_with_always_failed_listener(broker, unique_topic, unique_group, group_protocol):
    """ConsumerIntegrationTest.testFetchPartitionsWithAlwaysFailedListenerWithGroupProtocolClassic: while
    on_partitions_assigned keeps failing, poll() raises its error or returns nothing, for 3 s."""
    create_topic(broker, unique_topic, partitions=1)
    produce(broker, unique_topic, [("key", "value")])
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.subscribe([unique_topic], listener=FailingAssigned(None))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 3
        errors = 0
        while loop.time() < deadline:
            try:
                records = await consumer.poll(timeout=1)
            except ValueError:
                errors += 1
            else:
                assert len(records) == 0, "records from partitions whose on_partitions_assigned failed"
            await asyncio.sleep(0.3)
        assert errors >= 1


async def test_rapid_assign_auto_commit_correctness(broker, unique_topic, unique_group, group_protocol):
    """ConsumerIntegrationTest.testRapidAssignAutoCommitCorrectnessClassic: assign() commits (auto-commit) the
    consumed offsets of the partitions it gives up."""
    create_topic(broker, unique_topic, partitions=2)
    tp0, tp1 = TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)
    produce(broker, unique_topic, [{"key": f"key{i}", "value": f"val{i}", "partition": p}
                                   for i in range(10) for p in (0, 1)])
    conf = settings(broker, unique_group, group_protocol, enable_auto_commit=True, auto_commit_interval_ms=300000,
                    max_poll_records=1)
    async with Consumer(**conf) as consumer:
        for _ in range(10):
            for part in (tp0, tp1):
                consumer.assign([part])
                await poll_until(consumer, lambda got: len(got) >= 1, timeout=10)
        consumer.assign([tp0, tp1])  # commits what tp1 handed out
        async with Consumer(**settings(broker, unique_group, group_protocol)) as checker:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while True:
                committed = await checker.committed([tp0, tp1])
                if all(om is not None and om.offset == 10 for om in committed.values()):
                    break
                assert loop.time() < deadline, committed
                await asyncio.sleep(0.2)
