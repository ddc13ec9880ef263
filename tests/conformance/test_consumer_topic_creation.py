"""Kafka's ConsumerTopicCreationTest: subscribing to a missing topic creates it only when the broker
(auto.create.topics.enable) and the consumer (allow_auto_create_topics) both allow it."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.testing import ApacheKafkaBroker
from aiokafka_lite.testing.helpers import create_topic, produce

from ._kit import poll_until, settings

pytestmark = pytest.mark.asyncio


@pytest.fixture(scope="module")
def no_auto_create_broker():
    with ApacheKafkaBroker("4.3.1", extra_properties={"auto.create.topics.enable": "false"}) as broker:
        yield broker


def topic_exists(broker, name):
    admin = pytest.importorskip("confluent_kafka.admin")
    client = admin.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    return name in client.list_topics(timeout=10).topics


@pytest.mark.parametrize(("broker_allows", "consumer_allows"), [
    pytest.param(True, True, id="broker-on-consumer-on"),
    pytest.param(True, False, id="broker-on-consumer-off"),
    pytest.param(False, True, id="broker-off-consumer-on"),
    pytest.param(False, False, id="broker-off-consumer-off"),
])
async def test_auto_topic_creation(request, unique_topic, unique_group, broker_allows, consumer_allows):
    """ConsumerTopicCreationTest.testAutoTopicCreation, for each of its four parameter pairs."""
    broker = request.getfixturevalue("apache_kafka_broker" if broker_allows else "no_auto_create_broker")
    topic_1, topic_2 = f"{unique_topic}-1", f"{unique_topic}-2"
    create_topic(broker, topic_1, partitions=1)
    produce(broker, topic_1, [{"key": "key", "value": "value", "partition": 0}])
    conf = settings(broker, unique_group, metadata_max_age_ms=100, allow_auto_create_topics=consumer_allows)
    async with Consumer(**conf) as consumer:
        consumer.subscribe([topic_1, topic_2])
        # Once a record came, the consumer has sent Metadata requests naming topic_2.
        await poll_until(consumer, lambda got: len(got) > 0, timeout=30, poll_timeout=0.1)
    # The broker creates a topic asked for in Metadata asynchronously (through its controller): allow
    # it a few seconds to appear, and as long to make sure it does not.
    expected = broker_allows and consumer_allows
    assert await appears_within(broker, topic_2, 10.0 if expected else 2.0) == expected


async def appears_within(broker, name, seconds):
    """Whether topic `name` exists within `seconds` (checked every 0.2 s)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not await asyncio.to_thread(topic_exists, broker, name):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.2)
    return True
