"""Kafka's PlaintextConsumerSubscriptionTest (clients-integration-tests), classic group protocol.

Topic names carry the test's unique prefix; each pattern is that prefix (escaped) followed by the
Java test's pattern, which Java matches against the whole topic name (``Matcher.matches()``)."""

from __future__ import annotations

import asyncio
import re

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.errors import KafkaError
from aiokafka_lite.testing.helpers import create_topic

from ._kit import CountingListener, await_assignment, await_rebalance, send_records, settings

pytestmark = pytest.mark.asyncio


def make_topics(broker, prefix, *names, partitions=2):
    """Create ``prefix-name`` topics with a few records in each partition; return their names."""
    full = [f"{prefix}-{name}" for name in names]
    for topic in full:
        create_topic(broker, topic, partitions=partitions)
        for p in range(partitions):
            send_records(broker, TopicPartition(topic, p), 10)
    return full


def partitions_of(*topics, count=2):
    return {TopicPartition(t, p) for t in topics for p in range(count)}


async def test_pattern_subscription(broker, unique_topic, unique_group, group_protocol):
    """PlaintextConsumerSubscriptionTest.testClassicConsumerPatternSubscription."""
    topic, topic1, _topic2, _topic3 = make_topics(broker, unique_topic, "topic", "tblablac", "tblablak", "tblab1")
    async with Consumer(**settings(broker, unique_group, group_protocol, metadata_max_age_ms=500)) as consumer:
        assert consumer.assignment() == set()
        consumer.subscribe(pattern=re.escape(unique_topic) + "-t.*c", listener=CountingListener())
        await await_assignment(consumer, partitions_of(topic, topic1))
        (topic4,) = make_topics(broker, unique_topic, "tsomec")  # matches: picked up on a metadata refresh
        await await_assignment(consumer, partitions_of(topic, topic1, topic4))
        consumer.unsubscribe()
        assert consumer.assignment() == set()


async def test_subsequent_pattern_subscription(broker, unique_topic, unique_group, group_protocol):
    """PlaintextConsumerSubscriptionTest.testClassicConsumerSubsequentPatternSubscription."""
    prefix = re.escape(unique_topic + "-")
    async with Consumer(**settings(broker, unique_group, group_protocol, metadata_max_age_ms=30000)) as consumer:
        (topic,) = make_topics(broker, unique_topic, "topic")
        (foo,) = make_topics(broker, unique_topic, "foo", partitions=1)
        assert consumer.assignment() == set()
        consumer.subscribe(pattern=prefix + ".*o.*", listener=CountingListener())  # topic and foo
        await await_assignment(consumer, partitions_of(topic) | partitions_of(foo, count=1))
        (bar,) = make_topics(broker, unique_topic, "bar", partitions=1)
        # "..." matches names of exactly three characters (after the prefix): foo and bar, not topic.
        consumer.subscribe(pattern=prefix + "...", listener=CountingListener())
        await await_assignment(consumer, partitions_of(foo, bar, count=1), timeout=15)
        consumer.unsubscribe()
        assert consumer.assignment() == set()


async def test_pattern_unsubscription(broker, unique_topic, unique_group, group_protocol):
    """PlaintextConsumerSubscriptionTest.testClassicConsumerPatternUnsubscription."""
    topic, topic1 = make_topics(broker, unique_topic, "topic", "tblablac")
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        assert consumer.assignment() == set()
        consumer.subscribe(pattern=re.escape(unique_topic) + "-t.*c", listener=CountingListener())
        await await_assignment(consumer, partitions_of(topic, topic1))
        consumer.unsubscribe()
        assert consumer.assignment() == set()  # cleared right away


async def test_expanding_topic_subscriptions(broker, topic, unique_topic, unique_group, group_protocol):
    """PlaintextConsumerSubscriptionTest.testClassicConsumerExpandingTopicSubscriptions."""
    other = f"{unique_topic}-other"
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.subscribe([topic])
        await await_assignment(consumer, partitions_of(topic))
        create_topic(broker, other, partitions=2)
        consumer.subscribe([topic, other])
        await await_assignment(consumer, partitions_of(topic, other))


async def test_shrinking_topic_subscriptions(broker, topic, unique_topic, unique_group, group_protocol):
    """PlaintextConsumerSubscriptionTest.testClassicConsumerShrinkingTopicSubscriptions."""
    other = f"{unique_topic}-other"
    create_topic(broker, other, partitions=2)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        consumer.subscribe([topic, other])
        await await_assignment(consumer, partitions_of(topic, other))
        consumer.subscribe([topic])
        await await_assignment(consumer, partitions_of(topic))


async def test_unsubscribe_topic(broker, topic, unique_group, group_protocol):
    """PlaintextConsumerSubscriptionTest.testClassicConsumerUnsubscribeTopic (session 1 s, the broker's minimum)."""
    conf = settings(broker, unique_group, group_protocol, session_timeout_ms=1000, heartbeat_interval_ms=100)
    async with Consumer(**conf) as consumer:
        listener = CountingListener()
        consumer.subscribe([topic], listener=listener)
        await await_rebalance(consumer, listener)
        consumer.subscribe([])
        assert consumer.assignment() == set()


async def subscribe_invalid_topic(consumer):
    """Kafka's setupSubscribeInvalidTopic: poll() raises an error naming the invalid topic within 5 s."""
    consumer.subscribe(["topic abc"])  # a space is not allowed in a topic name
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    error: KafkaError | None = None
    while error is None and loop.time() < deadline:
        try:
            await consumer.poll(timeout=0.5)
        except KafkaError as exc:
            error = exc
    assert error is not None, "poll() raised no error for the invalid topic 'topic abc' within 5 s"
    assert "topic abc" in str(error)


async def test_subscribe_invalid_topic_can_unsubscribe(broker, unique_group, group_protocol):
    """PlaintextConsumerSubscriptionTest.test{Classic,Async}ConsumerSubscribeInvalidTopicCanUnsubscribe."""
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        await subscribe_invalid_topic(consumer)
        consumer.unsubscribe()
        assert consumer.subscription() == set()


async def test_subscribe_invalid_topic_can_close(broker, unique_group, group_protocol):
    """PlaintextConsumerSubscriptionTest.test{Classic,Async}ConsumerSubscribeInvalidTopicCanClose."""
    consumer = Consumer(**settings(broker, unique_group, group_protocol))
    await consumer.start()
    try:
        await subscribe_invalid_topic(consumer)
    finally:
        await consumer.close()
