"""Kafka's PlaintextConsumerFetchTest (clients-integration-tests): offsets out of range and
fetch size limits, under both group protocols, as Kafka's testClassicConsumer*/testAsyncConsumer* pairs."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.errors import NoOffsetForPartitionError, OffsetOutOfRangeError
from aiokafka_lite.testing.helpers import create_topic, produce

from ._kit import (
    await_assignment,
    consume_and_verify,
    consume_records,
    poll_until,
    poll_until_raises,
    send_records,
    settings,
)

pytestmark = pytest.mark.asyncio


async def test_fetch_invalid_offset(broker, tp, unique_group, group_protocol):
    """PlaintextConsumerFetchTest.testFetchInvalidOffset."""
    send_records(broker, tp, 2)
    async with Consumer(**settings(broker, unique_group, group_protocol, auto_offset_reset="none")) as consumer:
        consumer.assign([tp])
        await poll_until_raises(consumer, NoOffsetForPartitionError, poll_timeout=0.5)
        consumer.seek(tp, 3)
        error = await poll_until_raises(consumer, OffsetOutOfRangeError, poll_timeout=0.5)
        assert f"fetch offset 3 is out of range for {tp.topic}-{tp.partition}" in str(error)


async def test_fetch_out_of_range_offset_reset_config_earliest(broker, tp, group_protocol):
    """PlaintextConsumerFetchTest.testFetchOutOfRangeOffsetResetConfigEarliest."""
    send_records(broker, tp, 10, start_ts=1000)
    conf = settings(broker, None, group_protocol, auto_offset_reset="earliest", fetch_max_wait_ms=0)
    async with Consumer(**conf) as consumer:
        consumer.assign([tp])
        await consume_and_verify(consumer, tp, 10, 0, start_ts=1000)
        consumer.seek(tp, 11)  # out of range: reset to the earliest offset
        await consume_and_verify(consumer, tp, 1, 0, start_ts=1000)


async def test_fetch_out_of_range_offset_reset_config_latest(broker, tp, group_protocol):
    """PlaintextConsumerFetchTest.testClassicConsumerFetchOutOfRangeOffsetResetConfigLatest (the record after
    the reset is awaited over several polls, not one 50 ms poll)."""
    send_records(broker, tp, 10)
    conf = settings(broker, None, group_protocol, auto_offset_reset="latest", fetch_max_wait_ms=0)
    async with Consumer(**conf) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        await consume_and_verify(consumer, tp, 5, 0, start_ts=1000)
        consumer.seek(tp, 10 + 17)  # out of range: reset to the latest offset
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while await consumer.position(tp) != 10:
            assert loop.time() < deadline, "the position was not reset to the end (10)"
            assert len(await consumer.poll(timeout=0.1)) == 0
        send_records(broker, tp, 10, first=10)
        records = await poll_until(consumer, lambda got: len(got) >= 1, timeout=10)
        assert records[0].offset == 10


async def check_large_record(broker, tp, protocol, size, **limits):
    produce(broker, tp.topic, [{"key": "key", "value": bytes(size), "partition": tp.partition}],
            message_max_bytes=2 * size)
    async with Consumer(**settings(broker, None, protocol, **limits)) as consumer:
        consumer.assign([tp])
        records = await consumer.poll(timeout=20)
        assert len(records) == 1
        record = records[0]
        assert (record.topic, record.partition, record.offset) == (tp.topic, tp.partition, 0)
        assert (record.key, record.value) == (b"key", bytes(size))


async def check_fetch_honours_size_if_large_record_not_first(broker, tp, protocol, size, **limits):
    produce(broker, tp.topic, [{"key": "small", "value": "value", "partition": tp.partition}])
    produce(broker, tp.topic, [{"key": "large", "value": bytes(size), "partition": tp.partition}],
            message_max_bytes=2 * size)
    async with Consumer(**settings(broker, None, protocol, **limits)) as consumer:
        consumer.assign([tp])
        records = await consumer.poll(timeout=20)
        assert len(records) == 1  # the large record is only returned when it comes first
        record = records[0]
        assert (record.topic, record.partition, record.offset) == (tp.topic, tp.partition, 0)
        assert (record.key, record.value) == (b"small", b"value")


async def test_fetch_record_larger_than_fetch_max_bytes(broker, tp, group_protocol):
    """PlaintextConsumerFetchTest.testFetchRecordLargerThanFetchMaxBytes."""
    await check_large_record(broker, tp, group_protocol, 10 * 1024 + 1, fetch_max_bytes=10 * 1024)


async def test_fetch_honours_fetch_size_if_large_record_not_first(broker, tp, group_protocol):
    """PlaintextConsumerFetchTest.testFetchHonoursFetchSizeIfLargeRecordNotFirst."""
    await check_fetch_honours_size_if_large_record_not_first(broker, tp, group_protocol, 10 * 1024,
                                                             fetch_max_bytes=10 * 1024)


async def test_fetch_honours_max_partition_fetch_bytes_if_large_record_not_first(broker, tp, group_protocol):
    """PlaintextConsumerFetchTest.testFetchHonoursMaxPartitionFetchBytesIfLargeRecordNotFirst."""
    await check_fetch_honours_size_if_large_record_not_first(broker, tp, group_protocol, 10 * 1024,
                                                             max_partition_fetch_bytes=10 * 1024)


async def test_fetch_record_larger_than_max_partition_fetch_bytes(broker, tp, group_protocol):
    """PlaintextConsumerFetchTest.testFetchRecordLargerThanMaxPartitionFetchBytes."""
    await check_large_record(broker, tp, group_protocol, 10 * 1024 + 1, max_partition_fetch_bytes=10 * 1024)


async def test_low_max_fetch_size_for_request_and_partition(broker, unique_topic, unique_group, group_protocol):
    """PlaintextConsumerFetchTest.testLowMaxFetchSizeForRequestAndPartition (3 topics x 10 partitions x 10
    records, not 30 x 30)."""
    topics = [f"{unique_topic}-{i}" for i in (1, 2, 3)]
    for topic in topics:
        create_topic(broker, topic, partitions=10)
    partitions = {TopicPartition(t, p) for t in topics for p in range(10)}
    conf = settings(broker, unique_group, group_protocol, fetch_max_bytes=500, max_partition_fetch_bytes=100,
                    max_poll_interval_ms=20000)
    async with Consumer(**conf) as consumer:
        assert consumer.assignment() == set()
        consumer.subscribe(topics)
        await await_assignment(consumer, partitions)
        sent = [(tp.topic, tp.partition, f"key {i}", f"value {i}", 1000 + i) for tp in sorted(partitions)
                for i in range(10)]
        for topic in topics:
            produce(broker, topic, [{"key": k, "value": v, "partition": p, "timestamp": ts}
                                    for t, p, k, v, ts in sent if t == topic])
        records = await consume_records(consumer, len(sent), timeout=60)
        got = {(r.topic, r.partition, r.key.decode(), r.value.decode(), r.timestamp) for r in records}
        assert got == set(sent)
        assert len(records) == len(sent)
