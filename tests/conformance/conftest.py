"""Conformance fixtures: every scenario runs on the session's Apache Kafka 4.3.1 broker, on a
topic of its own with 2 partitions (Kafka's tests create ``topic`` with 2 partitions before each)."""

from __future__ import annotations

import pytest

from aiokafka_lite import TopicPartition
from aiokafka_lite.testing.helpers import create_topic

from ..integration._protocols import group_protocol
from ._kit import KEEP_OLD_RECORDS

__all__ = ["group_protocol"]  # a fixture: each group scenario under the classic and the consumer protocol


@pytest.fixture
def broker(apache_kafka_broker):
    return apache_kafka_broker


@pytest.fixture
def topic(broker, unique_topic):
    """``unique_topic`` created with 2 partitions, kept whatever its records' timestamps."""
    create_topic(broker, unique_topic, partitions=2, config=KEEP_OLD_RECORDS)
    return unique_topic


@pytest.fixture
def tp(topic):
    return TopicPartition(topic, 0)


@pytest.fixture
def tp2(topic):
    return TopicPartition(topic, 1)
