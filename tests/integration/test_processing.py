"""process() against Apache Kafka 4.3.1 with the real Consumer: every record once, each key's
records in order under concurrency 50, the watermark committed up to the end; and a restart skipping
what the committed metadata marks finished (the broker stores and returns it as written)."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.processing import Processor, decode
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import report, until
from ._protocols import GroupProtocol

pytestmark = pytest.mark.asyncio

PARTITIONS, RECORDS, KEYS = 6, 3000, 200


def consumer_of(broker: Any, group: str, topic: str, protocol: GroupProtocol | None = None) -> Consumer:
    base = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, enable_auto_commit=False,
                auto_offset_reset="earliest", auto_commit_interval_ms=500, session_timeout_ms=30000,
                heartbeat_interval_ms=500)
    return Consumer(topic, **(protocol.settings(base) if protocol is not None else base))


async def test_every_record_once_in_key_order_and_committed_to_the_end(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, group_protocol: GroupProtocol) -> None:
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    produce(broker, unique_topic, [(f"k{i % KEYS}", str(i)) for i in range(RECORDS)], enable_idempotence=True)
    seen: dict[tuple[int, bytes], list[int]] = defaultdict(list)
    values: dict[bytes, list[int]] = defaultdict(list)
    count: dict[tuple[int, int], int] = defaultdict(int)
    running = most = 0

    async def handler(record: Any) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        seen[(record.partition, record.key)].append(record.offset)
        values[record.key].append(int(record.value))
        count[(record.partition, record.offset)] += 1
        try:
            await asyncio.sleep(0.003)
        finally:
            running -= 1

    async with consumer_of(broker, unique_group, unique_topic, group_protocol) as consumer:
        processor = Processor(consumer, handler, concurrency=50, ordering="key")
        started = time.monotonic()
        task = asyncio.create_task(processor.run())
        await until(lambda: len(count) >= RECORDS or task.done(), 60.0, "every record handled")
        elapsed = time.monotonic() - started
        processor.stop()
        result = await asyncio.wait_for(task, 30.0)
        tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(tps)
        committed = await consumer.committed(tps)
    assert len(count) == RECORDS
    assert set(count.values()) == {1}
    assert result.processed == RECORDS
    assert result.reason == "stopped"
    for offsets in seen.values():
        assert offsets == sorted(offsets)
    for produced in values.values():
        assert produced == sorted(produced)  # per key, the order they were produced in
    assert {tp: om.offset for tp, om in committed.items() if om is not None} == ends
    assert most > PARTITIONS  # concurrency inside partitions, not one task per partition
    report({"test": "processing", "group_protocol": group_protocol.name, "records": RECORDS, "keys": KEYS,
            "concurrency": 50, "max_running": most, "seconds": round(elapsed, 2), "handler_ms": 3})


async def test_a_restart_skips_the_records_finished_above_the_watermark(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    produce(broker, unique_topic, [(f"k{i}", str(i)) for i in range(100)], enable_idempotence=True)
    tp = TopicPartition(unique_topic, 0)
    first: set[int] = set()

    async def stuck_at_ten(record: Any) -> None:
        if record.offset == 10:
            await asyncio.sleep(3600)  # never finishes: the drain cancels it
        first.add(record.offset)

    async with consumer_of(broker, unique_group, unique_topic) as consumer:
        processor = Processor(consumer, stuck_at_ten, concurrency=20, drain_timeout=0.2)
        task = asyncio.create_task(processor.run())
        await until(lambda: len(first) == 99 or task.done(), 60.0, "all but offset 10 handled")
        processor.stop()
        await asyncio.wait_for(task, 30.0)
        committed = (await consumer.committed([tp]))[tp]
    assert committed is not None
    assert committed.offset == 10
    assert decode(committed.metadata, 10).ranges == [(11, 100)]  # as written, from the broker
    second: list[int] = []

    async def handler(record: Any) -> None:
        second.append(record.offset)

    async with consumer_of(broker, unique_group, unique_topic) as consumer:
        processor = Processor(consumer, handler, concurrency=20)
        task = asyncio.create_task(processor.run())
        await until(lambda: processor.metrics()["skipped"] == 89 or task.done(), 60.0, "the finished ones skipped")
        await until(lambda: 10 in second or task.done(), 60.0, "offset 10 handled again")
        processor.stop()
        result = await asyncio.wait_for(task, 30.0)
        committed = (await consumer.committed([tp]))[tp]
    assert second == [10]
    assert result.skipped == 89
    assert result.processed == 1
    assert committed is not None
    assert committed.offset == 100
    assert committed.metadata == ""
