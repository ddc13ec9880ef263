"""Kafka's PlaintextConsumerPollTest (clients-integration-tests), under both group protocols: Kafka
runs each scenario as a testClassicConsumer* and a testAsyncConsumer* variant."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite import Consumer, OffsetAndMetadata, TopicPartition
from aiokafka_lite.errors import NoOffsetForPartitionError
from aiokafka_lite.testing.helpers import create_topic

from ._kit import (
    CountingListener,
    Poller,
    await_rebalance,
    consume_and_verify,
    poll_until_raises,
    poll_until_true,
    send_records,
    settings,
)

pytestmark = pytest.mark.asyncio


async def await_non_empty_records(consumer, tp, poll_timeout=0.1, timeout=30.0):
    """Kafka's awaitNonEmptyRecords: the first poll that returns records of ``tp``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        batch = await consumer.poll(timeout=poll_timeout)
        if batch.records(tp):
            return batch
        await asyncio.sleep(0)
    raise AssertionError(f"no records of {tp} after {timeout} s")


async def ensure_no_rebalance(consumer, listener):
    """Kafka's ensureNoRebalance: a commit_async of the current positions succeeds and nothing is revoked."""
    revoked = listener.calls_to_revoked
    fut = consumer.commit_async()
    await poll_until_true(consumer, fut.done, timeout=10)
    assert fut.exception() is None
    assert listener.calls_to_revoked == revoked


async def test_max_poll_records(broker, tp, group_protocol):
    """PlaintextConsumerPollTest.testClassicConsumerMaxPollRecords (2000 records, not 5000)."""
    send_records(broker, tp, 2000, start_ts=1_000_000)
    async with Consumer(**settings(broker, None, group_protocol, max_poll_records=100)) as consumer:
        consumer.assign([tp])
        await consume_and_verify(consumer, tp, 2000, 0, start_ts=1_000_000, max_poll_records=100)


async def test_max_poll_interval_ms(broker, topic, unique_group, group_protocol):
    """PlaintextConsumerPollTest.testClassicConsumerMaxPollIntervalMs."""
    conf = settings(broker, unique_group, group_protocol, max_poll_interval_ms=1000, heartbeat_interval_ms=500,
                    session_timeout_ms=2000)
    async with Consumer(**conf) as consumer:
        listener = CountingListener()
        consumer.subscribe([topic], listener=listener)
        await await_rebalance(consumer, listener)
        assert (listener.calls_to_assigned, listener.calls_to_revoked) == (1, 0)
        await asyncio.sleep(3.0)  # no poll for longer than max.poll.interval.ms: the member is removed
        await await_rebalance(consumer, listener)
        assert (listener.calls_to_assigned, listener.calls_to_revoked) == (2, 1)


async def test_max_poll_interval_ms_delay_in_revocation(broker, topic, tp, unique_group, unique_topic, group_protocol):
    """PlaintextConsumerPollTest.testClassicConsumerMaxPollIntervalMsDelayInRevocation."""
    other = f"{unique_topic}-other"
    create_topic(broker, other, partitions=1)
    conf = settings(broker, unique_group, group_protocol, max_poll_interval_ms=5000, heartbeat_interval_ms=500,
                    session_timeout_ms=1000)
    async with Consumer(**conf) as consumer:
        outcome = {"committed_position": -1, "commit_completed": False}

        class SlowRevoke(CountingListener):
            async def on_partitions_lost(self, lost):
                pass

            async def on_partitions_revoked(self, revoked):
                if tp in revoked:
                    # Longer than the session timeout: heartbeats must keep the member in the group.
                    await asyncio.sleep(1.5)
                    outcome["committed_position"] = await consumer.position(tp)
                    await consumer.commit({tp: OffsetAndMetadata(outcome["committed_position"])})
                    outcome["commit_completed"] = True
                await super().on_partitions_revoked(revoked)

        listener = SlowRevoke()
        consumer.subscribe([topic], listener=listener)
        await await_rebalance(consumer, listener)
        consumer.subscribe([other], listener=listener)  # a rebalance while in the group
        await await_rebalance(consumer, listener, timeout=15)
        assert outcome == {"committed_position": 0, "commit_completed": True}


async def test_max_poll_interval_ms_delay_in_assignment(broker, topic, unique_group, group_protocol):
    """PlaintextConsumerPollTest.testClassicConsumerMaxPollIntervalMsDelayInAssignment."""
    conf = settings(broker, unique_group, group_protocol, max_poll_interval_ms=5000, heartbeat_interval_ms=500,
                    session_timeout_ms=1000)
    async with Consumer(**conf) as consumer:

        class SlowAssign(CountingListener):
            async def on_partitions_assigned(self, assigned):
                await asyncio.sleep(1.5)  # longer than the session timeout
                await super().on_partitions_assigned(assigned)

        listener = SlowAssign()
        consumer.subscribe([topic], listener=listener)
        await await_rebalance(consumer, listener, timeout=15)
        await ensure_no_rebalance(consumer, listener)


async def test_max_poll_interval_ms_shorter_than_poll_timeout(broker, topic, unique_group, group_protocol):
    """PlaintextConsumerPollTest.testClassicConsumerMaxPollIntervalMsShorterThanPollTimeout."""
    conf = settings(broker, unique_group, group_protocol, max_poll_interval_ms=1000, heartbeat_interval_ms=500)
    async with Consumer(**conf) as consumer:
        listener = CountingListener()
        consumer.subscribe([topic], listener=listener)
        await await_rebalance(consumer, listener)
        assigned = listener.calls_to_assigned
        await consumer.poll(timeout=2.0)  # a poll longer than max.poll.interval.ms is still polling
        await consumer.poll(timeout=0.5)
        await consumer.poll(timeout=0.5)
        assert listener.calls_to_assigned == assigned


async def test_per_partition_lag_with_max_poll_records(broker, tp, unique_group, group_protocol):
    """PlaintextConsumerPollTest.testClassicConsumerPerPartitionLagWithMaxPollRecords (our lag metric)."""
    send_records(broker, tp, 1000)
    async with Consumer(**settings(broker, unique_group, group_protocol, max_poll_records=10)) as consumer:
        consumer.assign([tp])
        batch = await await_non_empty_records(consumer, tp)
        assert len(batch) == 10
        assert consumer.metrics()["lag"][f"{tp.topic}-{tp.partition}"] == 1000 - len(batch)


async def _multi_consumer_session_timeout(broker, topic, unique_topic, unique_group, group_protocol, close_consumer):
    topic1 = f"{unique_topic}-1"
    create_topic(broker, topic1, partitions=6)
    everything = {TopicPartition(topic, p) for p in range(2)} | {TopicPartition(topic1, p) for p in range(6)}
    for tp in everything:
        send_records(broker, tp, 100)
    conf = settings(broker, unique_group, group_protocol, max_poll_interval_ms=2000)
    consumers = [Consumer(topic, topic1, **conf) for _ in range(3)]
    pollers = [Poller(c) for c in consumers]

    def valid(members):
        owned = [c.assignment() for c in members]
        return all(owned) and sum(map(len, owned)) == len(everything) and set().union(*owned) == everything

    try:
        for consumer, poller in zip(consumers, pollers, strict=True):
            await consumer.start()
            await poller.__aenter__()
        await pollers[0].wait_for(lambda: valid(consumers), timeout=60)
        await pollers[2].__aexit__(None, None, None)  # the third member stops polling
        if close_consumer:
            await consumers[2].close()
        await pollers[0].wait_for(lambda: valid(consumers[:2]), timeout=60)
    finally:
        for poller in pollers[:2]:
            await poller.__aexit__(None, None, None)
        for consumer in consumers:
            await consumer.close()


async def test_multi_consumer_session_timeout_on_close(broker, topic, unique_topic, unique_group, group_protocol):
    """PlaintextConsumerPollTest.runCloseClassicConsumerMultiConsumerSessionTimeoutTest (max.poll 2 s, not 100 ms)."""
    await _multi_consumer_session_timeout(broker, topic, unique_topic, unique_group, group_protocol,
                                          close_consumer=True)


async def test_multi_consumer_session_timeout_on_stop_polling(broker, topic, unique_topic, unique_group,
                                                              group_protocol):
    """PlaintextConsumerPollTest.runClassicConsumerMultiConsumerSessionTimeoutTest (max.poll 2 s, not 100 ms)."""
    await _multi_consumer_session_timeout(broker, topic, unique_topic, unique_group, group_protocol,
                                          close_consumer=False)


async def test_poll_eventually_returns_records_with_zero_timeout(broker, topic, tp, unique_group, group_protocol):
    """PlaintextConsumerPollTest.testClassicConsumerPollEventuallyReturnsRecordsWithZeroTimeout."""
    send_records(broker, tp, 100)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.subscribe([topic])
        batch = await await_non_empty_records(consumer, tp, poll_timeout=0, timeout=15)
        assert len(batch) == 100


async def test_no_offset_for_partition_exception_on_poll_zero(broker, tp, unique_group, group_protocol):
    """PlaintextConsumerPollTest.testClassicConsumerNoOffsetForPartitionExceptionOnPollZero."""
    async with Consumer(**settings(broker, unique_group, group_protocol, auto_offset_reset="none")) as consumer:
        consumer.assign([tp])
        await poll_until_raises(consumer, NoOffsetForPartitionError, poll_timeout=0)


async def test_consumer_recovery_on_poll_after_delayed_rebalance(broker, topic, tp, unique_group, unique_topic,
                                                                 group_protocol):
    """PlaintextConsumerPollTest.testClassicConsumerRecoveryOnPollAfterDelayedRebalance."""
    other = f"{unique_topic}-other"
    create_topic(broker, other, partitions=1)
    tp_other = TopicPartition(other, 0)
    send_records(broker, tp_other, 10)
    send_records(broker, tp, 10)
    exceeded = {"done": False}

    class SlowRevoke(CountingListener):
        async def on_partitions_revoked(self, revoked):
            if tp in revoked:
                await asyncio.sleep(1.0 + 0.5)  # longer than the rebalance timeout (max.poll.interval.ms)
                exceeded["done"] = True
            await super().on_partitions_revoked(revoked)

    listener = SlowRevoke()
    async with Consumer(**settings(broker, unique_group, group_protocol, max_poll_interval_ms=1000)) as consumer:
        consumer.subscribe([topic], listener=listener)
        batch = await await_non_empty_records(consumer, tp, poll_timeout=0, timeout=15)
        assert len(batch) == 10
        consumer.subscribe([other], listener=listener)
        await poll_until_true(consumer, lambda: exceeded["done"], timeout=30)
        batch = await await_non_empty_records(consumer, tp_other, poll_timeout=0)
        assert len(batch) == 10
