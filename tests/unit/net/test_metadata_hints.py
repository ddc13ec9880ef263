"""MetadataCache.apply_leader_hint: the leader a Fetch answer names (KIP-951) is taken by Java's
rules: a newer epoch, a partition we know, a broker we can reach (from the answer's NodeEndpoints
or our metadata)."""

from __future__ import annotations

import uuid
from typing import Any

from aiokafka_lite._net.metadata import BrokerInfo, MetadataCache
from aiokafka_lite.structs import TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
TOPIC_ID = uuid.UUID(int=7)


def metadata_response(leaders: dict[int, tuple[int, int]], brokers: tuple[int, ...] = (1, 2)) -> dict[str, Any]:
    """Topic "t" with partition -> (leader, epoch), replicas on brokers 1-3."""
    return {
        "brokers": [{"node_id": n, "host": "127.0.0.1", "port": 9000 + n, "rack": None} for n in brokers],
        "cluster_id": "c", "controller_id": 1,
        "topics": [{"name": "t", "topic_id": TOPIC_ID, "is_internal": False, "error_code": 0, "partitions": [
            {"partition_index": p, "leader_id": leader, "leader_epoch": epoch, "replica_nodes": [1, 2, 3],
             "isr_nodes": [1, 2, 3], "offline_replicas": [], "error_code": 0}
            for p, (leader, epoch) in leaders.items()]}],
    }


def cache(leaders: dict[int, tuple[int, int]], brokers: tuple[int, ...] = (1, 2)) -> MetadataCache:
    metadata = MetadataCache()
    metadata.update(metadata_response(leaders, brokers), None, 0.0)
    return metadata


def endpoint(node_id: int, port: int = 0) -> dict[int, BrokerInfo]:
    return {node_id: BrokerInfo(node_id, "127.0.0.1", port or 9000 + node_id, "r")}


def test_a_newer_leader_is_taken_with_its_endpoint_and_the_rest_stays() -> None:
    metadata = cache({0: (1, 4), 1: (1, 4)})
    assert metadata.apply_leader_hint(T0, 3, 5, endpoint(3))
    assert (metadata.leader_for(T0), metadata.leader_epoch_for(T0)) == (3, 5)
    assert metadata.brokers[3] == BrokerInfo(3, "127.0.0.1", 9003, "r")  # the pool can connect to it
    assert metadata.partition(T0).replicas == (1, 2, 3)  # type: ignore[union-attr]
    assert (metadata.leader_for(T1), metadata.leader_epoch_for(T1)) == (1, 4)  # untouched
    assert metadata.topic_id("t") == TOPIC_ID


def test_a_known_broker_needs_no_endpoint() -> None:
    metadata = cache({0: (1, 4)})
    assert metadata.apply_leader_hint(T0, 2, 5, {})
    assert metadata.leader_for(T0) == 2


def test_the_answers_endpoint_wins_over_what_we_knew() -> None:
    metadata = cache({0: (1, 4)})
    assert metadata.apply_leader_hint(T0, 2, 5, endpoint(2, port=9999))
    assert metadata.brokers[2].port == 9999


def test_a_hint_not_newer_than_our_epoch_is_ignored() -> None:
    metadata = cache({0: (2, 5)})
    assert not metadata.apply_leader_hint(T0, 1, 5, endpoint(1))  # same epoch
    assert not metadata.apply_leader_hint(T0, 1, 4, endpoint(1))  # older
    assert (metadata.leader_for(T0), metadata.leader_epoch_for(T0)) == (2, 5)


def test_a_leader_we_cannot_reach_is_ignored() -> None:
    metadata = cache({0: (1, 4)})
    assert not metadata.apply_leader_hint(T0, 3, 5, endpoint(2))  # 3: neither in the answer nor known
    assert (metadata.leader_for(T0), metadata.leader_epoch_for(T0)) == (1, 4)
    assert 3 not in metadata.brokers


def test_incomplete_hints_and_unknown_partitions_are_ignored() -> None:
    metadata = cache({0: (1, 4)})
    assert not metadata.apply_leader_hint(T0, -1, -1, {})  # what brokers send below Fetch v16
    assert not metadata.apply_leader_hint(T0, 2, -1, {})
    assert not metadata.apply_leader_hint(TopicPartition("t", 9), 2, 5, {})
    assert not metadata.apply_leader_hint(TopicPartition("other", 0), 2, 5, {})
    assert metadata.leader_for(T0) == 1
