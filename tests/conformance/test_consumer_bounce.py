"""Kafka's ConsumerBounceTest (clients-integration-tests): consuming, committing and closing while
brokers stop and restart.

Kafka runs these on three brokers; ours is one broker of the module's own (never the session broker),
so a "bounce" stops the whole cluster for a few seconds. Sessions are 30 s so members survive a
restart; rounds are scaled down (2 restarts instead of 10 or 5), as each docstring says."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.errors import KafkaError
from aiokafka_lite.testing import ApacheKafkaBroker
from aiokafka_lite.testing.helpers import create_topic

from ._kit import KEEP_OLD_RECORDS, Poller, await_assignment, poll_until, send_records, settings

pytestmark = pytest.mark.asyncio

BOUNCE_PROPERTIES = {"auto.create.topics.enable": "false"}


@pytest.fixture(scope="module")
def bounce_broker():
    """A broker for this module alone: its tests stop and restart it."""
    with ApacheKafkaBroker("4.3.1", extra_properties=BOUNCE_PROPERTIES) as broker:
        yield broker


def bounce_settings(broker, group, **extra):
    """Kafka's bounce-test consumer: auto-commit on; here with sessions that outlive a restart."""
    conf = settings(broker, group, enable_auto_commit=True, session_timeout_ms=30000, heartbeat_interval_ms=1000,
                    metadata_max_age_ms=100)  # Kafka's consumer tests refresh metadata every 100 ms
    conf.update(extra)
    return conf


async def bounce(broker, rounds):
    """Kafka's BounceBrokerScheduler on one broker: stop, wait 0.5 s, start, wait 0.5 s; ``rounds`` times."""
    for _ in range(rounds):
        await asyncio.to_thread(broker.shutdown)
        await asyncio.sleep(0.5)
        await asyncio.to_thread(broker.start)
        await asyncio.sleep(0.5)


async def test_consumption_with_broker_failures(bounce_broker, unique_topic, unique_group):
    """ConsumerBounceTest.testConsumptionWithBrokerFailures (2 restarts, not 10; 200 records, not 1000; the
    restarts start once the member consumes, and the records are read through once more after
    them). Auto-commit is on, as in Kafka's version: commits land in the order they were made, so a
    background auto-commit of an older position cannot land after commit()."""
    create_topic(bounce_broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    send_records(bounce_broker, tp, 200)
    consumed = 0
    passes_after_restarts = 0
    conf = bounce_settings(bounce_broker, unique_group)
    async with Consumer(unique_topic, **conf) as consumer:
        restarts: asyncio.Task[None] | None = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 90
        try:
            while restarts is None or not restarts.done() or passes_after_restarts == 0:
                assert loop.time() < deadline, f"no full pass after the restarts; at offset {consumed}"
                records = await consumer.poll(timeout=0.1)
                for record in records:
                    assert record.offset == consumed
                    consumed += 1
                if records:
                    if restarts is None:  # the member consumes: start bouncing the broker
                        restarts = asyncio.create_task(bounce(bounce_broker, 2))
                    await consumer.commit()
                    position = await consumer.position(tp)
                    assert (await consumer.committed([tp]))[tp].offset == position
                    if position == 200:
                        passes_after_restarts += restarts.done()
                        await consumer.seek_to_beginning()
                        consumed = 0
        finally:
            if restarts is not None:
                await restarts


async def test_seek_and_commit_with_broker_failures(bounce_broker, unique_topic, unique_group):
    """ConsumerBounceTest.testSeekAndCommitWithBrokerFailures (2 restarts, not 5; 200 records, not 1000)."""
    create_topic(bounce_broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    send_records(bounce_broker, tp, 200)
    chance = random.Random(11)
    async with Consumer(**bounce_settings(bounce_broker, unique_group)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        restarts = asyncio.create_task(bounce(bounce_broker, 2))
        try:
            while not restarts.done():
                coin = chance.randrange(3)
                if coin == 0:
                    await consumer.seek_to_end()
                    assert await consumer.position(tp) == 200
                elif coin == 1:
                    offset = chance.randrange(200)
                    consumer.seek(tp, offset)
                    assert await consumer.position(tp) == offset
                else:
                    await consumer.commit()
                    assert (await consumer.committed([tp]))[tp].offset == await consumer.position(tp)
                await asyncio.sleep(0.05)
        finally:
            await restarts


async def test_subscribe_when_topic_unavailable(bounce_broker, unique_topic, unique_group):
    """ConsumerBounceTest.testSubscribeWhenTopicUnavailable (100 records, not 1000; the second half checks
    the second poller, which Kafka's version meant to)."""
    tp = TopicPartition(unique_topic, 0)
    async with Consumer(**bounce_settings(bounce_broker, unique_group)) as consumer:
        consumer.subscribe([unique_topic])  # the topic does not exist yet, and is not auto-created
        await consumer.poll(timeout=0)
        async with Poller(consumer) as poller:
            await asyncio.sleep(2)  # polling meanwhile; then the topic appears
            await asyncio.to_thread(create_topic, bounce_broker, unique_topic, 1)
            send_records(bounce_broker, tp, 100)
            await poller.wait_for(lambda: len(poller.records) >= 100, timeout=20)
            await asyncio.sleep(0.3)
            assert [r.offset for r in poller.records] == list(range(100))
        await asyncio.to_thread(bounce_broker.shutdown)
        await asyncio.sleep(0.5)
        await asyncio.to_thread(bounce_broker.start)
        async with Poller(consumer) as poller2:
            send_records(bounce_broker, tp, 100, first=100)
            await poller2.wait_for(lambda: len(poller2.records) >= 100, timeout=30)
            await asyncio.sleep(0.3)
            assert [r.offset for r in poller2.records] == list(range(100, 200))


async def receive_then_stop(consumer, count):
    """Kafka's createConsumerAndReceive: poll in the background until ``count`` records came."""
    async with Poller(consumer) as poller:
        await poller.wait_for(lambda: len(poller.records) >= count, timeout=30)
    assert len(poller.records) == count


async def close_within(consumer, timeout, limit):
    """Kafka's submitCloseAndValidate: close(timeout) returns within ``limit`` + 2 s of grace."""
    started = time.monotonic()
    await consumer.close(timeout=timeout)
    took = time.monotonic() - started
    assert took < limit + 2.0, f"close() took {took:.1f} s"


async def check_closed_state(broker, group, topic, committed):
    """Kafka's checkClosedState: a new member gets the partition, and the committed offset is ``committed``."""
    tp = TopicPartition(topic, 0)
    async with Consumer(topic, **bounce_settings(broker, group)) as consumer:
        await await_assignment(consumer, {tp})
        if committed:
            assert (await consumer.committed([tp]))[tp].offset == committed


async def test_close(bounce_broker, unique_topic, unique_group):
    """ConsumerBounceTest.testClose: the good path and the whole-cluster failure (Kafka's coordinator-only
    failure needs a second broker and is not ported)."""
    create_topic(bounce_broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    send_records(bounce_broker, tp, 10)
    # Good path: close commits and leaves; a new member starts from the commit.
    consumer = Consumer(unique_topic, **bounce_settings(bounce_broker, f"{unique_group}-1"))
    await receive_then_stop(consumer, 10)
    await close_within(consumer, None, 1.0)
    await check_closed_state(bounce_broker, f"{unique_group}-1", unique_topic, 10)
    # Cluster failure: close() returns within its timeout, or within request_timeout_ms when unbounded.
    member = Consumer(unique_topic, **bounce_settings(bounce_broker, f"{unique_group}-4"))
    await receive_then_stop(member, 10)
    manual = Consumer(**bounce_settings(bounce_broker, f"{unique_group}-5", request_timeout_ms=6000,
                                        session_timeout_ms=5000))
    manual.assign([tp])
    await receive_then_stop(manual, 10)
    await asyncio.to_thread(bounce_broker.shutdown)
    try:
        await asyncio.gather(close_within(member, 2.0, 2.0), close_within(manual, None, 6.0))
    finally:
        await asyncio.to_thread(bounce_broker.start)


async def test_close_during_rebalance(bounce_broker, unique_topic, unique_group):
    """ConsumerBounceTest.testCloseDuringRebalance: close() of a member while the group rebalances, with the
    broker up and then down."""
    create_topic(bounce_broker, unique_topic, partitions=10)
    conf = bounce_settings(bounce_broker, unique_group, max_poll_interval_ms=60000, enable_auto_commit=False)

    async def joined(consumer, *others):
        """Poll ``consumer`` (and keep ``others`` polling) until it has partitions."""
        async with contextlib.AsyncExitStack() as stack:
            for other in others:
                await stack.enter_async_context(Poller(other))
            await poll_until(consumer, lambda _: bool(consumer.assignment()), timeout=20)

    consumer1, consumer2 = Consumer(unique_topic, **conf), Consumer(unique_topic, **conf)
    consumer3, consumer4 = Consumer(unique_topic, **conf), Consumer(unique_topic, **conf)
    try:
        await joined(consumer1)
        await joined(consumer2, consumer1)
        rebalance = asyncio.create_task(joined(consumer3))  # its JoinGroup starts a rebalance
        await asyncio.sleep(1.0)
        assert not rebalance.done()
        await close_within(consumer1, None, 1.0)  # leaves at once, mid-rebalance
        async with Poller(consumer2):
            await asyncio.wait_for(rebalance, 20)
        second = asyncio.create_task(poll_until(consumer4, lambda _: False, timeout=60))
        await asyncio.sleep(1.0)
        await asyncio.to_thread(bounce_broker.shutdown)
        try:
            # No broker: no LeaveGroup to wait for. Bounded here so that a hang fails the test.
            await asyncio.wait_for(close_within(consumer2, None, 0.0), 5.0)
        finally:
            second.cancel()
            await asyncio.gather(second, return_exceptions=True)
            await asyncio.to_thread(bounce_broker.start)
    finally:
        for consumer in (consumer1, consumer2, consumer3, consumer4):
            await consumer.close(timeout=5)


async def test_consumer_receives_fatal_exception_when_group_passes_max_size(unique_topic, unique_group):
    """ConsumerBounceTest.testConsumerReceivesFatalExceptionWhenGroupPassesMaxSize (group.max.size 2, not 5;
    a broker of its own)."""
    with ApacheKafkaBroker("4.3.1", extra_properties={"group.max.size": "2"}) as own:
        create_topic(own, unique_topic, partitions=2, config=KEEP_OLD_RECORDS)
        conf = settings(own, unique_group, max_poll_interval_ms=60000, heartbeat_interval_ms=1000)
        members = [Consumer(unique_topic, **conf) for _ in range(2)]
        rejected = Consumer(unique_topic, **conf)
        try:
            async with Poller(members[0]) as p0, Poller(members[1]) as p1:
                await p0.wait_for(lambda: all(len(m.assignment()) == 1 for m in members), timeout=30)
                with pytest.raises(KafkaError, match="GROUP_MAX_SIZE_REACHED"):
                    await poll_until(rejected, lambda _: False, timeout=20)
                for p in range(2):
                    send_records(own, TopicPartition(unique_topic, p), 100)
                await p0.wait_for(lambda: len(p0.records) >= 100 and len(p1.records) >= 100, timeout=10)
        finally:
            for consumer in (*members, rejected):
                await consumer.close(timeout=5)
