"""The cluster metadata cache: brokers, topics, partitions, leaders. Pure data, no I/O."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..protocol.primitives import ZERO_UUID
from ..structs import TopicPartition


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader_id: int  # -1: no leader right now (election in progress)
    leader_epoch: int  # -1: unknown (Metadata before v7)
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error_code: int


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID  # ZERO_UUID before Metadata v10
    is_internal: bool
    error_code: int  # e.g. UNKNOWN_TOPIC_OR_PARTITION (3), LEADER_NOT_AVAILABLE (5)
    partitions: Mapping[int, PartitionInfo]


class MetadataCache:
    """The latest Metadata answer, merged per topic when only some topics were asked for."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.updated_at: float | None = None  # monotonic time of the last update

    def update(self, response: Mapping[str, Any], requested: Iterable[str] | None, now: float) -> None:
        """Apply a Metadata response. ``requested=None`` means it lists every topic."""
        self.brokers = {b["node_id"]: BrokerInfo(b["node_id"], b["host"], b["port"], b["rack"])
                        for b in response["brokers"]}
        self.cluster_id = response["cluster_id"]
        self.controller_id = response["controller_id"]
        topics = {t.name: t for t in map(_topic_info, response["topics"]) if t is not None}
        if requested is None:
            self.topics = topics
        else:
            self.topics.update(topics)
        self.updated_at = now

    def forget_brokers(self) -> None:
        """Rebootstrap (KIP-899): the brokers named so far are gone; topics stay until the next update."""
        self.brokers = {}

    def age(self, now: float) -> float | None:
        return None if self.updated_at is None else now - self.updated_at

    def leader_for(self, tp: TopicPartition) -> int | None:
        """The leader's node id, or None if unknown, leaderless, or not a broker we know."""
        info = self.partition(tp)
        if info is None or info.leader_id < 0 or info.leader_id not in self.brokers:
            return None
        return info.leader_id

    def leaders_for(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """leader_for() of many partitions in one pass (metrics() asks for every assigned one)."""
        topics, brokers = self.topics, self.brokers
        out: dict[TopicPartition, int | None] = {}
        for tp in tps:
            topic = topics.get(tp.topic)
            info = None if topic is None else topic.partitions.get(tp.partition)
            out[tp] = None if info is None or info.leader_id < 0 or info.leader_id not in brokers else info.leader_id
        return out

    def apply_leader_hint(self, tp: TopicPartition, leader_id: int, leader_epoch: int,
                          endpoints: Mapping[int, BrokerInfo]) -> bool:
        """Take the leader a broker named for ``tp`` (KIP-951: a Fetch's CurrentLeader, with the
        answer's NodeEndpoints), as Java's Metadata.updatePartitionLeadership does: ignored (False)
        when incomplete, not newer than the epoch we know, for a partition we do not know, or for
        a broker neither ``endpoints`` nor our metadata can reach. ``endpoints`` win over what we
        knew of those brokers. The rest of the partition (replicas, ISR) waits for a refresh."""
        info = self.partition(tp)
        if info is None or leader_id < 0 or leader_epoch < 0 or leader_epoch <= info.leader_epoch:
            return False
        if leader_id not in endpoints and leader_id not in self.brokers:
            return False
        self.brokers.update(endpoints)
        topic = self.topics[tp.topic]
        partitions = {**topic.partitions, tp.partition: replace(info, leader_id=leader_id, leader_epoch=leader_epoch)}
        self.topics[tp.topic] = replace(topic, partitions=partitions)
        return True

    def leader_epoch_for(self, tp: TopicPartition) -> int | None:
        info = self.partition(tp)
        return None if info is None or info.leader_epoch < 0 else info.leader_epoch

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        topic = self.topics.get(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    def partitions_for(self, topic: str) -> set[int] | None:
        """Partition numbers of ``topic``; None when the topic is unknown or has no partitions yet."""
        info = self.topics.get(topic)
        if info is None or not info.partitions:
            return None
        return set(info.partitions)

    def topic_error(self, topic: str) -> int | None:
        info = self.topics.get(topic)
        return None if info is None else info.error_code

    def topic_id(self, topic: str) -> uuid.UUID | None:
        info = self.topics.get(topic)
        return None if info is None or info.topic_id == ZERO_UUID else info.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for info in self.topics.values():
            if info.topic_id == topic_id:
                return info.name
        return None


def _topic_info(t: Mapping[str, Any]) -> TopicInfo | None:
    name = t["name"]
    if name is None:  # only answers to lookups by topic id (which we never send) lack names
        return None
    partitions = {p["partition_index"]: _partition_info(name, p) for p in t["partitions"] or ()}
    return TopicInfo(name, t["topic_id"], t["is_internal"], t["error_code"], partitions)


def _partition_info(topic: str, p: Mapping[str, Any]) -> PartitionInfo:
    return PartitionInfo(topic, p["partition_index"], p["leader_id"], p["leader_epoch"],
                         tuple(p["replica_nodes"] or ()), tuple(p["isr_nodes"] or ()),
                         tuple(p["offline_replicas"] or ()), p["error_code"])
