"""Kafka's PlaintextConsumerAssignTest (clients-integration-tests): manual assign() with and
without a group_id (record counts scaled down from 10000 to 1000), under both group protocols, as
Kafka's testClassic*/testAsync* pairs."""

from __future__ import annotations

import pytest

from aiokafka_lite import Consumer, OffsetAndMetadata

from ._kit import consume_and_verify, poll_until_true, send_records, settings

pytestmark = pytest.mark.asyncio


async def test_assign_and_commit_async_not_committed(broker, tp, unique_group, group_protocol):
    """PlaintextConsumerAssignTest.testAssignAndCommitAsyncNotCommitted."""
    send_records(broker, tp, 1000, start_ts=1000)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.assign([tp])
        outcomes = []
        consumer.commit_async(callback=lambda offsets, exc: outcomes.append(exc))
        await poll_until_true(consumer, lambda: bool(outcomes), timeout=10)
        assert outcomes == [None]
        assert await consumer.committed([tp]) == {tp: None}  # nothing was consumed, nothing committed
        assert tp in consumer.assignment()


async def test_assign_and_commit_sync_not_committed(broker, tp, unique_group, group_protocol):
    """PlaintextConsumerAssignTest.testAssignAndCommitSyncNotCommitted."""
    send_records(broker, tp, 1000, start_ts=1000)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.assign([tp])
        await consumer.commit()
        assert await consumer.committed([tp]) == {tp: None}
        assert tp in consumer.assignment()


async def test_assign_and_commit_sync_all_consumed(broker, tp, unique_group, group_protocol):
    """PlaintextConsumerAssignTest.testAssignAndCommitSyncAllConsumed."""
    send_records(broker, tp, 1000, start_ts=1000)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        await consume_and_verify(consumer, tp, 1000, 0, start_ts=1000)
        await consumer.commit()
        assert (await consumer.committed([tp]))[tp].offset == 1000


async def test_assign_and_consume(broker, tp, group_protocol):
    """PlaintextConsumerAssignTest.testAssignAndConsume (no group_id)."""
    send_records(broker, tp, 10, start_ts=1000)
    async with Consumer(**settings(broker, None, group_protocol)) as consumer:
        consumer.assign([tp])
        await consume_and_verify(consumer, tp, 10, 0, start_ts=1000)
        assert await consumer.position(tp) == 10


async def test_assign_and_consume_skipping_position(broker, tp, group_protocol):
    """PlaintextConsumerAssignTest.testAssignAndConsumeSkippingPosition (no group_id)."""
    send_records(broker, tp, 10, start_ts=1000)
    async with Consumer(**settings(broker, None, group_protocol)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1)
        await consume_and_verify(consumer, tp, 9, 1, start_index=1, start_ts=1000)
        assert await consumer.position(tp) == 10


async def test_assign_and_fetch_committed_offsets(broker, tp, unique_group, group_protocol):
    """PlaintextConsumerAssignTest.testAssignAndFetchCommittedOffsets."""
    send_records(broker, tp, 100, start_ts=1000)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        await consume_and_verify(consumer, tp, 100, 0, start_ts=1000)
        await consumer.commit()
        assert (await consumer.committed([tp]))[tp].offset == 100
        async with Consumer(**settings(broker, unique_group, group_protocol)) as another:
            another.assign([tp])
            assert (await another.committed([tp]))[tp].offset == 100


async def test_assign_and_consume_from_committed_offsets(broker, tp, unique_group, group_protocol):
    """PlaintextConsumerAssignTest.testAssignAndConsumeFromCommittedOffsets."""
    send_records(broker, tp, 100, start_ts=1000)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.assign([tp])
        await consumer.commit({tp: OffsetAndMetadata(10)})
        assert (await consumer.committed([tp]))[tp].offset == 10
    async with Consumer(**settings(broker, unique_group, group_protocol)) as another:
        assert (await another.committed([tp]))[tp].offset == 10
        another.assign([tp])  # starts from the group's committed offset
        await consume_and_verify(another, tp, 90, 10, start_index=10, start_ts=1000)


async def test_assign_and_retrieving_committed_offsets_multiple_times(broker, tp, unique_group, group_protocol):
    """PlaintextConsumerAssignTest.testAssignAndRetrievingCommittedOffsetsMultipleTimes."""
    send_records(broker, tp, 100, start_ts=1000)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        await consume_and_verify(consumer, tp, 100, 0, start_ts=1000)
        await consumer.commit()
        assert (await consumer.committed([tp]))[tp].offset == 100
        assert (await consumer.committed([tp]))[tp].offset == 100
