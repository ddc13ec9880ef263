"""Kafka's PlaintextConsumerTest (clients-integration-tests): the consumer's API end to end (record
counts scaled down from 10000 to 1000). The scenarios with a group_id run under both group protocols,
as Kafka's testClassicConsumer*/testAsyncConsumer* pairs; those without one have no group member, so
the protocol changes nothing there and they run once. The broker-shutdown scenario starts a broker of
its own and stays classic."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.errors import IllegalStateError, InvalidArgumentError, KafkaError, KafkaTimeoutError
from aiokafka_lite.structs import TimestampType
from aiokafka_lite.testing import ApacheKafkaBroker
from aiokafka_lite.testing.helpers import create_topic, produce

from ._kit import (
    CountingListener,
    await_assignment,
    await_rebalance,
    consume_and_verify,
    consume_records,
    poll_until,
    poll_until_true,
    send_records,
    settings,
)

pytestmark = pytest.mark.asyncio


async def await_non_empty_records(consumer, tp, timeout=30.0):
    """The first poll that returns records of ``tp``."""
    got = await poll_until(consumer, lambda g: any((r.topic, r.partition) == tp for r in g), timeout=timeout)
    return [r for r in got if (r.topic, r.partition) == tp]


def lag_of(consumer, tp):
    return consumer.metrics()["lag"].get(f"{tp.topic}-{tp.partition}")


async def test_simple_consumption(broker, tp, unique_group, group_protocol):
    """PlaintextConsumerTest.testClassicConsumerSimpleConsumption."""
    send_records(broker, tp, 1000)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        assert consumer.assignment() == set()
        consumer.assign([tp])
        assert consumer.assignment() == {tp}
        consumer.seek(tp, 0)
        await consume_and_verify(consumer, tp, 1000, 0, start_ts=1000)
        fut = consumer.commit_async()
        await poll_until_true(consumer, fut.done, timeout=15)
        assert fut.exception() is None


async def test_consumer_close_on_broker_shutdown(unique_topic, unique_group):
    """PlaintextConsumerTest.testClassicConsumerCloseOnBrokerShutdown (a broker of its own, stopped mid-test)."""
    with ApacheKafkaBroker() as own:
        create_topic(own, unique_topic, partitions=2)
        consumer = Consumer(unique_topic, **settings(own, unique_group))
        try:
            await consumer.poll(timeout=0.1)  # finds the coordinator
            own.shutdown()
            await consumer.poll(timeout=0.1)  # looks for the coordinator again
        finally:
            started = time.monotonic()
            await consumer.close()
            assert time.monotonic() - started < 5.0  # no waiting out retries against a dead broker


async def test_headers(broker, tp):
    """PlaintextConsumerTest.testClassicConsumerHeaders."""
    headers = [("headerKey", b"headerValue"), ("headerKey2", b"headerValue2"), ("headerKey3", b"headerValue3")]
    produce(broker, tp.topic, [{"key": "key", "value": "value", "partition": tp.partition, "headers": headers}])
    async with Consumer(**settings(broker)) as consumer:
        assert consumer.assignment() == set()
        consumer.assign([tp])
        assert consumer.assignment() == {tp}
        consumer.seek(tp, 0)
        (record,) = await consume_records(consumer, 1)
        assert [(k, bytes(v)) for k, v in record.headers] == headers  # order preserved


async def test_auto_offset_reset(broker, tp):
    """PlaintextConsumerTest.testClassicConsumerAutoOffsetReset."""
    send_records(broker, tp, 1)
    async with Consumer(**settings(broker)) as consumer:
        consumer.assign([tp])
        await consume_and_verify(consumer, tp, 1, 0, start_ts=1000)


async def test_group_consumption(broker, topic, tp, unique_group, group_protocol):
    """PlaintextConsumerTest.testClassicConsumerGroupConsumption."""
    send_records(broker, tp, 10)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.subscribe([topic])
        await consume_and_verify(consumer, tp, 1, 0, start_ts=1000)


async def test_partitions_for(broker, topic):
    """PlaintextConsumerTest.testClassicConsumerPartitionsFor."""
    async with Consumer(**settings(broker)) as consumer:
        assert await consumer.partitions_for(topic) == [TopicPartition(topic, 0), TopicPartition(topic, 1)]


async def test_partitions_for_auto_create(broker, unique_topic):
    """PlaintextConsumerTest.testClassicConsumerPartitionsForAutoCreate."""
    name = f"{unique_topic}-non-exist"
    async with Consumer(**settings(broker)) as consumer:
        await consumer.partitions_for(name)  # the first call asks the broker to create it
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while not await consumer.partitions_for(name):
            assert loop.time() < deadline, f"{name} was not auto-created"
            await asyncio.sleep(0.2)


async def test_partitions_for_invalid_topic(broker):
    """PlaintextConsumerTest.testClassicConsumerPartitionsForInvalidTopic."""
    async with Consumer(**settings(broker)) as consumer:
        with pytest.raises(KafkaError):
            await consumer.partitions_for(";3# ads,{234")


async def test_seek(broker, tp, tp2):
    """PlaintextConsumerTest.testClassicConsumerSeek."""
    send_records(broker, tp, 50)
    produce(broker, tp2.topic, [{"key": f"key {i}", "value": f"value {i}", "partition": tp2.partition,
                                 "timestamp": 1000 + i} for i in range(50)], compression="gzip")
    async with Consumer(**settings(broker)) as consumer:
        for part in (tp, tp2):  # plain, then compressed batches
            consumer.assign([part])
            await consumer.seek_to_end(part)
            assert await consumer.position(part) == 50
            assert len(await consumer.poll(timeout=0.05)) == 0
            await consumer.seek_to_beginning(part)
            assert await consumer.position(part) == 0
            await consume_and_verify(consumer, part, 1, 0, start_ts=1000)
            consumer.seek(part, 25)
            assert await consumer.position(part) == 25
            await consume_and_verify(consumer, part, 1, 25, start_index=25, start_ts=1000)


async def test_partition_pause_and_resume(broker, tp):
    """PlaintextConsumerTest.testClassicConsumerPartitionPauseAndResume."""
    send_records(broker, tp, 5)
    async with Consumer(**settings(broker)) as consumer:
        consumer.assign([tp])
        await consume_and_verify(consumer, tp, 5, 0, start_ts=1000)
        consumer.pause(tp)
        send_records(broker, tp, 5, start_ts=2000)
        assert len(await consumer.poll(timeout=0.1)) == 0
        consumer.resume(tp)
        await consume_and_verify(consumer, tp, 5, 5, start_ts=2000)


async def test_consume_messages_with_create_time(broker, tp, tp2):
    """PlaintextConsumerTest.testClassicConsumerConsumeMessagesWithCreateTime."""
    send_records(broker, tp, 50, start_ts=int(time.time() * 1000))
    produce(broker, tp2.topic, [{"key": f"key {i}", "value": f"value {i}", "partition": tp2.partition,
                                 "timestamp": 1000 + i} for i in range(50)], compression="gzip")
    async with Consumer(**settings(broker)) as consumer:
        consumer.assign([tp])
        records = await consume_and_verify(consumer, tp, 50, 0)
        assert records[1].timestamp - records[0].timestamp == 1
        consumer.assign([tp2])
        await consume_and_verify(consumer, tp2, 50, 0, start_ts=1000)


async def test_consume_messages_with_log_append_time(broker, unique_topic):
    """PlaintextConsumerTest.testClassicConsumerConsumeMessagesWithLogAppendTime."""
    create_topic(broker, unique_topic, partitions=2, config={"message.timestamp.type": "LogAppendTime"})
    tp1, tp2 = TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)
    start = int(time.time() * 1000)
    send_records(broker, tp1, 50)  # CreateTime 1000 + i, replaced by the broker
    produce(broker, unique_topic, [{"key": f"key {i}", "value": f"value {i}", "partition": 1, "timestamp": 1000 + i}
                                   for i in range(50)], compression="gzip")
    async with Consumer(**settings(broker)) as consumer:
        for part in (tp1, tp2):
            consumer.assign([part])
            await consume_and_verify(consumer, part, 50, 0, start_ts=start - 1000,
                                     timestamp_type=TimestampType.LOG_APPEND_TIME)


async def test_list_topics(broker, unique_topic, unique_group, group_protocol):
    """PlaintextConsumerTest.testClassicConsumerListTopics (on a shared broker: our three topics and the
    internal __consumer_offsets are listed, whatever else exists)."""
    names = [f"{unique_topic}-{i}" for i in (1, 2, 3)]
    for name in names:
        create_topic(broker, name, partitions=2)
    send_records(broker, TopicPartition(names[0], 0), 1)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.subscribe([names[0]])
        await consumer.poll(timeout=0.1)
        topics = await consumer.list_topics()
        for name in names:
            assert len(topics[name]) == 2
        assert "__consumer_offsets" in topics  # Java's listTopics() includes internal topics


async def test_pause_state_not_preserved_by_rebalance(broker, topic, tp, unique_topic, unique_group, group_protocol):
    """PlaintextConsumerTest.testClassicConsumerPauseStateNotPreservedByRebalance (session 1 s, the broker's
    minimum; the check that the pause is gone is explicit)."""
    topic2 = f"{unique_topic}-2"
    create_topic(broker, topic2, partitions=1)
    send_records(broker, tp, 5)
    conf = settings(broker, unique_group, group_protocol, session_timeout_ms=1000, heartbeat_interval_ms=100)
    async with Consumer(**conf) as c:
        c.subscribe([topic])
        await consume_and_verify(c, tp, 5, 0, start_ts=1000)
        c.pause(tp)
        c.subscribe([topic2])  # a rebalance
        await await_assignment(c, {TopicPartition(topic2, 0)})
        assert c.paused() == set()


async def test_per_partition_lag_metrics_clean_up_with_subscribe(broker, topic, tp, tp2, unique_topic,
                                                                 unique_group, group_protocol):
    """PlaintextConsumerTest.testClassicConsumerPerPartitionLagMetricsCleanUpWithSubscribe (our lag metric)."""
    topic2 = f"{unique_topic}-2"
    create_topic(broker, topic2, partitions=2)
    send_records(broker, tp, 1000)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        listener = CountingListener()
        consumer.subscribe([topic, topic2], listener=listener)
        records = await await_non_empty_records(consumer, tp)
        assert listener.calls_to_assigned == 1
        assert lag_of(consumer, tp) is not None
        consumer.subscribe([topic2], listener=listener)
        await poll_until_true(consumer, lambda: lag_of(consumer, tp) is None and lag_of(consumer, tp2) is None)
        assert records


async def test_per_partition_lag_metrics_clean_up_with_assign(broker, tp, tp2, unique_group, group_protocol):
    """PlaintextConsumerTest.testClassicConsumerPerPartitionLagMetricsCleanUpWithAssign (our lag metric)."""
    send_records(broker, tp, 1000)
    send_records(broker, tp2, 1000)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.assign([tp])
        first = await consumer.poll(timeout=0)  # nothing handed out yet: the lag is not known
        assert len(first) == 0
        records = await await_non_empty_records(consumer, tp)
        assert lag_of(consumer, tp) == 1000 - len(records)
        consumer.assign([tp2])
        await await_non_empty_records(consumer, tp2)
        assert lag_of(consumer, tp) is None


async def test_per_partition_lag_metrics_when_read_committed(broker, tp, tp2, unique_group, group_protocol):
    """PlaintextConsumerTest.testClassicConsumerPerPartitionLagMetricsWhenReadCommitted (our lag metric)."""
    send_records(broker, tp, 1000)
    send_records(broker, tp2, 1000)
    async with Consumer(**settings(broker, unique_group, group_protocol, isolation_level="read_committed")) as consumer:
        consumer.assign([tp])
        await await_non_empty_records(consumer, tp)
        assert lag_of(consumer, tp) is not None


async def test_seek_throws_illegal_state_if_partitions_not_assigned(broker, tp):
    """PlaintextConsumerTest.testClassicConsumerSeekThrowsIllegalStateIfPartitionsNotAssigned."""
    async with Consumer(**settings(broker)) as consumer:
        with pytest.raises(IllegalStateError, match=re.escape(f"{tp} is not assigned")):
            await consumer.seek_to_end(tp)


async def test_consuming_with_null_group_id(broker, unique_topic):
    """PlaintextConsumerTest.testClassicConsumingWithNullGroupId (no group: commits and committed() are errors)."""
    create_topic(broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    produce(broker, unique_topic, [("k1", "v1"), ("k2", "v2"), ("k3", "v3")])
    async with Consumer(**settings(broker, auto_offset_reset="earliest")) as c1, \
            Consumer(**settings(broker, auto_offset_reset="latest")) as c2, \
            Consumer(**settings(broker)) as c3:
        for c in (c1, c2, c3):
            c.assign([tp])
        c3.seek(tp, 1)
        n1 = len(await c1.poll(timeout=5))
        with pytest.raises(IllegalStateError):
            await c1.commit()
        with pytest.raises(IllegalStateError):
            await c2.committed([tp])
        n2 = len(await c2.poll(timeout=5))
        n3 = len(await c3.poll(timeout=5))
        for c in (c1, c2, c3):
            c.unsubscribe()
            assert c.assignment() == set()
    assert (n1, n2, n3) == (3, 0, 2)


async def test_null_group_id_not_supported_if_committing(broker, tp):
    """PlaintextConsumerTest.testClassicConsumerNullGroupIdNotSupportedIfCommitting."""
    async with Consumer(**settings(broker)) as consumer:
        consumer.assign([tp])
        with pytest.raises(IllegalStateError, match="group_id"):
            await consumer.commit()


async def test_static_consumer_detects_new_partition_created_after_restart(broker, unique_topic, unique_group,
                                                                          group_protocol):
    """PlaintextConsumerTest.testClassicConsumerStaticConsumerDetectsNewPartitionCreatedAfterRestart."""
    admin = pytest.importorskip("confluent_kafka.admin")
    create_topic(broker, unique_topic, partitions=1)
    foo0, foo1 = TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)
    conf = settings(broker, unique_group, group_protocol, group_instance_id="my-instance-id", metadata_max_age_ms=100)
    async with Consumer(**conf) as consumer1:
        consumer1.subscribe([unique_topic])
        await await_assignment(consumer1, {foo0})
    async with Consumer(**conf) as consumer2:  # the same static member, restarted
        consumer2.subscribe([unique_topic])
        await await_assignment(consumer2, {foo0})
        client = admin.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        futures = client.create_partitions([admin.NewPartitions(unique_topic, 2)])
        await asyncio.to_thread(futures[unique_topic].result, 30)
        await await_assignment(consumer2, {foo0, foo1}, timeout=15)


async def test_end_offsets(broker, topic, tp, tp2, unique_group, group_protocol):
    """PlaintextConsumerTest.testClassicConsumerEndOffsets."""
    send_records(broker, tp, 1000)
    async with Consumer(**settings(broker, unique_group, group_protocol, metadata_max_age_ms=100)) as consumer:
        consumer.subscribe([topic])
        await await_assignment(consumer, {tp, tp2})
        assert await consumer.end_offsets([tp]) == {tp: 1000}


async def test_fetch_offsets_for_time(broker, tp, tp2):
    """PlaintextConsumerTest.testClassicConsumerFetchOffsetsForTime (timestamps 1000 + i, not i: librdkafka
    reads 0 as now)."""
    send_records(broker, tp, 100)
    send_records(broker, tp2, 100)
    async with Consumer(**settings(broker)) as consumer:
        with pytest.raises(InvalidArgumentError):
            await consumer.offsets_for_times({tp: -1})
        found = await consumer.offsets_for_times({tp: 1000, tp2: 1020})
        assert (found[tp].offset, found[tp].timestamp) == (0, 1000)
        assert (found[tp2].offset, found[tp2].timestamp) == (20, 1020)


async def test_position_respects_timeout(broker, topic):
    """PlaintextConsumerTest.testClassicConsumerPositionRespectsTimeout."""
    missing = TopicPartition(topic, 15)
    async with Consumer(**settings(broker)) as consumer:
        consumer.assign([missing])
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            await consumer.position(missing, timeout=3)
        assert time.monotonic() - started < 6


async def _cancelled_promptly(coro, after=1.0, within=2.0):
    """Java's wakeup() from another thread is cancelling the awaiting task here."""
    task = asyncio.create_task(coro)
    await asyncio.sleep(after)
    assert not task.done()
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < within


async def test_position_respects_wakeup(broker, topic):
    """PlaintextConsumerTest.testClassicConsumerPositionRespectsWakeup (wakeup() is cancellation here)."""
    missing = TopicPartition(topic, 15)
    async with Consumer(**settings(broker)) as consumer:
        consumer.assign([missing])
        await _cancelled_promptly(consumer.position(missing, timeout=3))


async def test_position_with_error_connection_respects_wakeup(broker, topic):
    """PlaintextConsumerTest.testClassicConsumerPositionWithErrorConnectionRespectsWakeup (wakeup() is
    cancellation here; nothing listens on the bootstrap port)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    missing = TopicPartition(topic, 15)
    consumer = Consumer(**settings(broker, bootstrap_servers=f"127.0.0.1:{port}"))
    try:
        consumer.assign([missing])
        await _cancelled_promptly(consumer.position(missing, timeout=100))
    finally:
        await consumer.close()


async def test_close_leaves_group_on_interrupt(broker, topic, unique_group, group_protocol):
    """PlaintextConsumerTest.testClassicConsumerCloseLeavesGroupOnInterrupt (the interrupt is cancelling the
    task awaiting close(): the close still revokes and leaves the group)."""
    admin = pytest.importorskip("confluent_kafka.admin")
    consumer = Consumer(**settings(broker, unique_group, group_protocol))
    listener = CountingListener()
    consumer.subscribe([topic], listener=listener)
    await await_rebalance(consumer, listener)
    assert (listener.calls_to_assigned, listener.calls_to_revoked) == (1, 0)
    client = admin.AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def members():
        group = client.describe_consumer_groups([unique_group])[unique_group].result(timeout=10)
        return len(group.members)

    assert await asyncio.to_thread(members) == 1  # the describe sees the member (either protocol)
    closing = asyncio.create_task(consumer.close())
    await asyncio.sleep(0)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 6.0 / 2  # half the session timeout (6 s; 10 s under KIP-848): it left, not expired
    while await asyncio.to_thread(members):
        assert loop.time() < deadline, "the consumer did not leave the group"
        await asyncio.sleep(0.1)
    await consumer.close()
    assert (listener.calls_to_assigned, listener.calls_to_revoked) == (1, 1)


async def test_offset_related_when_timeout_zero(broker, tp):
    """PlaintextConsumerTest.testClassicConsumerOffsetRelatedWhenTimeoutZero (our contract, DESIGN.md: a lapsed
    timeout raises KafkaTimeoutError where Java returns an empty result)."""
    async with Consumer(**settings(broker)) as consumer:
        for call in (consumer.beginning_offsets([tp], timeout=0), consumer.end_offsets([tp], timeout=0),
                     consumer.offsets_for_times({tp: 0}, timeout=0)):
            with pytest.raises(KafkaTimeoutError):
                await call


async def test_stall_between_poll(broker, unique_topic, unique_group, group_protocol):
    """PlaintextConsumerTest.testClassicConsumerStallBetweenPoll (KAFKA-19259)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    create_topic(broker, unique_topic, partitions=6)
    stop = threading.Event()

    def trickle():  # one record every 500 ms, round robin over the partitions
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        i = 0
        while not stop.is_set():
            producer.produce(unique_topic, value=bytes(64), partition=i % 6)
            producer.flush(5)
            i += 1
            stop.wait(0.5)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
            consumer.subscribe([unique_topic])
            await await_non_empty_records(consumer, TopicPartition(unique_topic, 0))
            started = time.monotonic()
            await consumer.poll(timeout=5)
            await consumer.poll(timeout=5)
            stalled = time.monotonic() - started
            assert stalled <= 2.0, f"a stall of {stalled:.1f} s between polls with a record every 0.5 s"
    finally:
        stop.set()
        thread.join(10)
