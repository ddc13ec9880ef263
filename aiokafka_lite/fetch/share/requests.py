"""The ShareFetch and ShareAcknowledge requests of a share group member, and reading their answers.

``ShareFetchSettings.fetch_body()`` turns a share session's plan (session.py) and the
acknowledgements going with it (ledger.py) into a ShareFetch; ``acknowledge_body()`` makes a
ShareAcknowledge. Topics go by id both ways (the share APIs have no names). No I/O here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import ERROR_CODE_BY_NAME, KafkaError, broker_error
from ...structs import TopicPartition
from .ledger import Batch
from .session import SharePlan

NOT_LEADER_OR_FOLLOWER = ERROR_CODE_BY_NAME["NOT_LEADER_OR_FOLLOWER"]
UNKNOWN_TOPIC_OR_PARTITION = ERROR_CODE_BY_NAME["UNKNOWN_TOPIC_OR_PARTITION"]
# Answers that mean "ask the metadata where the partition is now" (the answer may name the leader).
LEADER_MOVED = frozenset({NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
                          ERROR_CODE_BY_NAME["FENCED_LEADER_EPOCH"], ERROR_CODE_BY_NAME["UNKNOWN_TOPIC_ID"]})
RENEW_VERSION = 2  # ShareFetch/ShareAcknowledge v2: is_renew_ack, the RENEW type (KIP-1222)
MAX_SHARE_VERSION = 2
# share_acquire_mode (v2, KIP-1206; Java's share.acquire.mode): batch_optimized hands out whole
# batches, max_records a soft limit; record_limit acquires at most max_records.
ACQUIRE_MODES = {"batch_optimized": 0, "record_limit": 1}


@dataclass(frozen=True, slots=True)
class ShareFetchSettings:
    """What every ShareFetch of one member carries."""

    group_id: str
    member_id: str
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 52_428_800
    max_records: int = 500
    batch_size: int = 500
    acquire_mode: int = ACQUIRE_MODES["batch_optimized"]

    def fetch_body(self, plan: SharePlan, acks: Mapping[TopicPartition, list[Batch]],
                   topic_ids: Mapping[str, uuid.UUID]) -> dict[str, Any]:
        """The ShareFetch for ``plan``, with ``acks`` piggybacked (partitions of the session)."""
        partitions: dict[TopicPartition, list[Batch]] = {tp: [] for tp in sorted(plan.send)}
        partitions.update(acks)
        return {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "share_session_epoch": plan.epoch,
            "max_wait_ms": self.max_wait_ms,
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "max_records": self.max_records,
            "batch_size": self.batch_size,
            "share_acquire_mode": self.acquire_mode,
            "is_renew_ack": False,
            "topics": _topics(partitions, topic_ids),
            "forgotten_topics_data": [{"topic_id": topic_ids[topic], "partitions": parts}
                                      for topic, parts in _by_topic(plan.forget).items()],
        }

    def acknowledge_body(self, epoch: int, acks: Mapping[TopicPartition, list[Batch]],
                         topic_ids: Mapping[str, uuid.UUID], *, renew: bool) -> dict[str, Any]:
        """A ShareAcknowledge at ``epoch`` (-1 closes the session) carrying ``acks``."""
        return {"group_id": self.group_id, "member_id": self.member_id, "share_session_epoch": epoch,
                "is_renew_ack": renew, "topics": _topics(acks, topic_ids)}


def _by_topic(tps: Iterator[TopicPartition] | frozenset[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(tps):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def _topics(partitions: Mapping[TopicPartition, list[Batch]],
            topic_ids: Mapping[str, uuid.UUID]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "acknowledgement_batches": partitions[tp]})
    return [{"topic_id": topic_ids[topic], "partitions": parts} for topic, parts in by_topic.items()]


def answered_partitions(response: Mapping[str, Any], names: Mapping[uuid.UUID, str]
                        ) -> Iterator[tuple[TopicPartition, Mapping[str, Any]]]:
    """Each partition of a ShareFetch or ShareAcknowledge answer whose topic id we know."""
    for topic in response.get("responses") or ():
        name = names.get(topic["topic_id"])
        if name is None:
            continue  # not a topic we asked about (deleted and recreated meanwhile)
        for part in topic["partitions"]:
            yield TopicPartition(name, part["partition_index"]), part


def ack_outcome(code: int, what: str) -> KafkaError | None:
    """A partition's acknowledgement result as the caller sees it (None: done)."""
    return broker_error(code, what) if code else None


def as_kafka_error(exc: BaseException) -> KafkaError:
    """``exc`` as this library's error, for a result map."""
    return exc if isinstance(exc, KafkaError) else KafkaError(f"{type(exc).__name__}: {exc}")
