"""The I/O shell against real brokers: negotiation, metadata, coordinator lookup, dedicated connection.

Topics are created with confluent-kafka (librdkafka), and its view of the metadata is the reference
ours is checked against.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aiokafka_lite._net import Cluster, Connection, ConnectionOptions
from aiokafka_lite._net.requests import metadata_request
from aiokafka_lite.errors import KafkaConnectionError, KafkaTimeoutError
from aiokafka_lite.protocol.messages import API_VERSIONS, FETCH, FIND_COORDINATOR, HEARTBEAT, METADATA
from aiokafka_lite.structs import TopicPartition

confluent_admin = pytest.importorskip("confluent_kafka.admin")

NOT_COORDINATOR = 16
OPTIONS = ConnectionOptions(request_timeout=30.0, retry_backoff=0.05)


def servers(bootstrap: str) -> list[tuple[str, int]]:
    pairs = [entry.rsplit(":", 1) for entry in bootstrap.split(",")]
    return [(host, int(port)) for host, port in pairs]


def reference_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> leader as librdkafka sees it."""
    admin = confluent_admin.AdminClient({"bootstrap.servers": bootstrap})
    described = admin.list_topics(topic, timeout=30).topics[topic]
    return {p: info.leader for p, info in described.partitions.items()}


@pytest.mark.asyncio
async def test_negotiates_api_versions(any_broker: Any) -> None:
    host, port = servers(any_broker.bootstrap_servers)[0]
    conn = await Connection.open(host, port, OPTIONS, timeout=30.0)
    try:
        ranges = conn.broker_versions
        assert API_VERSIONS.key in ranges
        assert METADATA.key in ranges
        lo, hi = ranges[METADATA.key]
        version = conn.version_for(METADATA)
        assert version == min(hi, METADATA.max_version)
        assert version >= lo
        expected = min(ranges[API_VERSIONS.key][1], API_VERSIONS.max_version)
        if any_broker.kind == "mock":
            expected = 0  # its UNSUPPORTED_VERSION answer to v5 is not valid v0, so we retry at v0
        elif any_broker.kind == "tansu":
            expected = API_VERSIONS.max_version  # answered though not listed: DEVIATIONS["api_versions_v5"]
        assert conn.api_versions_version == expected
        answer = await conn.send(METADATA, version, metadata_request(version, None))
        assert answer["brokers"], answer
        # An older version the broker also speaks still round-trips on the same connection.
        older = max(lo, 1)
        assert (await conn.send(METADATA, older, metadata_request(older, None)))["brokers"]
    finally:
        await conn.close()
    assert conn.closed


@pytest.mark.asyncio
async def test_metadata_for_a_created_topic(any_broker: Any, unique_topic: str) -> None:
    any_broker.create_topic(unique_topic, partitions=3)
    cluster = Cluster(OPTIONS, servers(any_broker.bootstrap_servers))
    try:
        await cluster.bootstrap(timeout=30.0)
        assert cluster.metadata.brokers
        assert all(b.port > 0 and b.host for b in cluster.metadata.brokers.values())
        await cluster.refresh_metadata([unique_topic], timeout=30.0)
        assert cluster.partitions_for(unique_topic) == {0, 1, 2}
        assert cluster.metadata.topic_error(unique_topic) == 0
        expected = reference_leaders(any_broker.bootstrap_servers, unique_topic)
        ours = {p: cluster.leader_for(TopicPartition(unique_topic, p)) for p in range(3)}
        assert ours == expected
        assert all(leader in cluster.metadata.brokers for leader in ours.values())
        assert unique_topic in cluster.topics()
        assert cluster.metadata_age() < 30.0
        assert cluster.partitions_for("no-such-topic-" + unique_topic) is None
        await cluster.refresh_metadata(None, timeout=30.0)  # all topics
        assert unique_topic in cluster.topics()
    finally:
        await cluster.close()
        await cluster.close()


@pytest.mark.asyncio
async def test_coordinator_found_with_a_dedicated_connection(any_broker: Any, unique_group: str) -> None:
    cluster = Cluster(OPTIONS, servers(any_broker.bootstrap_servers))
    try:
        await cluster.bootstrap(timeout=30.0)
        node = await cluster.find_coordinator(unique_group, timeout=30.0)
        assert node in cluster.metadata.brokers
        coordinator = await cluster.coordinator_connection(unique_group, timeout=30.0)
        pooled = await cluster.connection(node, timeout=30.0)
        assert coordinator is not pooled
        assert coordinator.node_id == pooled.node_id == node
        assert (coordinator.host, coordinator.port) == (pooled.host, pooled.port)
        assert coordinator.version_for(FIND_COORDINATOR) == pooled.version_for(FIND_COORDINATOR)
        # The coordinator answers group requests on its own connection. Right after the offsets
        # topic is created Kafka says NOT_COORDINATOR while the group's shard loads; a client then
        # forgets the coordinator and looks it up again, as done here.
        code = await heartbeat_until_coordinated(cluster, unique_group, deadline=time.monotonic() + 20)
        assert code != NOT_COORDINATOR
    finally:
        await cluster.close()
    assert coordinator.closed
    assert pooled.closed


async def heartbeat_until_coordinated(cluster: Cluster, group: str, deadline: float) -> int:
    while True:
        conn = await cluster.coordinator_connection(group, timeout=30.0)
        answer = await conn.send(HEARTBEAT, conn.version_for(HEARTBEAT), {
            "group_id": group, "generation_id": -1, "member_id": "nobody"})
        code: int = answer["error_code"]
        if code != NOT_COORDINATOR or time.monotonic() > deadline:
            return code
        cluster.mark_coordinator_dead(group, "NOT_COORDINATOR")
        await asyncio.sleep(0.2)


def fetch_body(topic: str, max_wait_ms: int) -> dict[str, Any]:
    return {"max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}


@pytest.mark.asyncio
async def test_heartbeat_path_does_not_queue_behind_a_long_poll_fetch(
        any_broker: Any, unique_topic: str, unique_group: str) -> None:
    if any_broker.kind == "mock":
        pytest.skip("the librdkafka mock answers an empty fetch at once: no long poll to queue behind")
    any_broker.create_topic(unique_topic, partitions=1)
    cluster = Cluster(OPTIONS, servers(any_broker.bootstrap_servers))
    try:
        await cluster.bootstrap(timeout=30.0)
        await cluster.refresh_metadata([unique_topic], timeout=30.0)
        node = await cluster.find_coordinator(unique_group, timeout=30.0)
        if cluster.leader_for(TopicPartition(unique_topic, 0)) != node:
            pytest.skip("the partition leader is not the coordinator on this cluster")
        coordinator = await cluster.coordinator_connection(unique_group, timeout=30.0)
        pooled = await cluster.connection(node, timeout=30.0)
        fetch_version = pooled.version_for(FETCH, 12)  # v12: topics by name
        began = time.monotonic()
        fetch = asyncio.create_task(pooled.send(FETCH, fetch_version, fetch_body(unique_topic, 2000)))
        await asyncio.sleep(0.2)  # the fetch is now parked in the broker's purgatory
        version = coordinator.version_for(HEARTBEAT)
        await coordinator.send(HEARTBEAT, version, {"group_id": unique_group, "generation_id": -1,
                                                    "member_id": "nobody"})
        heartbeat_done = time.monotonic() - began
        assert not fetch.done(), "the fetch did not long-poll, so this test proves nothing"
        fetched = await fetch
        fetch_done = time.monotonic() - began
        assert fetched["responses"][0]["partitions"][0]["error_code"] == 0
        assert heartbeat_done < 1.0 < fetch_done
    finally:
        await cluster.close()


@pytest.mark.asyncio
async def test_mock_cluster_narrowed_versions_and_reconnect(mock_cluster: Any) -> None:
    mock_cluster.set_api_version(METADATA.key, 0, 4)
    cluster = Cluster(ConnectionOptions(request_timeout=10.0, reconnect_backoff=0.01,
                                        reconnect_backoff_max=0.05),
                      servers(mock_cluster.bootstrap_servers))
    try:
        await cluster.bootstrap(timeout=30.0)
        node = next(iter(cluster.metadata.brokers))
        first = await cluster.connection(node, timeout=10.0)
        assert first.version_for(METADATA) == 4
        mock_cluster.broker_set_down(node)
        with pytest.raises((KafkaConnectionError, KafkaTimeoutError)):
            await cluster.send(node, METADATA, metadata_request(4, None), timeout=5.0)
        mock_cluster.broker_set_up(node)
        second = await cluster.connection(node, timeout=10.0)
        assert second is not first
        assert first.closed
        assert (await second.send(METADATA, 4, metadata_request(4, None)))["brokers"]
    finally:
        await cluster.close()
