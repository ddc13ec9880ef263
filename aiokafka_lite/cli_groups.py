"""`aiokafka-lite groups describe GROUP`: members, what each was assigned, committed offsets and lag.

Built on the I/O shell and the protocol schemas, the consumer is not involved (it never asks
about other members): DescribeGroups to the coordinator gives the members with their
ConsumerProtocol subscription and assignment bytes, OffsetFetch the committed offsets, ListOffsets
the log-end offsets; lag = end - committed. On a broker known to misreport log-end offsets (Tansu,
see ``testing.tansu.DEVIATIONS``) END and LAG are starred and a note says why they are not to be trusted.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from ._net.broker_identity import is_tansu
from ._net.cluster import Cluster
from ._net.options import ConnectionOptions
from .cli_run import EXIT_OK, first_of, run_command
from .config import ConsumerConfig
from .consumer.offsets import OffsetLookup
from .errors import BrokerError, KafkaError, ProtocolDecodeError
from .protocol.consumer_protocol import decode_assignment, decode_subscription
from .protocol.messages import DESCRIBE_GROUPS, OFFSET_FETCH
from .structs import TopicPartition
from .testing.tansu import DEVIATIONS

# OffsetFetch v10 names topics by id only; this tool works with names.
OFFSET_FETCH_MAX_VERSION = 9
TIMEOUT_SECONDS = 30.0


@dataclass
class MemberView:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    subscription: list[str] = field(default_factory=list)
    assignment: list[TopicPartition] = field(default_factory=list)


@dataclass
class PartitionView:
    topic: str
    partition: int
    committed: int | None
    end: int | None
    lag: int | None
    member_id: str | None


@dataclass
class GroupView:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberView]
    partitions: list[PartitionView]
    notes: list[str] = field(default_factory=list)  # why figures above may be wrong


def tansu_end_offsets_note() -> str:
    deviation = DEVIATIONS["list_offsets_latest"]
    return (f"the broker is Tansu, so END and LAG may be too low: its {deviation.differs} "
            f"(aiokafka_lite.testing.tansu.DEVIATIONS[{deviation.name!r}])")


def _member(raw: dict[str, Any], consumer_protocol: bool) -> MemberView:
    member = MemberView(raw["member_id"], raw.get("group_instance_id"), raw["client_id"], raw["client_host"])
    # Only "consumer" groups carry ConsumerProtocol bytes; while rebalancing the assignment is empty.
    if consumer_protocol and raw["member_metadata"]:
        member.subscription = sorted(decode_subscription(raw["member_metadata"]).topics)
    if consumer_protocol and raw["member_assignment"]:
        member.assignment = sorted(decode_assignment(raw["member_assignment"]).partitions())
    return member


async def _describe(cluster: Cluster, node_id: int, group_id: str) -> dict[str, Any]:
    response = await cluster.send(node_id, DESCRIBE_GROUPS, {"groups": [group_id],
                                                             "include_authorized_operations": False})
    group: dict[str, Any] = response["groups"][0]
    if group["error_code"]:
        raise BrokerError(group["error_code"], f"DescribeGroups {group_id!r}")
    return group


async def _committed(cluster: Cluster, node_id: int, group_id: str) -> dict[TopicPartition, int]:
    # topics=None asks for every partition the group has committed (v2+); both layouts are filled
    # because v8+ reads the batched `groups` list.
    body = {"group_id": group_id, "topics": None, "require_stable": False,
            "groups": [{"group_id": group_id, "topics": None}]}
    response = await cluster.send(node_id, OFFSET_FETCH, body, max_version=OFFSET_FETCH_MAX_VERSION)
    committed: dict[TopicPartition, int] = {}
    for group in response.get("groups") or [response]:
        if group.get("error_code"):
            raise BrokerError(group["error_code"], f"OffsetFetch {group_id!r}")
        for topic in group["topics"]:
            for p in topic["partitions"]:
                if p["error_code"] == 0 and p["committed_offset"] >= 0:
                    committed[TopicPartition(topic["name"], p["partition_index"])] = p["committed_offset"]
    return committed


async def _end_offsets(cluster: Cluster, tps: set[TopicPartition]) -> dict[TopicPartition, int]:
    if not tps:
        return {}
    await cluster.refresh_metadata(sorted({tp.topic for tp in tps}))
    return await OffsetLookup(cluster).end_offsets(tps, timeout=TIMEOUT_SECONDS)


def _partitions(members: list[MemberView], committed: dict[TopicPartition, int],
                ends: dict[TopicPartition, int]) -> list[PartitionView]:
    owners = {tp: m.member_id for m in members for tp in m.assignment}
    rows = []
    for tp in sorted(set(owners) | set(committed)):
        offset, end = committed.get(tp), ends.get(tp)
        lag = None if offset is None or end is None else max(end - offset, 0)
        rows.append(PartitionView(tp.topic, tp.partition, offset, end, lag, owners.get(tp)))
    return rows


async def describe_group(bootstrap: str, group_id: str, timeout: float = TIMEOUT_SECONDS) -> GroupView:
    """Everything ``groups describe`` shows, from one connection to the cluster."""
    config = ConsumerConfig.from_kwargs(bootstrap_servers=bootstrap, client_id="aiokafka-lite-cli")
    cluster = Cluster(ConnectionOptions.from_settings(config), config.bootstrap_servers)
    try:
        async with asyncio.timeout(timeout):
            await cluster.bootstrap()
            node_id = await cluster.find_coordinator(group_id)
            raw = await _describe(cluster, node_id, group_id)
            consumer_protocol = raw["protocol_type"] == "consumer"
            members = [_member(m, consumer_protocol) for m in raw["members"]]
            committed = await _committed(cluster, node_id, group_id)
            owned = {tp for m in members for tp in m.assignment}
            ends = await _end_offsets(cluster, owned | set(committed))
            notes = [tansu_end_offsets_note()] if ends and await is_tansu(cluster) else []
    finally:
        await cluster.close()
    return GroupView(group_id, raw["group_state"], raw["protocol_type"], raw["protocol_data"], members,
                     _partitions(members, committed, ends), notes)


def _shown(value: object) -> str:
    return "-" if value is None else str(value)


def render_text(view: GroupView, out: TextIO) -> None:
    out.write(f"group {view.group_id}: state {view.state}, protocol {view.protocol_type or '-'}/"
              f"{view.protocol or '-'}, {len(view.members)} member(s)\n\n")
    out.write("MEMBER  CLIENT-ID  HOST  INSTANCE-ID  SUBSCRIPTION  ASSIGNMENT\n")
    for m in view.members:
        assigned = ",".join(f"{tp.topic}-{tp.partition}" for tp in m.assignment) or "-"
        out.write(f"{m.member_id}  {m.client_id}  {m.client_host}  {_shown(m.group_instance_id)}  "
                  f"{','.join(m.subscription) or '-'}  {assigned}\n")
    star = "*" if view.notes else ""
    out.write(f"\nTOPIC  PARTITION  COMMITTED  END{star}  LAG{star}  MEMBER\n")
    for p in view.partitions:
        out.write(f"{p.topic}  {p.partition}  {_shown(p.committed)}  {_shown(p.end)}  {_shown(p.lag)}  "
                  f"{_shown(p.member_id)}\n")
    for note in view.notes:
        out.write(f"* {note}\n")


def render_json(view: GroupView, out: TextIO) -> None:
    data = asdict(view)
    for member in data["members"]:
        member["assignment"] = [{"topic": t, "partition": p} for t, p in member["assignment"]]
    out.write(json.dumps(data, indent=2) + "\n")


def run_describe(group_id: str, bootstrap: str, *, output_format: str) -> int:
    async def command(stop: asyncio.Event) -> int:
        views: list[GroupView] = []

        async def describe() -> None:
            views.append(await describe_group(bootstrap, group_id))

        try:
            if not await first_of(describe(), stop):
                return EXIT_OK
        except ProtocolDecodeError as exc:
            raise KafkaError(f"group {group_id!r} has member data that is not the consumer protocol: {exc}") from exc
        view = views[0]
        (render_json if output_format == "json" else render_text)(view, sys.stdout)
        return EXIT_OK

    return run_command(command)
