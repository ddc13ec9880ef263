"""OffsetForLeaderEpoch for the consumer: where the leader's log says an epoch ends (KIP-320).

A Fetch v12+ carries the last fetched epoch and the leader answers a divergence itself. A broker
with an older Fetch cannot, so after a leader change the fetcher asks this request before
fetching on: the answer goes through ``log_truncation.check_divergence`` like a diverging epoch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from ..errors import UnsupportedVersionError
from ..protocol.messages import OFFSET_FOR_LEADER_EPOCH
from ..structs import TopicPartition
from .offset_lookup import ConnectionLike

# Before v3 a request without replica_id counts as a debug consumer that may read past the high
# watermark: its answer could name offsets a consumer must not see (Java needs v3 too).
MIN_CONSUMER_VERSION = 3


class EpochEnd(NamedTuple):
    error_code: int
    leader_epoch: int  # the largest epoch up to the one asked that the leader has (-1: none)
    end_offset: int  # where that epoch ends (-1: unknown)


def supported(conn: ConnectionLike) -> bool:
    """Whether the broker can answer a consumer's OffsetForLeaderEpoch."""
    try:
        return conn.version_for(OFFSET_FOR_LEADER_EPOCH) >= MIN_CONSUMER_VERSION
    except UnsupportedVersionError:
        return False


async def epoch_ends(conn: ConnectionLike, asked: Mapping[TopicPartition, tuple[int, int]],
                     timeout: float) -> dict[TopicPartition, EpochEnd]:
    """Ask where each partition's epoch ends: ``asked`` maps a partition to (current leader
    epoch from metadata, the epoch of the last consumed record)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, (current, epoch) in asked.items():
        topics.setdefault(tp.topic, []).append(
            {"partition": tp.partition, "current_leader_epoch": current, "leader_epoch": epoch})
    version = conn.version_for(OFFSET_FOR_LEADER_EPOCH)
    body = {"replica_id": -1, "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}
    response = await conn.send(OFFSET_FOR_LEADER_EPOCH, version, body, timeout=timeout)
    answers: dict[TopicPartition, EpochEnd] = {}
    for topic in response["topics"]:
        for part in topic["partitions"]:
            tp = TopicPartition(topic["topic"], part["partition"])
            if tp in asked:
                answers[tp] = EpochEnd(part["error_code"], part["leader_epoch"], part["end_offset"])
    return answers
