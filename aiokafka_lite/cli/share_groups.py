"""`groups describe` and `groups lag` for a KIP-932 share group: what kafka-share-groups.sh --describe
shows with --members and --offsets.

A share group is neither a classic nor a consumer-protocol group: ConsumerGroupDescribe and
DescribeGroups answer GROUP_ID_NOT_FOUND for it, so those commands ask here when they found no such
group. ShareGroupDescribe (key 77) gives the members, each with every partition it may fetch from
(a share group's partitions are shared: several members can be assigned the same one);
DescribeShareGroupOffsets (key 90) gives each partition's start offset, the first offset the group
has not yet delivered and completed, and from v1 (KIP-1226) its lag. A broker that answers only v0
has no lag to give: LAG is ``-`` and a note says why. That request and its answer's reading are
group/share/offsets.py's, shared with the ShareConsumer's lag refresher.

``ask_share_group`` returns None when the coordinator knows no share group of that id. It works on
the caller's Cluster, within the caller's deadline (this module imports no other command's module).
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from .._net.cluster import Cluster
from ..errors import BrokerError, UnsupportedVersionError
from ..group.share.offsets import LAG_VERSION, lag_not_available_note, start_offsets
from ..protocol.messages import SHARE_GROUP_DESCRIBE
from ..structs import TopicPartition

GROUP_ID_NOT_FOUND = 69
RETRY_SECONDS = 0.2


@dataclass
class ShareMemberView:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None
    member_epoch: int
    subscription: list[str]
    assignment: list[TopicPartition]


@dataclass
class SharePartitionView:
    topic: str
    partition: int
    start_offset: int | None  # None: the group has no start offset for it yet
    leader_epoch: int | None
    lag: int | None  # None: not reported (a v0 broker, or not known to the broker)
    members: list[str] = field(default_factory=list)  # the members assigned it (shared)


@dataclass
class ShareGroupView:
    group_id: str
    state: str
    assignor: str
    group_epoch: int
    assignment_epoch: int
    members: list[ShareMemberView]
    partitions: list[SharePartitionView]
    notes: list[str] = field(default_factory=list)  # why a figure above is missing
    lag_reported: bool = True  # False: the broker answers DescribeShareGroupOffsets v0 only
    group_type: str = "share"


def _assignment(raw: dict[str, Any]) -> list[TopicPartition]:
    # A topic deleted meanwhile has no name left, only its id.
    return sorted(TopicPartition(t["topic_name"] or str(t["topic_id"]), p)
                  for t in raw["topic_partitions"] for p in t["partitions"])


def _member(raw: dict[str, Any]) -> ShareMemberView:
    return ShareMemberView(raw["member_id"], raw["client_id"], raw["client_host"], raw["rack_id"],
                           raw["member_epoch"], sorted(raw["subscribed_topic_names"]), _assignment(raw["assignment"]))


async def _described(cluster: Cluster, node_id: int, group_id: str) -> dict[str, Any] | None:
    try:
        response = await cluster.send(node_id, SHARE_GROUP_DESCRIBE,
                                      {"group_ids": [group_id], "include_authorized_operations": False})
    except UnsupportedVersionError:
        return None  # a broker without share groups has none of this id
    group: dict[str, Any] = response["groups"][0]
    if group["error_code"] == GROUP_ID_NOT_FOUND:
        return None  # no group of this id, or one of another type
    if group["error_code"]:
        raise BrokerError(group["error_code"], f"ShareGroupDescribe {group_id!r}: {group['error_message']}")
    return group


async def ask_share_group(cluster: Cluster, group_id: str) -> ShareGroupView | None:
    """The share group ``group_id`` as its coordinator sees it; None when there is no such share group."""
    while True:  # again after a retriable error (a coordinator loading or moving), until the deadline
        try:
            node_id = await cluster.find_coordinator(group_id)
            group = await _described(cluster, node_id, group_id)
            if group is None:
                return None
            offsets, version = await start_offsets(cluster, node_id, group_id)
            break
        except BrokerError as exc:
            if not exc.retriable:
                raise
            await asyncio.sleep(RETRY_SECONDS)
    members = [_member(m) for m in group["members"]]
    owners: dict[TopicPartition, list[str]] = {}
    for m in members:
        for tp in m.assignment:
            owners.setdefault(tp, []).append(m.member_id)
    partitions = [SharePartitionView(tp.topic, tp.partition, *offsets.get(tp, (None, None, None)), owners.get(tp, []))
                  for tp in sorted(set(owners) | set(offsets))]
    lag_reported = version >= LAG_VERSION
    notes = [] if lag_reported else [lag_not_available_note(version)]
    return ShareGroupView(group_id, group["group_state"], group["assignor_name"], group["group_epoch"],
                          group["assignment_epoch"], members, partitions, notes, lag_reported)


def _shown(value: object) -> str:
    return "-" if value is None else str(value)


def _partition_list(tps: list[TopicPartition]) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in tps) or "-"


def render_text(view: ShareGroupView, out: TextIO) -> None:
    out.write(f"group {view.group_id}: state {view.state}, share group (KIP-932), assignor {view.assignor or '-'}, "
              f"group epoch {view.group_epoch}, assignment epoch {view.assignment_epoch}, "
              f"{len(view.members)} member(s)\n\n")
    out.write("MEMBER  CLIENT-ID  HOST  EPOCH  SUBSCRIPTION  ASSIGNMENT\n")
    for m in view.members:
        out.write(f"{m.member_id}  {m.client_id or '-'}  {m.client_host or '-'}  {m.member_epoch}  "
                  f"{','.join(m.subscription) or '-'}  {_partition_list(m.assignment)}\n")
    out.write("\nTOPIC  PARTITION  START-OFFSET  LAG  MEMBERS\n")
    for p in view.partitions:
        members = ",".join(p.members) or "-"
        out.write(f"{p.topic}  {p.partition}  {_shown(p.start_offset)}  {_shown(p.lag)}  {members}\n")
    for note in view.notes:
        out.write(f"* {note}\n")


def _json_partitions(tps: list[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p} for t, p in tps]


def render_json(view: ShareGroupView, out: TextIO) -> None:
    data = asdict(view)
    for member in data["members"]:
        member["assignment"] = _json_partitions(member["assignment"])
    out.write(json.dumps(data, indent=2) + "\n")


def total_lag(view: ShareGroupView) -> int | None:
    """The sum of the partitions' lags that are known; None when the broker reports no lag."""
    return sum(p.lag for p in view.partitions if p.lag is not None) if view.lag_reported else None


def lag_json(view: ShareGroupView) -> dict[str, Any]:
    return {"group_id": view.group_id, "group_type": view.group_type, "state": view.state,
            "members": len(view.members), "total_lag": total_lag(view), "notes": view.notes,
            "partitions": [{"topic": p.topic, "partition": p.partition, "start_offset": p.start_offset,
                            "lag": p.lag} for p in view.partitions]}


def render_lag_text(view: ShareGroupView, out: TextIO) -> None:
    out.write("TOPIC  PARTITION  START-OFFSET  LAG\n")
    for p in view.partitions:
        out.write(f"{p.topic}  {p.partition}  {_shown(p.start_offset)}  {_shown(p.lag)}\n")
    out.write(f"TOTAL LAG  {_shown(total_lag(view))}  (share group {view.group_id}, "
              f"state {view.state}, {len(view.members)} member(s))\n")
    for note in view.notes:
        out.write(f"* {note}\n")


def write_view(view: ShareGroupView, output_format: str, *, lag: bool) -> None:
    """``groups describe`` (lag False) or ``groups lag`` output of a share group on stdout."""
    if lag and output_format == "json":
        sys.stdout.write(json.dumps(lag_json(view), indent=2) + "\n")
    elif lag:
        render_lag_text(view, sys.stdout)
    else:
        (render_json if output_format == "json" else render_text)(view, sys.stdout)
