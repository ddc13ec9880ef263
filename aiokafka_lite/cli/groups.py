"""`aiokafka-lite groups describe GROUP`: members, what each was assigned, committed offsets and lag.

Built on the I/O shell and the protocol schemas, the consumer is not involved (it never asks
about other members): ``group_members`` gets the members from ConsumerGroupDescribe (KIP-848
"consumer" groups: epochs, current and target assignments) or DescribeGroups (classic groups:
ConsumerProtocol subscription and assignment bytes), choosing as Java's admin client does;
OffsetFetch gives the committed offsets, ListOffsets the log-end offsets; lag = end - committed.
On a broker known to misreport log-end offsets (Tansu, see ``testing.tansu.DEVIATIONS``) END and
LAG are starred and a note says why they are not to be trusted; what a broker leaves unreported
(Tansu: a classic member's client id, host, subscription and assignment) is shown as ``?``, with a note.

A group the broker does not know as a classic or consumer group, and that has no committed offsets,
may be a KIP-932 share group: ``share_groups`` describes it then (``GroupView.share``). Otherwise it
is not described: the command says ``group 'G' does not exist`` and exits 1, as
kafka-consumer-groups.sh does for a Dead group.
Every failure ends as one line on stderr: errors other than Kafka's are reported, not raised.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from .._net.broker_identity import is_tansu
from .._net.cluster import Cluster
from .._net.options import ConnectionOptions
from ..config import ConsumerConfig
from ..errors import BrokerError, KafkaError, KafkaTimeoutError, ProtocolDecodeError
from ..fetch.offset_lookup import OffsetLookup
from ..protocol.messages import OFFSET_FETCH
from ..structs import TopicPartition
from ..testing.tansu import DEVIATIONS
from .group_members import GroupMembers, MemberView, describe_members
from .run import EXIT_KAFKA_ERROR, EXIT_OK, run_step_command
from .share_groups import ShareGroupView, ask_share_group, write_view

# OffsetFetch v10 names topics by id only; this tool works with names.
OFFSET_FETCH_MAX_VERSION = 9
TIMEOUT_SECONDS = 30.0
# Between tries after a retriable error (the coordinator still loading, or moving).
RETRY_SECONDS = 0.2
NOT_REPORTED = "?"


@dataclass
class PartitionView:
    topic: str
    partition: int
    committed: int | None
    end: int | None
    lag: int | None
    member_id: str | None
    owner_known: bool = True  # False: members' assignments were not reported, so the owner is unknown


@dataclass
class GroupView:
    group_id: str
    group_type: str  # "consumer" (KIP-848) or "classic"
    state: str
    protocol_type: str
    protocol: str | None  # the assignor: agreed by classic members (None: not reported), or the broker's
    members: list[MemberView]
    partitions: list[PartitionView]
    group_epoch: int | None = None  # consumer groups only
    assignment_epoch: int | None = None
    notes: list[str] = field(default_factory=list)  # why figures above may be wrong
    exists: bool = True  # False: the broker knows no such group and it has no committed offsets
    share: ShareGroupView | None = None  # a share group (KIP-932): not exists, and described here instead


def not_reported_note() -> str:
    return (f"{NOT_REPORTED} marks what the broker did not report (it answered DescribeGroups with the "
            "field empty), not an empty value")


def _reports_everything(group: GroupMembers) -> bool:
    return group.assignor is not None and all(
        None not in (m.client_id, m.client_host) and m.subscription is not None and m.assignment is not None
        for m in group.members)


def tansu_end_offsets_note() -> str:
    deviation = DEVIATIONS["list_offsets_latest"]
    return (f"the broker is Tansu, so END and LAG may be too low: its {deviation.differs} "
            f"(aiokafka_lite.testing.tansu.DEVIATIONS[{deviation.name!r}])")


async def committed_offsets(cluster: Cluster, node_id: int, group_id: str) -> dict[TopicPartition, int]:
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
    owners = {tp: m.member_id for m in members for tp in m.assignment or ()}
    owners_known = all(m.assignment is not None for m in members)
    rows = []
    for tp in sorted(set(owners) | set(committed)):
        offset, end = committed.get(tp), ends.get(tp)
        lag = None if offset is None or end is None else max(end - offset, 0)
        rows.append(PartitionView(tp.topic, tp.partition, offset, end, lag, owners.get(tp),
                                  tp in owners or owners_known))
    return rows


def describe_config(bootstrap: str) -> ConsumerConfig:
    """The settings ``groups describe`` connects with; a ConfigError (a bad ``-b``) is a usage error."""
    return ConsumerConfig.from_properties({"bootstrap.servers": bootstrap, "client.id": "aiokafka-lite-cli",
                                           "default.api.timeout.ms": int(TIMEOUT_SECONDS * 1000)})


async def members_and_offsets(cluster: Cluster, group_id: str,
                               retried: list[BrokerError]) -> tuple[GroupMembers, dict[TopicPartition, int]]:
    """Ask the coordinator, again after a retriable error (as Java's admin client does, appending it to
    ``retried``) until the caller's deadline: a coordinator still loading, or one that moved."""
    while True:
        try:
            node_id = await cluster.find_coordinator(group_id)
            return (await describe_members(cluster, node_id, group_id),
                    await committed_offsets(cluster, node_id, group_id))
        except BrokerError as exc:
            if not exc.retriable:
                raise
            retried.append(exc)
            await asyncio.sleep(RETRY_SECONDS)


async def describe_group(bootstrap: str, group_id: str, timeout: float = TIMEOUT_SECONDS) -> GroupView:
    """Everything ``groups describe`` shows, from one connection to the cluster.

    Lapsed ``timeout``: KafkaTimeoutError naming the step (the bootstrap's own error says why each
    server could not be reached)."""
    config = describe_config(bootstrap)
    cluster = Cluster(ConnectionOptions.from_settings(config), config.bootstrap_servers)
    deadline = asyncio.get_running_loop().time() + timeout
    step = f"asking the coordinator of group {group_id!r}"
    retried: list[BrokerError] = []
    try:
        # Outside the deadline's scope, so that its own timeout error, which says why, is the one raised.
        await cluster.bootstrap(timeout=timeout)
        async with asyncio.timeout_at(deadline):
            group, committed = await members_and_offsets(cluster, group_id, retried)
            if not group.known and not committed:
                step = f"asking the coordinator of group {group_id!r} about a share group"
                share = await ask_share_group(cluster, group_id)
                if share is not None:
                    return GroupView(group_id, "share", share.state, "share", share.assignor, [], [],
                                     exists=False, share=share)
            owned = {tp for m in group.members for tp in m.assignment or ()}
            step = "looking up the end offsets"
            ends = await _end_offsets(cluster, owned | set(committed))
            notes = [tansu_end_offsets_note()] if ends and await is_tansu(cluster) else []
    except TimeoutError as exc:
        if isinstance(exc, KafkaError):
            raise
        last = f" (last answer: {retried[-1]}, {len(retried)} tries)" if retried else ""
        raise KafkaTimeoutError(f"{step} did not complete within {timeout:g} s{last}") from exc
    finally:
        await cluster.close()
    if not _reports_everything(group):
        notes.insert(0, not_reported_note())
    return GroupView(group_id, group.group_type, group.state, group.protocol_type, group.assignor,
                     group.members, _partitions(group.members, committed, ends), group.group_epoch,
                     group.assignment_epoch, notes, exists=group.known or bool(committed))


def _shown(value: object) -> str:
    return "-" if value is None else str(value)


def _reported(value: str | None) -> str:
    return NOT_REPORTED if value is None else value or "-"


def _partition_list(tps: list[TopicPartition] | None) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in tps or []) or "-"


def _subscription(m: MemberView) -> str:
    if m.subscription is None:
        return NOT_REPORTED
    subscribed = ",".join(m.subscription) + (f"/{m.subscription_regex}/" if m.subscription_regex else "")
    return subscribed or "-"


def _header(view: GroupView) -> str:
    if view.group_type == "consumer":
        kind = (f"consumer protocol (KIP-848), assignor {view.protocol or '-'}, group epoch "
                f"{_shown(view.group_epoch)}, assignment epoch {_shown(view.assignment_epoch)}")
    else:
        kind = f"protocol {view.protocol_type or '-'}/{_reported(view.protocol)}"
    return f"group {view.group_id}: state {view.state}, {kind}, {len(view.members)} member(s)\n"


def _member_rows(view: GroupView) -> list[str]:
    consumer = view.group_type == "consumer"
    rows = ["MEMBER  CLIENT-ID  HOST  INSTANCE-ID  " + ("EPOCH  " if consumer else "") + "SUBSCRIPTION  ASSIGNMENT"
            + ("  TARGET-ASSIGNMENT" if consumer else "")]
    for m in view.members:
        row = f"{m.member_id}  {_reported(m.client_id)}  {_reported(m.client_host)}  {_shown(m.group_instance_id)}  "
        row += f"{_shown(m.member_epoch)}  " if consumer else ""
        assignment = NOT_REPORTED if m.assignment is None else _partition_list(m.assignment)
        row += f"{_subscription(m)}  {assignment}"
        row += f"  {_partition_list(m.target_assignment)}" if consumer else ""
        rows.append(row)
    return rows


def render_text(view: GroupView, out: TextIO) -> None:
    out.write(_header(view) + "\n")
    out.write("".join(f"{row}\n" for row in _member_rows(view)))
    star = "*" if view.notes else ""
    out.write(f"\nTOPIC  PARTITION  COMMITTED  END{star}  LAG{star}  MEMBER\n")
    for p in view.partitions:
        owner = _shown(p.member_id) if p.owner_known else NOT_REPORTED
        out.write(f"{p.topic}  {p.partition}  {_shown(p.committed)}  {_shown(p.end)}  {_shown(p.lag)}  {owner}\n")
    for note in view.notes:
        mark = "" if note.startswith(NOT_REPORTED) else "* "
        out.write(f"{mark}{note}\n")


def _json_partitions(tps: list[tuple[str, int]] | None) -> list[dict[str, Any]] | None:
    return None if tps is None else [{"topic": t, "partition": p} for t, p in tps]


def render_json(view: GroupView, out: TextIO) -> None:
    data = asdict(view)
    del data["exists"]  # a group that does not exist is not rendered
    for member in data["members"]:
        member["assignment"] = _json_partitions(member["assignment"])
        member["target_assignment"] = _json_partitions(member["target_assignment"])
    out.write(json.dumps(data, indent=2) + "\n")


def run_describe(group_id: str, bootstrap: str, *, output_format: str) -> int:
    async def work() -> int:
        try:
            view = await describe_group(bootstrap, group_id)
        except ProtocolDecodeError as exc:
            raise KafkaError(f"group {group_id!r} has member data that is not the consumer protocol: {exc}") from exc
        if view.share is not None:
            write_view(view.share, output_format, lag=False)
            return EXIT_OK
        if not view.exists:
            print(f"aiokafka-lite: group {group_id!r} does not exist", file=sys.stderr)
            return EXIT_KAFKA_ERROR
        (render_json if output_format == "json" else render_text)(view, sys.stdout)
        return EXIT_OK

    return run_step_command(f"describing group {group_id!r}", work)
