"""auto_offset_reset="by_duration:<ISO-8601 duration>" (KIP-1106) on Apache Kafka 4.3.1: a member
without a committed offset starts at the first record at most that old, found with ListOffsets by
time; with every record older, at the end (as Java)."""

from __future__ import annotations

import time

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import poll_until

pytestmark = pytest.mark.asyncio

HOUR_MS = 3_600_000


def _records(now_ms: int) -> list[dict[str, object]]:
    """Ten records two hours old, ten half an hour old, ten a few seconds old, on partition 0."""
    ages = [2 * HOUR_MS] * 10 + [HOUR_MS // 2] * 10 + [5_000] * 10
    return [{"value": f"v{i}", "partition": 0, "timestamp": now_ms - age} for i, age in enumerate(ages)]


async def test_a_group_member_starts_at_the_first_record_within_the_duration(apache_kafka_broker, unique_topic,
                                                                             unique_group):
    create_topic(apache_kafka_broker, unique_topic, partitions=1)
    produce(apache_kafka_broker, unique_topic, _records(int(time.time() * 1000)))
    settings = dict(bootstrap_servers=apache_kafka_broker.bootstrap_servers, enable_auto_commit=False)
    async with Consumer(unique_topic, group_id=unique_group, auto_offset_reset="by_duration:PT1H",
                        **settings) as consumer:
        got = await poll_until(consumer, lambda seen: len(seen) >= 20, timeout=30)
    assert [r.offset for r in got] == list(range(10, 30))  # not the two-hour-old ones

    tp = TopicPartition(unique_topic, 0)
    async with Consumer(auto_offset_reset="by_duration:P1DT1M", **settings) as consumer:  # older than all
        consumer.assign([tp])
        assert await consumer.position(tp) == 0
    async with Consumer(auto_offset_reset="by_duration:pt1s", **settings) as consumer:  # newer than all
        consumer.assign([tp])
        assert await consumer.position(tp) == 30
        assert not await consumer.poll(timeout=0.5)

