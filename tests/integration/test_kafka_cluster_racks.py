"""Rack-aware fetching (KIP-392) on a 3-broker Apache Kafka 4.3.1 cluster with ``broker.rack`` set and
Kafka's RackAwareReplicaSelector: a consumer with ``client_rack`` reads from the follower in its
rack, as the brokers' request logs confirm, and keeps reading, without loss, when that follower dies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from aiokafka_lite import Consumer, ConsumerRecord, TopicPartition
from aiokafka_lite.testing.helpers import produce
from aiokafka_lite.testing.kafka_cluster import BROKER_IDS, KafkaCluster

from ._consumers import poll_until

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]
RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c"}
FETCH = 1  # the Fetch API key, as the request log names it


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with KafkaCluster(racks=RACKS, request_log=True) as running:
        yield running


def _send(cluster: KafkaCluster, topic: str, first: int, count: int) -> set[bytes]:
    produce(cluster.bootstrap_servers, topic, [{"value": f"v{i}", "partition": 0} for i in range(first, first + count)])
    return {f"v{i}".encode() for i in range(first, first + count)}


def _values(records: list[ConsumerRecord]) -> list[Any]:
    return [r.value for r in records]


async def test_fetches_from_the_follower_in_its_rack_and_falls_back_when_it_dies(
        cluster: KafkaCluster, unique_topic: str, unique_group: str) -> None:
    cluster.create_topic(unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    leader = cluster.leader_of(tp)
    follower = next(node for node in BROKER_IDS if node != leader)
    client_id = f"rack-test-{unique_group}"
    sent = _send(cluster, unique_topic, 0, 200)
    async with Consumer(bootstrap_servers=cluster.bootstrap_servers, client_id=client_id,
                        client_rack=RACKS[follower], auto_offset_reset="earliest", enable_auto_commit=False,
                        fetch_max_wait_ms=200, request_timeout_ms=5000, reconnect_backoff_max_ms=500) as consumer:
        consumer.assign([tp])
        got = await poll_until(consumer, lambda got: len(got) >= 200)
        assert consumer.metrics()["fetching_from"][f"{unique_topic}-0"] == follower
        sent |= _send(cluster, unique_topic, 200, 100)
        got += await poll_until(consumer, lambda got: len(got) >= 100)
        assert cluster.served(follower, client_id, FETCH) > 0  # the broker side: the follower served us
        cluster.kill_broker(follower)
        try:
            sent |= _send(cluster, unique_topic, 300, 100)
            got += await poll_until(consumer, lambda got: len(got) >= 100, timeout=60)
            assert consumer.metrics()["fetching_from"][f"{unique_topic}-0"] != follower
        finally:
            cluster.start_broker(follower)
    values = _values(got)
    assert len(values) == len(set(values)) == len(sent)
    assert set(values) == sent
