"""process() at its edges against a real broker and the real Consumer (issue 39): a handler's own
CancelledError, a cancelled process() then the application's own commit and close(), close() from
another task (shorter than drain_timeout, too), and a broker that drops commit metadata."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from aiokafka_lite import Consumer, OffsetAndMetadata, TopicPartition
from aiokafka_lite.processing import Processor
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import until

pytestmark = pytest.mark.asyncio


def consumer_of(broker: Any, group: str, topic: str) -> Consumer:
    return Consumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group, enable_auto_commit=False,
                    auto_offset_reset="earliest", auto_commit_interval_ms=200, session_timeout_ms=10000,
                    heartbeat_interval_ms=500)


def one_partition_topic(broker: Any, topic: str, records: int, keys: int) -> TopicPartition:
    create_topic(broker, topic, partitions=1)
    produce(broker, topic, [(f"k{i % keys}", str(i)) for i in range(records)])
    return TopicPartition(topic, 0)


async def committed_offset(consumer: Consumer, tp: TopicPartition) -> int | None:
    om = (await consumer.committed([tp]))[tp]
    return None if om is None else om.offset


async def test_a_handlers_own_cancelled_error_is_retried_not_a_stalled_key(
        kafka_broker: Any, unique_topic: str, unique_group: str, caplog: pytest.LogCaptureFixture) -> None:
    tp = one_partition_topic(kafka_broker, unique_topic, 20, keys=1)
    attempts: dict[int, int] = {}

    async def handler(record: Any) -> None:
        attempts[record.offset] = attempts.get(record.offset, 0) + 1
        if record.offset == 3 and attempts[3] == 1:
            cancelled: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            cancelled.cancel()  # as a call another task cancelled
            await cancelled

    async with consumer_of(kafka_broker, unique_group, unique_topic) as consumer:
        processor = Processor(consumer, handler, concurrency=8, retry_backoff=0.01)
        task = asyncio.create_task(processor.run())
        await until(lambda: processor.metrics()["processed"] >= 20 or task.done(), 30.0, "every record handled")
        processor.stop()
        result = await asyncio.wait_for(task, 15.0)
        assert await committed_offset(consumer, tp) == 20
    assert (result.processed, result.retries, result.failed) == (20, 1, 0)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_cancelled_process_commits_nothing_more_and_close_moves_no_offset_back(
        kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    tp = one_partition_topic(kafka_broker, unique_topic, 100, keys=100)
    gate = asyncio.Event()

    async def handler(record: Any) -> None:
        if record.offset >= 20:
            await gate.wait()

    consumer = consumer_of(kafka_broker, unique_group, unique_topic)
    try:
        # No commit by process() before the cancel: a revocation afterwards would have one to make.
        processor = Processor(consumer, handler, concurrency=100, commit_interval=3600)
        task = asyncio.create_task(processor.run())
        await until(lambda: processor.metrics()["processed"] >= 20, 30.0, "20 records handled")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await consumer.commit({tp: OffsetAndMetadata(100)})  # the application's own, further on
        await consumer.poll(0.5)  # a rebalance or a poll would run process()'s listener, if it were left
    finally:
        await consumer.close()  # its revocation must not commit process()'s old watermark (20)
    async with consumer_of(kafka_broker, unique_group, unique_topic) as reader:
        assert await committed_offset(reader, tp) == 100


async def test_close_from_another_task_returns_with_what_its_revocation_committed(
        kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    tp = one_partition_topic(kafka_broker, unique_topic, 60, keys=60)
    gate = asyncio.Event()

    async def handler(record: Any) -> None:
        if record.offset >= 40:
            await gate.wait()

    consumer = consumer_of(kafka_broker, unique_group, unique_topic)
    await consumer.start()
    processor = Processor(consumer, handler, concurrency=100, commit_interval=3600, drain_timeout=0.5)
    task = asyncio.create_task(processor.run())
    await until(lambda: processor.metrics()["processed"] >= 40, 30.0, "40 records handled")
    closing = asyncio.create_task(consumer.close())
    result = await asyncio.wait_for(task, 30.0)
    assert closing.done()
    assert result.reason == "closed"
    assert result.committed == {tp: 40}
    async with consumer_of(kafka_broker, unique_group, unique_topic) as reader:
        assert await committed_offset(reader, tp) == 40


async def test_a_close_shorter_than_drain_timeout_leaves_no_handler_running(
        kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    one_partition_topic(kafka_broker, unique_topic, 10, keys=10)
    running = 0

    async def handler(record: Any) -> None:
        nonlocal running
        running += 1
        try:
            await asyncio.sleep(60)
        finally:
            running -= 1

    consumer = consumer_of(kafka_broker, unique_group, unique_topic)
    await consumer.start()
    processor = Processor(consumer, handler, concurrency=10, drain_timeout=30.0)
    task = asyncio.create_task(processor.run())
    await until(lambda: running == 10, 30.0, "10 handlers running")
    started = time.monotonic()
    await consumer.close(timeout=0.5)
    took = time.monotonic() - started
    left = running
    result = await asyncio.wait_for(task, 10.0)
    assert left == 0  # close() cut its revocation's drain short: it cancelled the handlers first
    assert took < 5.0
    assert result.reason == "closed"


async def test_a_broker_that_drops_commit_metadata_is_said_once(
        tansu_broker: Any, unique_topic: str, unique_group: str, caplog: pytest.LogCaptureFixture) -> None:
    """Tansu answers committed() with metadata '' (DEVIATIONS["commit_metadata"]): process() says so."""
    one_partition_topic(tansu_broker, unique_topic, 30, keys=30)
    gate = asyncio.Event()

    async def handler(record: Any) -> None:
        if record.offset == 0:
            await gate.wait()  # holds the watermark: the others ride in the metadata

    async with consumer_of(tansu_broker, unique_group, unique_topic) as consumer:
        processor = Processor(consumer, handler, concurrency=30, commit_interval=0.1)
        task = asyncio.create_task(processor.run())
        await until(lambda: processor.metrics()["metadata_dropped"], 30.0, "the dropped metadata noticed")
        gate.set()
        await asyncio.sleep(0.5)  # more commits with metadata: said once all the same
        processor.stop()
        await asyncio.wait_for(task, 15.0)
    said = [r.getMessage() for r in caplog.records if "did not keep the commit metadata" in r.getMessage()]
    assert len(said) == 1
