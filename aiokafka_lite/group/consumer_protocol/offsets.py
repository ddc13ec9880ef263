"""OffsetCommit v9 / OffsetFetch v9 as a KIP-848 member: request bodies carrying the member id and
member epoch, and what the answers mean. Pure: the member sends and retries."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import BrokerError, is_retriable
from ...structs import OffsetAndMetadata, TopicPartition

NONE = 0
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
STALE_MEMBER_EPOCH = 113
UNSTABLE_OFFSET_COMMIT = 88
COORDINATOR_MOVED = frozenset({15, 16})
# Newer versions address topics by id only; this client tracks topics by name.
OFFSET_VERSION_CAP = 9
NOT_A_MEMBER = frozenset({UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH})


@dataclass
class Outcome:
    """done; stale: retry after the next heartbeat (the epoch moved on); gone: the member is no
    longer in the group; retry: a retriable code (after the backoff); rediscover: coordinator moved."""

    done: bool = False
    stale: bool = False
    gone: bool = False
    retry: bool = False
    rediscover: bool = False
    error: BrokerError | None = None
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)


def commit_body(group_id: str, member_id: str, epoch: int, instance_id: str | None,
                offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, om in offsets.items():
        topics.setdefault(tp.topic, []).append({
            "partition_index": tp.partition, "committed_offset": om.offset,
            "committed_leader_epoch": -1 if om.leader_epoch is None else om.leader_epoch,
            "committed_metadata": om.metadata})
    return {"group_id": group_id, "generation_id_or_member_epoch": epoch, "member_id": member_id,
            "group_instance_id": instance_id,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}


def commit_outcome(response: Mapping[str, Any], group_id: str) -> Outcome:
    codes = {p["error_code"] for t in response["topics"] for p in t["partitions"]} - {NONE}
    return _outcome(codes, f"OffsetCommit for group {group_id!r}")


def _outcome(codes: set[int], context: str) -> Outcome:
    if not codes:
        return Outcome(done=True)
    if codes & NOT_A_MEMBER:
        return Outcome(gone=True)
    if STALE_MEMBER_EPOCH in codes:
        return Outcome(stale=True)
    fatal = [c for c in codes if not is_retriable(c) and c != UNSTABLE_OFFSET_COMMIT]
    if fatal:
        return Outcome(error=BrokerError(fatal[0], context))
    return Outcome(retry=True, rediscover=bool(codes & COORDINATOR_MOVED))


def fetch_body(group_id: str, member_id: str | None, epoch: int,
               tps: list[TopicPartition]) -> dict[str, Any]:
    topics: dict[str, list[int]] = {}
    for tp in tps:
        topics.setdefault(tp.topic, []).append(tp.partition)
    listed = [{"name": name, "partition_indexes": parts} for name, parts in topics.items()]
    # Both layouts: v0-7 read the top-level fields, v8+ the batched groups (v9: member fields).
    return {"group_id": group_id, "topics": listed, "require_stable": True,
            "groups": [{"group_id": group_id, "member_id": member_id, "member_epoch": epoch,
                        "topics": listed}]}


def fetch_outcome(response: Mapping[str, Any]) -> Outcome:
    groups = response.get("groups") or [response]
    codes: set[int] = set()
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for group in groups:
        if group.get("error_code", NONE) != NONE:
            codes.add(group["error_code"])
            continue
        for topic in group["topics"]:
            for p in topic["partitions"]:
                if p["error_code"] != NONE:
                    codes.add(p["error_code"])
                elif p["committed_offset"] >= 0:
                    epoch = p.get("committed_leader_epoch", -1)
                    offsets[TopicPartition(topic["name"], p["partition_index"])] = OffsetAndMetadata(
                        p["committed_offset"], p.get("metadata") or "",
                        None if epoch is None or epoch < 0 else epoch)
    outcome = _outcome(codes, "OffsetFetch")
    outcome.offsets = offsets
    return outcome
