"""retry_backoff_ms=0 (Java allows it: retry.backoff.ms is atLeast(0)) works end to end."""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import poll_until

pytest.importorskip("confluent_kafka")


@pytest.mark.asyncio
async def test_group_consumer_with_zero_retry_backoff_consumes_and_commits(tansu_broker: Any, unique_topic: str,
                                                                          unique_group: str) -> None:
    create_topic(tansu_broker, unique_topic, partitions=1)
    produce(tansu_broker, unique_topic, [(f"k{i}", f"v{i}") for i in range(5)], enable_idempotence=True)
    consumer = Consumer.from_properties({
        "bootstrap.servers": tansu_broker.bootstrap_servers, "group.id": unique_group,
        "retry.backoff.ms": "0", "auto.offset.reset": "earliest", "enable.auto.commit": "false",
        "session.timeout.ms": "10000"}, unique_topic)
    async with consumer:
        records = await poll_until(consumer, lambda got: len(got) >= 5, timeout=30.0)
        await consumer.commit()
    assert [r.value for r in records] == [f"v{i}".encode() for i in range(5)]
    assert consumer.config.retry_backoff_ms == 0
