"""A consumer subscribed to a topic that does not exist waits for it, as Java's does, but says so:
one WARNING naming the topic (not one per metadata refresh), and one INFO line once it exists,
after which its records are read. On Apache Kafka under both group protocols, with the client
asking the broker not to create topics (allow_auto_create_topics=False); and for a ShareConsumer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from aiokafka_lite import Consumer, ShareConsumer
from aiokafka_lite.testing.helpers import create_topic, produce, set_group_config

from ._consumers import poll_until, until
from ._protocols import GroupProtocol

pytestmark = pytest.mark.asyncio


def _about(records: list[logging.LogRecord], topic: str, level: int) -> list[str]:
    return [r.getMessage() for r in records if r.levelno == level and repr(topic) in r.getMessage()]


async def _said_once_while_missing(poll: Callable[[float], Awaitable[Sequence[Any]]],
                                   caplog: pytest.LogCaptureFixture, topic: str, quiet_polls: int) -> float:
    """Poll (0.5 s each, nothing comes) until the WARNING naming ``topic``, then ``quiet_polls``
    more; the WARNING was said once. Returns how long it took to come."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while not _about(caplog.records, topic, logging.WARNING) and loop.time() - started < 20:
        assert len(await poll(0.5)) == 0
    warned_after = loop.time() - started
    for _ in range(quiet_polls):
        assert len(await poll(0.5)) == 0
    assert _about(caplog.records, topic, logging.WARNING) == [
        f"topic {topic!r}: does not exist; the consumer waits for it to be created and reads nothing from "
        "it until then"], caplog.text
    return warned_after


async def test_a_missing_topic_is_said_once_then_read_when_created(
        apache_kafka_broker, unique_topic, unique_group, group_protocol: GroupProtocol,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    settings = group_protocol.settings(
        dict(bootstrap_servers=apache_kafka_broker.bootstrap_servers, group_id=unique_group,
             auto_offset_reset="earliest", allow_auto_create_topics=False, metadata_max_age_ms=500,
             session_timeout_ms=10000, heartbeat_interval_ms=500))
    async with Consumer(unique_topic, **settings) as consumer:
        # several metadata refreshes (metadata_max_age_ms=500) while it is missing
        warned_after = await _said_once_while_missing(consumer.poll, caplog, unique_topic, quiet_polls=6)
        assert warned_after < 15, warned_after

        create_topic(apache_kafka_broker, unique_topic, partitions=2)
        produce(apache_kafka_broker, unique_topic, [(f"k{i}", f"v{i}") for i in range(10)])
        got = await poll_until(consumer, lambda records: len(records) >= 10, timeout=60)
    assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(10))
    assert len(_about(caplog.records, unique_topic, logging.WARNING)) == 1
    recovered = [m for m in _about(caplog.records, unique_topic, logging.INFO) if "it exists now" in m]
    assert len(recovered) == 1, caplog.text


async def test_a_share_consumer_says_a_missing_topic_once_then_reads_it_when_created(
        apache_kafka_broker, unique_topic, unique_group, caplog: pytest.LogCaptureFixture) -> None:
    """The same for a ShareConsumer: the broker's assignment simply stays empty for a topic that
    does not exist, so without this a mistyped name looks like an idle topic."""
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    set_group_config(apache_kafka_broker, unique_group, {"share.auto.offset.reset": "earliest"})
    async with ShareConsumer(unique_topic, bootstrap_servers=apache_kafka_broker.bootstrap_servers,
                             group_id=unique_group, allow_auto_create_topics=False) as share:
        # past two of its re-checks (every 5 s) while the topic is missing
        warned_after = await _said_once_while_missing(share.poll, caplog, unique_topic, quiet_polls=14)
        assert warned_after < 5, warned_after

        create_topic(apache_kafka_broker, unique_topic, partitions=2)
        produce(apache_kafka_broker, unique_topic, [(f"k{i}", f"v{i}") for i in range(10)])
        got: list[bytes | None] = []
        async with asyncio.timeout(60):
            while len(got) < 10:
                got.extend(r.value for r in await share.poll(0.5))
        await until(lambda: any("it exists now" in m for m in _about(caplog.records, unique_topic, logging.INFO)),
                    15.0, "the INFO line once the topic exists")
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(10))
    assert len(_about(caplog.records, unique_topic, logging.WARNING)) == 1
    print(f"\nwarned {warned_after:.2f} s after start; read all 10 records once the topic was created")
