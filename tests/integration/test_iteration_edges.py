"""`async for` and poll() on one consumer (found by the property test, tests/integration/
test_api_properties.py): records that `async for` fetched but did not hand out before the loop
stopped are the next poll()'s, not skipped; a seek drops them."""

from __future__ import annotations

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce

pytestmark = pytest.mark.asyncio

RECORDS = 300


async def _reader(broker, topic: str) -> tuple[Consumer, TopicPartition]:
    create_topic(broker, topic, partitions=1)
    produce(broker, topic, [{"value": f"v{i}"} for i in range(RECORDS)])
    tp = TopicPartition(topic, 0)
    consumer = Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                        max_poll_records=200)
    consumer.assign([tp])
    return consumer, tp


async def _iterate(consumer: Consumer, count: int) -> list[int]:
    offsets = []
    async for record in consumer:
        offsets.append(record.offset)
        if len(offsets) == count:
            break
    return offsets


async def _poll_offsets(consumer: Consumer, until: int) -> list[int]:
    offsets: list[int] = []
    for _ in range(50):
        offsets += [r.offset for r in await consumer.poll(timeout=1.0)]
        if offsets and offsets[-1] >= until:
            break
    return offsets


async def test_poll_after_an_async_for_that_stopped_early_skips_nothing(tansu_broker, unique_topic):
    consumer, _ = await _reader(tansu_broker, unique_topic)
    async with consumer:
        assert await _iterate(consumer, 150) == list(range(150))
        assert await _poll_offsets(consumer, RECORDS - 1) == list(range(150, RECORDS))


async def test_a_seek_drops_what_async_for_had_fetched(tansu_broker, unique_topic):
    consumer, tp = await _reader(tansu_broker, unique_topic)
    async with consumer:
        assert await _iterate(consumer, 10) == list(range(10))
        consumer.seek(tp, 250)
        assert await _poll_offsets(consumer, RECORDS - 1) == list(range(250, RECORDS))
