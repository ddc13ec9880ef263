"""Kafka's PlaintextConsumerCommitTest (clients-integration-tests), classic group protocol."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, OffsetAndMetadata, TopicPartition
from aiokafka_lite.errors import IllegalStateError
from aiokafka_lite.testing.helpers import create_topic

from ._kit import await_assignment, consume_and_verify, poll_until_true, send_records, settings

pytestmark = pytest.mark.asyncio


class CommitCounter:
    """Kafka's CountConsumerCommitCallback, as a commit_async callback."""

    def __init__(self) -> None:
        self.success_count = 0
        self.exception_count = 0
        self.last_error: BaseException | None = None

    def __call__(self, offsets, exc) -> None:
        if exc is None:
            self.success_count += 1
        else:
            self.exception_count += 1
            self.last_error = exc


async def send_and_await_async_commit(consumer, offsets=None):
    """Kafka's sendAndAwaitAsyncCommit: commit_async, poll until it completes, no error."""
    fut = consumer.commit_async(offsets)
    await poll_until_true(consumer, fut.done, timeout=15)
    assert fut.exception() is None


class PausingListener(ConsumerRebalanceListener):
    """Keeps assigned partitions paused, so commits reflect the seeks alone."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    def on_partitions_assigned(self, assigned):
        self.consumer.pause(*assigned)

    def on_partitions_revoked(self, revoked):
        pass


async def test_auto_commit_on_close(broker, topic, tp, tp2, unique_group, group_protocol):
    """PlaintextConsumerCommitTest.testClassicConsumerAutoCommitOnClose."""
    send_records(broker, tp, 1000)
    async with Consumer(**settings(broker, unique_group, group_protocol, enable_auto_commit=True)) as consumer:
        consumer.subscribe([topic])
        await await_assignment(consumer, {tp, tp2})
        consumer.seek(tp, 300)  # close() must commit the sought positions
        consumer.seek(tp2, 500)
    async with Consumer(**settings(broker, unique_group, group_protocol, enable_auto_commit=True)) as another:
        assert (await another.committed([tp]))[tp].offset == 300
        assert (await another.committed([tp2]))[tp2].offset == 500


async def test_auto_commit_on_close_after_wakeup(broker, topic, tp, tp2, unique_group, group_protocol):
    """PlaintextConsumerCommitTest.testClassicConsumerAutoCommitOnCloseAfterWakeup (wakeup() is a cancelled poll)."""
    send_records(broker, tp, 1000)
    async with Consumer(**settings(broker, unique_group, group_protocol, enable_auto_commit=True)) as consumer:
        consumer.subscribe([topic])
        await await_assignment(consumer, {tp, tp2})
        consumer.seek(tp, 300)
        consumer.seek(tp2, 500)
        consumer.pause(tp, tp2)  # the interrupted poll must not move the positions
        # Java's wakeup() breaks a poll loop from another thread; ours is cancelling the polling task.
        polling = asyncio.create_task(consumer.poll(timeout=10))
        await asyncio.sleep(0.2)
        polling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await polling
    async with Consumer(**settings(broker, unique_group, group_protocol, enable_auto_commit=True)) as another:
        assert (await another.committed([tp]))[tp].offset == 300
        assert (await another.committed([tp2]))[tp2].offset == 500


async def test_commit_metadata(broker, tp, unique_group, group_protocol):
    """PlaintextConsumerCommitTest.testClassicConsumerCommitMetadata."""
    async with Consumer(**settings(broker, unique_group, group_protocol, enable_auto_commit=True)) as consumer:
        consumer.assign([tp])
        sync_metadata = OffsetAndMetadata(5, "foo", 15)
        await consumer.commit({tp: sync_metadata})
        assert (await consumer.committed([tp]))[tp] == sync_metadata
        async_metadata = OffsetAndMetadata(10, "bar")
        await send_and_await_async_commit(consumer, {tp: async_metadata})
        assert (await consumer.committed([tp]))[tp] == async_metadata
        no_metadata = OffsetAndMetadata(5)  # Java's null metadata reads back as ""
        await consumer.commit({tp: no_metadata})
        assert (await consumer.committed([tp]))[tp] == no_metadata


async def test_async_commit(broker, tp, unique_group, group_protocol):
    """PlaintextConsumerCommitTest.testClassicConsumerAsyncCommit."""
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.assign([tp])
        counter = CommitCounter()
        for i in range(1, 6):
            consumer.commit_async({tp: OffsetAndMetadata(i)}, callback=counter)
        await poll_until_true(consumer, lambda: counter.success_count >= 5 or counter.last_error is not None)
        assert counter.last_error is None
        assert counter.success_count == 5
        assert (await consumer.committed([tp]))[tp] == OffsetAndMetadata(5)


async def test_commit_specified_offsets(broker, tp, tp2, unique_group, group_protocol):
    """PlaintextConsumerCommitTest.testClassicConsumerCommitSpecifiedOffsets."""
    send_records(broker, tp, 5)
    send_records(broker, tp2, 7)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.assign([tp, tp2])
        pos1, pos2 = await consumer.position(tp), await consumer.position(tp2)
        await consumer.commit({tp: OffsetAndMetadata(3)})
        assert (await consumer.committed([tp]))[tp].offset == 3
        assert (await consumer.committed([tp2]))[tp2] is None
        assert (await consumer.position(tp), await consumer.position(tp2)) == (pos1, pos2)  # unchanged
        await consumer.commit({tp2: OffsetAndMetadata(5)})
        assert (await consumer.committed([tp]))[tp].offset == 3
        assert (await consumer.committed([tp2]))[tp2].offset == 5
        await send_and_await_async_commit(consumer, {tp2: OffsetAndMetadata(7)})
        assert (await consumer.committed([tp2]))[tp2].offset == 7


async def test_auto_commit_on_rebalance(broker, topic, tp, tp2, unique_group, unique_topic, group_protocol):
    """PlaintextConsumerCommitTest.testClassicConsumerAutoCommitOnRebalance."""
    topic2 = f"{unique_topic}-2"
    create_topic(broker, topic2, partitions=2)
    send_records(broker, tp, 1000)
    async with Consumer(**settings(broker, unique_group, group_protocol, enable_auto_commit=True)) as consumer:
        listener = PausingListener(consumer)
        consumer.subscribe([topic], listener=listener)
        await await_assignment(consumer, {tp, tp2})
        consumer.seek(tp, 300)
        consumer.seek(tp2, 500)
        consumer.subscribe([topic, topic2], listener=listener)  # the rebalance commits first
        await await_assignment(consumer, {tp, tp2, TopicPartition(topic2, 0), TopicPartition(topic2, 1)})
        assert (await consumer.committed([tp]))[tp].offset == 300
        assert (await consumer.committed([tp2]))[tp2].offset == 500


async def test_subscribe_and_commit_sync(broker, topic, tp, tp2, unique_group, group_protocol):
    """PlaintextConsumerCommitTest.testClassicConsumerSubscribeAndCommitSync."""
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        assert consumer.assignment() == set()
        consumer.subscribe([topic])
        await await_assignment(consumer, {tp, tp2})
        consumer.seek(tp, 0)
        await consumer.commit()  # carries the member id and generation from the join
        assert (await consumer.committed([tp]))[tp].offset == 0


async def test_position_and_commit(broker, topic, tp, unique_group, group_protocol):
    """PlaintextConsumerCommitTest.testClassicConsumerPositionAndCommit."""
    send_records(broker, tp, 5, start_ts=1000)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer, \
            Consumer(**settings(broker, unique_group, group_protocol)) as other:
        unknown = TopicPartition(topic, 15)
        assert (await consumer.committed([unknown]))[unknown] is None
        with pytest.raises(IllegalStateError):
            await consumer.position(unknown)  # not assigned
        consumer.assign([tp])
        assert await consumer.position(tp) == 0  # position() resets the offset
        await consumer.commit()
        assert (await consumer.committed([tp]))[tp].offset == 0
        await consume_and_verify(consumer, tp, 5, 0, start_ts=1000)
        assert await consumer.position(tp) == 5
        await consumer.commit()
        assert (await consumer.committed([tp]))[tp].offset == 5
        send_records(broker, tp, 1, start_ts=2000, first=5)
        other.assign([tp])  # another member of the group starts from the committed offset
        await consume_and_verify(other, tp, 1, 5, start_index=5, start_ts=2000)


async def test_commit_async_completed_before_consumer_closes(broker, tp, tp2, unique_group, group_protocol):
    """PlaintextConsumerCommitTest.testCommitAsyncCompletedBeforeConsumerCloses (a client contract; Java
    checks it on the consumer protocol only)."""
    send_records(broker, tp, 3)
    send_records(broker, tp2, 3)
    counter = CommitCounter()
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.assign([tp, tp2])
        consumer.commit_async({tp: OffsetAndMetadata(1)}, callback=counter)
        consumer.commit_async({tp2: OffsetAndMetadata(1)}, callback=counter)
    await asyncio.sleep(0)  # done-callbacks run one loop step after the futures resolve
    assert (counter.success_count, counter.last_error) == (2, None)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as checker:
        assert await checker.committed([tp, tp2]) == {tp: OffsetAndMetadata(1), tp2: OffsetAndMetadata(1)}


async def test_commit_async_completed_before_commit_sync_returns(broker, tp, tp2, unique_group, group_protocol):
    """PlaintextConsumerCommitTest.testCommitAsyncCompletedBeforeCommitSyncReturns (a client contract; Java
    checks it on the consumer protocol only)."""
    send_records(broker, tp, 3)
    send_records(broker, tp2, 3)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.assign([tp, tp2])
        counter = CommitCounter()
        consumer.commit_async({tp: OffsetAndMetadata(1)}, callback=counter)
        await consumer.commit({})
        assert (await consumer.committed([tp]))[tp].offset == 1
        assert counter.success_count == 1
        consumer.commit_async({tp: OffsetAndMetadata(2)}, callback=counter)
        await consumer.commit({tp2: OffsetAndMetadata(2)})
        assert (await consumer.committed([tp]))[tp].offset == 2
        assert (await consumer.committed([tp2]))[tp2].offset == 2
        assert counter.success_count == 2
        consumer.commit_async({tp: OffsetAndMetadata(3)}, callback=counter)
        await consumer.commit({})
        assert (await consumer.committed([tp]))[tp].offset == 3
        assert (await consumer.committed([tp2]))[tp2].offset == 2
        assert counter.success_count == 3
