"""Kafka's PlaintextConsumerAssignorsTest (clients-integration-tests): client-side assignors of the
classic protocol, with groups scaled down (4 or 5 members instead of 9 or 10)."""

from __future__ import annotations

import contextlib

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, TopicPartition
from aiokafka_lite.testing.helpers import create_topic

from ._kit import Poller, await_assignment, send_records, settings

pytestmark = pytest.mark.asyncio


def create_topic_and_send_records(broker, topic, partitions, records=10):
    create_topic(broker, topic, partitions=partitions)
    tps = {TopicPartition(topic, p) for p in range(partitions)}
    for tp in tps:
        send_records(broker, tp, records)
    return tps


def valid(consumers, partitions):
    """Kafka's isPartitionAssignmentValid: every member has some, none twice, all covered."""
    owned = [c.assignment() for c in consumers]
    return all(owned) and sum(map(len, owned)) == len(partitions) and set().union(*owned) == partitions


@contextlib.asynccontextmanager
async def polling_group(consumers):
    """Start every consumer and keep each polling in the background; close them all at the end."""
    async with contextlib.AsyncExitStack() as stack:
        for consumer in consumers:
            stack.push_async_callback(consumer.close)
        pollers = []
        for consumer in consumers:
            await consumer.start()
            pollers.append(await stack.enter_async_context(Poller(consumer)))
        yield pollers


async def test_round_robin_assignment(broker, unique_topic, unique_group):
    """PlaintextConsumerAssignorsTest.testRoundRobinAssignment."""
    topic1, topic2, topic3 = (f"{unique_topic}-{i}" for i in (1, 2, 3))
    expected = create_topic_and_send_records(broker, topic1, 2) | create_topic_and_send_records(broker, topic2, 2)
    async with Consumer(**settings(broker, unique_group, partition_assignment_strategy=("roundrobin",))) as consumer:
        assert consumer.assignment() == set()
        consumer.subscribe([topic1, topic2])
        await await_assignment(consumer, expected)
        added = create_topic_and_send_records(broker, topic3, 2)
        consumer.subscribe([topic1, topic2, topic3])
        await await_assignment(consumer, expected | added)
        consumer.subscribe([topic1, topic2])
        await await_assignment(consumer, expected)
        consumer.unsubscribe()
        assert consumer.assignment() == set()


async def test_multi_consumer_round_robin_assignor(broker, unique_topic, unique_group):
    """PlaintextConsumerAssignorsTest.testMultiConsumerRoundRobinAssignor (4 members + 1, not 10 + 1)."""
    topic1, topic2 = f"{unique_topic}-1", f"{unique_topic}-2"
    partitions = create_topic_and_send_records(broker, topic1, 5) | create_topic_and_send_records(broker, topic2, 8)
    conf = settings(broker, unique_group, partition_assignment_strategy=("roundrobin",))
    consumers = [Consumer(topic1, topic2, **conf) for _ in range(5)]
    async with polling_group(consumers[:4]) as pollers:
        await pollers[0].wait_for(lambda: valid(consumers[:4], partitions), timeout=60)
        sizes = sorted(len(c.assignment()) for c in consumers[:4])
        assert sizes[-1] - sizes[0] <= 1  # round robin spreads evenly
        async with polling_group(consumers[4:]):
            await pollers[0].wait_for(lambda: valid(consumers, partitions), timeout=60)


async def test_multi_consumer_sticky_assignor(broker, unique_topic, unique_group):
    """PlaintextConsumerAssignorsTest.testMultiConsumerStickyAssignor (our cooperative-sticky; 4 members on 10
    partitions, then a 5th: exactly 2 partitions move, as Kafka's 9 members on 10r move r)."""
    partitions = create_topic_and_send_records(broker, unique_topic, 10)
    conf = settings(broker, unique_group, partition_assignment_strategy=("cooperative-sticky",))
    consumers = [Consumer(unique_topic, **conf) for _ in range(5)]
    async with polling_group(consumers[:4]) as pollers:
        await pollers[0].wait_for(lambda: valid(consumers[:4], partitions), timeout=60)
        before = {tp: i for i, c in enumerate(consumers[:4]) for tp in c.assignment()}
        async with polling_group(consumers[4:]):
            await pollers[0].wait_for(lambda: valid(consumers, partitions), timeout=60)
            after = {tp: i for i, c in enumerate(consumers) for tp in c.assignment()}
    moved = sum(before[tp] != after[tp] for tp in partitions)
    assert moved == 2, (before, after)


async def test_multi_consumer_default_assignor_and_verify_assignment(broker, unique_topic, unique_group):
    """PlaintextConsumerAssignorsTest.testMultiConsumerDefaultAssignorAndVerifyAssignment (range)."""
    topic1, topic2 = f"{unique_topic}-1", f"{unique_topic}-2"
    partitions = create_topic_and_send_records(broker, topic1, 3) | create_topic_and_send_records(broker, topic2, 3)
    consumers = [Consumer(topic1, topic2, **settings(broker, unique_group)) for _ in range(2)]
    async with polling_group(consumers) as pollers:
        await pollers[0].wait_for(lambda: valid(consumers, partitions), timeout=60)
        owned = sorted((c.assignment() for c in consumers), key=len, reverse=True)
    t1, t2 = (lambda p: TopicPartition(topic1, p)), (lambda p: TopicPartition(topic2, p))
    assert owned == [{t1(0), t1(1), t2(0), t2(1)}, {t1(2), t2(2)}]


async def test_multi_consumer_default_assignor(broker, topic, tp, tp2, unique_topic, unique_group):
    """PlaintextConsumerAssignorsTest.testMultiConsumerDefaultAssignor."""
    send_records(broker, tp, 10)
    send_records(broker, tp2, 10)
    topic1, topic2 = f"{unique_topic}-1", f"{unique_topic}-2"
    partitions = {tp, tp2} | create_topic_and_send_records(broker, topic1, 5)
    consumers = [Consumer(topic, topic1, **settings(broker, unique_group)) for _ in range(4)]
    async with polling_group(consumers[:2]) as pollers:
        await pollers[0].wait_for(lambda: valid(consumers[:2], partitions), timeout=60)
        async with polling_group(consumers[2:]):
            await pollers[0].wait_for(lambda: valid(consumers, partitions), timeout=60)
            expanded = partitions | create_topic_and_send_records(broker, topic2, 3)
            for consumer in consumers:
                consumer.subscribe([topic, topic1, topic2])
            await pollers[0].wait_for(lambda: valid(consumers, expanded), timeout=60)
            for consumer in consumers:
                consumer.subscribe([topic, topic1])
            await pollers[0].wait_for(lambda: valid(consumers, partitions), timeout=60)


@pytest.mark.parametrize(("strategy", "expected_generations"), [
    pytest.param("range", 1, id="range"),
    pytest.param("cooperative-sticky", 2, id="cooperative-sticky"),
])
async def test_rebalance_and_rejoin(broker, unique_topic, unique_group, strategy, expected_generations):
    """PlaintextConsumerAssignorsTest.testRebalanceAndRejoin: a second member joins; the first keeps
    its member id and moves on by exactly one generation (two with cooperative rebalancing). Java's
    groupMetadata() is our metrics()' generation_id and member_id, read in on_partitions_assigned."""
    partitions = create_topic_and_send_records(broker, unique_topic, 2)
    conf = settings(broker, unique_group, partition_assignment_strategy=(strategy,), enable_auto_commit=True)
    first, second = Consumer(**conf), Consumer(unique_topic, **conf)
    seen: list[tuple[int, str]] = []

    class Recording(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned):
            metrics = first.metrics()
            seen.append((metrics["generation_id"], metrics["member_id"]))

    first.subscribe([unique_topic], listener=Recording())
    assert first.assignment() == set()
    assert second.assignment() == set()
    async with polling_group([first]) as pollers:
        await pollers[0].wait_for(lambda: first.assignment() == partitions and bool(seen), timeout=30)
        stable_generation, stable_member = seen[-1]
        async with polling_group([second]):
            await pollers[0].wait_for(
                lambda: len(first.assignment()) == 1 and len(second.assignment()) == 1
                and seen[-1][0] >= stable_generation + expected_generations, timeout=30)
        assert seen[-1] == (stable_generation + expected_generations, stable_member)
