"""A consumer subscribed to a topic that does not exist waits for it, as Java's does, but says so:
one WARNING naming the topic (not one per metadata refresh), and one INFO line once it exists,
after which its records are read. On Apache Kafka under both group protocols, with the client
asking the broker not to create topics (allow_auto_create_topics=False)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import poll_until
from ._protocols import GroupProtocol

pytestmark = pytest.mark.asyncio


def _about(records: list[logging.LogRecord], topic: str, level: int) -> list[str]:
    return [r.getMessage() for r in records if r.levelno == level and repr(topic) in r.getMessage()]


async def test_a_missing_topic_is_said_once_then_read_when_created(
        apache_kafka_broker, unique_topic, unique_group, group_protocol: GroupProtocol,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    settings = group_protocol.settings(
        dict(bootstrap_servers=apache_kafka_broker.bootstrap_servers, group_id=unique_group,
             auto_offset_reset="earliest", allow_auto_create_topics=False, metadata_max_age_ms=500,
             session_timeout_ms=10000, heartbeat_interval_ms=500))
    async with Consumer(unique_topic, **settings) as consumer:
        loop = asyncio.get_running_loop()
        started = loop.time()
        while not _about(caplog.records, unique_topic, logging.WARNING) and loop.time() - started < 20:
            await consumer.poll(timeout=0.5)
        warned_after = loop.time() - started
        for _ in range(6):  # several metadata refreshes (metadata_max_age_ms=500) while it is missing
            assert len(await consumer.poll(timeout=0.5)) == 0
        warnings = _about(caplog.records, unique_topic, logging.WARNING)
        assert warnings == [f"topic {unique_topic!r}: does not exist; the consumer waits for it to be "
                            "created and reads nothing from it until then"], caplog.text
        assert warned_after < 15, warned_after

        create_topic(apache_kafka_broker, unique_topic, partitions=2)
        produce(apache_kafka_broker, unique_topic, [(f"k{i}", f"v{i}") for i in range(10)])
        got = await poll_until(consumer, lambda records: len(records) >= 10, timeout=60)
    assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(10))
    assert len(_about(caplog.records, unique_topic, logging.WARNING)) == 1
    recovered = [m for m in _about(caplog.records, unique_topic, logging.INFO) if "it exists now" in m]
    assert len(recovered) == 1, caplog.text
