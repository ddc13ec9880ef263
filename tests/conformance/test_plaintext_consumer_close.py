"""Kafka's PlaintextConsumerCloseTest (clients-integration-tests), under both group protocols, as Kafka's
testClassicConsumer*/testAsyncConsumer* pairs."""

from __future__ import annotations

import time

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.testing.helpers import create_topic

from ._kit import consume_records, send_records, settings

pytestmark = pytest.mark.asyncio

DEFAULT_FETCH_MAX_WAIT = 0.5


async def test_close_with_timeout_ignores_fetch_max_wait_ms(broker, unique_topic, unique_group, group_protocol):
    """PlaintextConsumerCloseTest.testClassicConsumerCloseWithTimeoutIgnoresFetchMaxWaitMs."""
    create_topic(broker, unique_topic, partitions=2)
    send_records(broker, TopicPartition(unique_topic, 0), 100)
    consumer = Consumer(**settings(broker, unique_group, group_protocol))
    try:
        consumer.subscribe([unique_topic])
        await consume_records(consumer, 100)
    finally:
        started = time.monotonic()
        await consumer.close(timeout=0.1)
        took = time.monotonic() - started
    assert took <= DEFAULT_FETCH_MAX_WAIT, f"close(timeout=0.1) took {took:.3f} s"
