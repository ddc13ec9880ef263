"""A share group's start offsets and lag, as its coordinator reports them (DescribeShareGroupOffsets,
key 90): each partition's start offset (the first offset the group has not yet delivered and
completed), leader epoch and, from v1 (KIP-1226, Apache Kafka 4.2 and later), its lag: the records
from the start offset to the end of the partition not yet acknowledged. A v0 answer has no lag.

Read by the ShareConsumer's lag refresher (share/lag.py) and by ``groups describe`` / ``groups lag``
(cli/share_groups.py): one request and one reading of its answer for both.
"""

from __future__ import annotations

from typing import Any

from ..._net.cluster import Cluster
from ..._net.connection import DEFAULT, Timeout
from ...errors import BrokerError
from ...protocol.messages import DESCRIBE_SHARE_GROUP_OFFSETS
from ...structs import TopicPartition

LAG_VERSION = 1  # DescribeShareGroupOffsets v1 (KIP-1226) reports each partition's lag

# Per partition (start offset, leader epoch, lag), each None where not known.
StartOffsets = dict[TopicPartition, tuple[int | None, int | None, int | None]]


def lag_not_available_note(version: int) -> str:
    return (f"LAG is not available: the broker answers DescribeShareGroupOffsets v{version} only, and a "
            f"partition's lag is reported from v{LAG_VERSION} (KIP-1226, Apache Kafka 4.2 and later)")


async def start_offsets(cluster: Cluster, node_id: int, group_id: str, *, timeout: Timeout = DEFAULT,
                        lag_only: bool = False) -> tuple[StartOffsets, int]:
    """Every partition the group has a share-partition state for, from its coordinator ``node_id``,
    and the version asked; each of the two steps (the connection, the request) within ``timeout``.
    A partition's error raises BrokerError. ``lag_only`` (the refresher's): a broker below v1 is not
    asked (the offsets come back empty with its version), and a partition with an error is left out
    (its figures unknown) rather than failing the others."""
    connection = await cluster.connection(node_id, timeout=timeout)
    version = connection.version_for(DESCRIBE_SHARE_GROUP_OFFSETS)
    if lag_only and version < LAG_VERSION:
        return {}, version
    response = await cluster.send(node_id, DESCRIBE_SHARE_GROUP_OFFSETS,
                                  {"groups": [{"group_id": group_id, "topics": None}]},
                                  timeout=timeout, max_version=version)
    return _read(response["groups"][0], group_id, strict=not lag_only), version


def _read(group: dict[str, Any], group_id: str, strict: bool) -> StartOffsets:
    if group["error_code"]:
        raise BrokerError(group["error_code"], f"DescribeShareGroupOffsets {group_id!r}: {group['error_message']}")
    offsets: StartOffsets = {}
    for topic in group["topics"]:
        for p in topic["partitions"]:
            where = f"{topic['topic_name']}-{p['partition_index']}"
            if p["error_code"] and not strict:
                continue
            if p["error_code"]:
                raise BrokerError(p["error_code"],
                                  f"DescribeShareGroupOffsets {group_id!r} {where}: {p['error_message']}")
            offsets[TopicPartition(topic["topic_name"], p["partition_index"])] = (
                None if p["start_offset"] < 0 else p["start_offset"],
                None if p["leader_epoch"] < 0 else p["leader_epoch"],
                None if p["lag"] < 0 else p["lag"])
    return offsets
