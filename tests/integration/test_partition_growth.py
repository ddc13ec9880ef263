"""Partitions added to a subscribed topic are assigned and read (issue #11, item 5): as in Java, a
partition count that changed since the assignment, seen in refreshed metadata, triggers a
rebalance. On Apache Kafka, with partitions added through the admin API."""

from __future__ import annotations

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import Poller

pytestmark = pytest.mark.asyncio


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin_module = pytest.importorskip("confluent_kafka.admin")
    admin = admin_module.AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([admin_module.NewPartitions(topic, total)]).values():
        future.result(timeout=30)


def settings(broker, group, protocol):
    return protocol.settings(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                             heartbeat_interval_ms=500, metadata_max_age_ms=2000)


@pytest.mark.parametrize("members", [1, 2])
async def test_partitions_added_to_a_subscribed_topic_are_assigned_and_read(apache_kafka_broker, unique_topic,
                                                                             unique_group, group_protocol,
                                                                             members):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    everything = {TopicPartition(unique_topic, p) for p in range(4)}
    consumers = [Consumer(unique_topic, **settings(broker, unique_group, group_protocol)) for _ in range(members)]
    pollers = [Poller(c) for c in consumers]
    try:
        for poller in pollers:
            await poller.__aenter__()

        def owned() -> set[TopicPartition]:
            return set().union(*(c.assignment() for c in consumers))

        await pollers[0].wait_for(lambda: len(owned()) == 2 and all(c.assignment() for c in consumers),
                                  timeout=30)
        add_partitions(broker.bootstrap_servers, unique_topic, 4)
        seconds = await pollers[0].wait_for(lambda: owned() == everything, timeout=20)
        assert seconds < 20
        produce(broker, unique_topic, [{"value": f"p{p}-{i}", "partition": p} for p in range(4) for i in range(3)])
        await pollers[0].wait_for(
            lambda: {(r.partition, r.value) for poller in pollers for r in poller.records}
            >= {(p, f"p{p}-{i}".encode()) for p in range(4) for i in range(3)}, timeout=20)
    finally:
        for poller in pollers:
            await poller.__aexit__(None, None, None)
        for c in consumers:
            await c.close(timeout=5)
