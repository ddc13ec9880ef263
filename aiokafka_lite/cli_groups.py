"""`aiokafka-lite groups describe GROUP`: members, what each was assigned, committed offsets and lag.

Built on the I/O shell and the protocol schemas, the consumer is not involved (it never asks
about other members): ``cli_group_members`` gets the members from ConsumerGroupDescribe (KIP-848
"consumer" groups: epochs, current and target assignments) or DescribeGroups (classic groups:
ConsumerProtocol subscription and assignment bytes), choosing as Java's admin client does;
OffsetFetch gives the committed offsets, ListOffsets the log-end offsets; lag = end - committed.
On a broker known to misreport log-end offsets (Tansu, see ``testing.tansu.DEVIATIONS``) END and
LAG are starred and a note says why they are not to be trusted.
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
from .cli_group_members import MemberView, describe_members
from .cli_run import EXIT_OK, first_of, run_command
from .config import ConsumerConfig
from .consumer.offsets import OffsetLookup
from .errors import BrokerError, KafkaError, ProtocolDecodeError
from .protocol.messages import OFFSET_FETCH
from .structs import TopicPartition
from .testing.tansu import DEVIATIONS

# OffsetFetch v10 names topics by id only; this tool works with names.
OFFSET_FETCH_MAX_VERSION = 9
TIMEOUT_SECONDS = 30.0


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
    group_type: str  # "consumer" (KIP-848) or "classic"
    state: str
    protocol_type: str
    protocol: str  # the assignor: agreed by classic members, or the broker's for consumer groups
    members: list[MemberView]
    partitions: list[PartitionView]
    group_epoch: int | None = None  # consumer groups only
    assignment_epoch: int | None = None
    notes: list[str] = field(default_factory=list)  # why figures above may be wrong


def tansu_end_offsets_note() -> str:
    deviation = DEVIATIONS["list_offsets_latest"]
    return (f"the broker is Tansu, so END and LAG may be too low: its {deviation.differs} "
            f"(aiokafka_lite.testing.tansu.DEVIATIONS[{deviation.name!r}])")


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
            group = await describe_members(cluster, node_id, group_id)
            committed = await _committed(cluster, node_id, group_id)
            owned = {tp for m in group.members for tp in m.assignment}
            ends = await _end_offsets(cluster, owned | set(committed))
            notes = [tansu_end_offsets_note()] if ends and await is_tansu(cluster) else []
    except TimeoutError as exc:
        unreached = cluster.unreachable(timeout)  # each bootstrap server's last failure
        if unreached is None:
            raise
        raise unreached from exc
    finally:
        await cluster.close()
    return GroupView(group_id, group.group_type, group.state, group.protocol_type, group.assignor,
                     group.members, _partitions(group.members, committed, ends), group.group_epoch,
                     group.assignment_epoch, notes)


def _shown(value: object) -> str:
    return "-" if value is None else str(value)


def _partition_list(tps: list[TopicPartition] | None) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in tps or []) or "-"


def _header(view: GroupView) -> str:
    if view.group_type == "consumer":
        kind = (f"consumer protocol (KIP-848), assignor {view.protocol or '-'}, group epoch "
                f"{_shown(view.group_epoch)}, assignment epoch {_shown(view.assignment_epoch)}")
    else:
        kind = f"protocol {view.protocol_type or '-'}/{view.protocol or '-'}"
    return f"group {view.group_id}: state {view.state}, {kind}, {len(view.members)} member(s)\n"


def _member_rows(view: GroupView) -> list[str]:
    consumer = view.group_type == "consumer"
    rows = ["MEMBER  CLIENT-ID  HOST  INSTANCE-ID  " + ("EPOCH  " if consumer else "") + "SUBSCRIPTION  ASSIGNMENT"
            + ("  TARGET-ASSIGNMENT" if consumer else "")]
    for m in view.members:
        subscribed = ",".join(m.subscription) + (f"/{m.subscription_regex}/" if m.subscription_regex else "")
        row = f"{m.member_id}  {m.client_id}  {m.client_host}  {_shown(m.group_instance_id)}  "
        row += f"{_shown(m.member_epoch)}  " if consumer else ""
        row += f"{subscribed or '-'}  {_partition_list(m.assignment)}"
        row += f"  {_partition_list(m.target_assignment)}" if consumer else ""
        rows.append(row)
    return rows


def render_text(view: GroupView, out: TextIO) -> None:
    out.write(_header(view) + "\n")
    out.write("".join(f"{row}\n" for row in _member_rows(view)))
    star = "*" if view.notes else ""
    out.write(f"\nTOPIC  PARTITION  COMMITTED  END{star}  LAG{star}  MEMBER\n")
    for p in view.partitions:
        out.write(f"{p.topic}  {p.partition}  {_shown(p.committed)}  {_shown(p.end)}  {_shown(p.lag)}  "
                  f"{_shown(p.member_id)}\n")
    for note in view.notes:
        out.write(f"* {note}\n")


def _json_partitions(tps: list[tuple[str, int]] | None) -> list[dict[str, Any]] | None:
    return None if tps is None else [{"topic": t, "partition": p} for t, p in tps]


def render_json(view: GroupView, out: TextIO) -> None:
    data = asdict(view)
    for member in data["members"]:
        member["assignment"] = _json_partitions(member["assignment"])
        member["target_assignment"] = _json_partitions(member["target_assignment"])
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
