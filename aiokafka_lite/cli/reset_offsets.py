"""`aiokafka-lite groups reset-offsets GROUP --topic T MODE [--execute]`: kafka-consumer-groups.sh
--reset-offsets, for classic and consumer-protocol (KIP-848) groups alike, and kafka-share-groups.sh
--reset-offsets for share groups (KIP-932).

A dry run unless ``--execute``: the plan (topic, partition, committed offset, new offset) is printed
either way. The group must be inactive (state Empty: no member), as Kafka's tool requires; otherwise
the command refuses, naming the state and the members. Applying is one OffsetCommit to the group's
coordinator as an admin commits: generation (or member epoch) -1, an empty member id and no group
instance id, which the broker accepts only while the group has no member. The planning itself
(clamping, shifting, the time's fallback to the log end) is ``reset_plan``.

A share group has no committed offsets but a start offset per partition (DescribeShareGroupOffsets):
the plan starts from those, and applying it is one AlterShareGroupOffsets, which the broker refuses
with NON_EMPTY_GROUP while the group has a member.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from .._net.broker_identity import is_tansu
from .._net.cluster import Cluster
from ..errors import BrokerError
from ..fetch.offset_lookup import OffsetLookup
from ..protocol.messages import ALTER_SHARE_GROUP_OFFSETS, OFFSET_COMMIT
from ..structs import TopicPartition
from .group_admin import INACTIVE_STATES, admin_cluster, bounded, existing_group, topic_partitions
from .groups import TIMEOUT_SECONDS, tansu_end_offsets_note
from .reset_plan import PlanRow, ResetMode, plan_reset
from .run import EXIT_OK, CommandFailed, run_step_command

# OffsetCommit v10 names topics by id only; this tool works with names.
OFFSET_COMMIT_MAX_VERSION = 9
UNKNOWN_MEMBER_ID = 25
NON_EMPTY_GROUP = 68
ADMIN_GENERATION = -1  # "not a member": the broker checks only that the group is empty


@dataclass
class ResetResult:
    group_id: str
    group_type: str
    state: str
    mode: str
    executed: bool
    partitions: list[PlanRow]
    notes: list[str] = field(default_factory=list)  # why the plan may be wrong


async def _lookups(cluster: Cluster, mode: ResetMode, tps: list[TopicPartition]
                   ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int], dict[TopicPartition, int | None]]:
    lookup = OffsetLookup(cluster)
    starts = await lookup.beginning_offsets(tps, timeout=None) if mode.needs_start else {}
    ends = await lookup.end_offsets(tps, timeout=None) if mode.needs_end else {}
    by_time: dict[TopicPartition, int | None] = {}
    if mode.name == "to-datetime":
        assert mode.value is not None
        found = await lookup.offsets_for_times(dict.fromkeys(tps, mode.value), timeout=None)
        by_time = {tp: None if hit is None else hit.offset for tp, hit in found.items()}
    return starts, ends, by_time


def commit_body(group_id: str, rows: list[PlanRow]) -> dict[str, Any]:
    """The OffsetCommit an admin sends: no generation, no member, no instance id."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        topics.setdefault(row.topic, []).append({"partition_index": row.partition, "committed_offset": row.new,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""})
    return {"group_id": group_id, "generation_id_or_member_epoch": ADMIN_GENERATION, "member_id": "",
            "group_instance_id": None, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


async def commit_plan(cluster: Cluster, group_id: str, rows: list[PlanRow]) -> None:
    node_id = await cluster.find_coordinator(group_id)
    response = await cluster.send(node_id, OFFSET_COMMIT, commit_body(group_id, rows),
                                  max_version=OFFSET_COMMIT_MAX_VERSION)
    for topic in response["topics"]:
        for p in topic["partitions"]:
            if p["error_code"]:
                raise BrokerError(p["error_code"], f"OffsetCommit {group_id!r} {topic['name']}-{p['partition_index']}")


async def alter_share_plan(cluster: Cluster, group_id: str, rows: list[PlanRow]) -> None:
    """Set a share group's start offsets to the plan's NEW-OFFSET (AlterShareGroupOffsets)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        topics.setdefault(row.topic, []).append({"partition_index": row.partition, "start_offset": row.new})
    node_id = await cluster.find_coordinator(group_id)
    response = await cluster.send(node_id, ALTER_SHARE_GROUP_OFFSETS, {
        "group_id": group_id, "topics": [{"topic_name": t, "partitions": ps} for t, ps in topics.items()]})
    if response["error_code"]:
        raise BrokerError(response["error_code"], f"AlterShareGroupOffsets {group_id!r}: {response['error_message']}")
    for topic in response["responses"]:
        for p in topic["partitions"]:
            if p["error_code"]:
                raise BrokerError(p["error_code"], f"AlterShareGroupOffsets {group_id!r} "
                                  f"{topic['topic_name']}-{p['partition_index']}: {p['error_message']}")


async def _apply(cluster: Cluster, group_id: str, rows: list[PlanRow], share: bool) -> None:
    try:
        await (alter_share_plan if share else commit_plan)(cluster, group_id, rows)
    except BrokerError as exc:
        # Kafka 4.3 answers an admin commit UNKNOWN_MEMBER_ID (classic and consumer groups) once a
        # member is in, and AlterShareGroupOffsets NON_EMPTY_GROUP.
        if exc.code not in (UNKNOWN_MEMBER_ID, NON_EMPTY_GROUP):
            raise
        raise CommandFailed(f"group {group_id!r} has a member again (it joined after the check); "
                            f"the broker refused the {'new start offsets' if share else 'commit'} ({exc}): "
                            "nothing was reset") from None


def refusal(group_id: str, state: str, members: int) -> str:
    """Kafka's tool: "Assignments can only be reset if the group 'G' is inactive, but the current state is S." """
    return (f"cannot reset the offsets of group {group_id!r}: it is active (state {state}, {members} member(s)); "
            "offsets can only be reset while the group is inactive (no member: state Empty)")


async def reset_offsets(bootstrap: str, group_id: str, topics: list[tuple[str, list[int] | None]],
                        mode: ResetMode, *, execute: bool, timeout: float = TIMEOUT_SECONDS) -> ResetResult:
    """The plan, committed when ``execute``; CommandFailed for an unknown group or topic, an active
    group, or a partition that cannot be shifted."""
    async with admin_cluster(bootstrap, timeout) as cluster, bounded(f"resetting the offsets of group {group_id!r}",
                                                                      timeout):
        group, committed, share = await existing_group(cluster, group_id)
        group_type, state, members = group.group_type, group.state, len(group.members)
        if share is not None:  # its start offsets stand for committed offsets
            group_type, state, members = share.group_type, share.state, len(share.members)
            committed = {TopicPartition(p.topic, p.partition): p.start_offset for p in share.partitions
                         if p.start_offset is not None}
        if members or state not in INACTIVE_STATES:
            raise CommandFailed(refusal(group_id, state, members))
        tps = await topic_partitions(cluster, topics)
        starts, ends, by_time = await _lookups(cluster, mode, tps)
        try:
            rows = plan_reset(mode, tps, committed, starts, ends, by_time)
        except ValueError as exc:
            raise CommandFailed(str(exc)) from None
        notes = [tansu_end_offsets_note()] if mode.needs_end and await is_tansu(cluster) else []
        if execute and notes:
            raise CommandFailed(f"not committing: the broker is Tansu, whose log-end offsets are wrong, and "
                                f"--{mode.name} depends on them (only --to-earliest does not); the plan may "
                                "be wrong: see the dry run's note")
        if execute:
            await _apply(cluster, group_id, rows, share is not None)
    return ResetResult(group_id, group_type, state, mode.name, execute, rows, notes)


def render_text(result: ResetResult, out: TextIO) -> None:
    out.write("TOPIC  PARTITION  CURRENT-OFFSET  NEW-OFFSET\n")
    for row in result.partitions:
        current = "-" if row.current is None else str(row.current)
        out.write(f"{row.topic}  {row.partition}  {current}  {row.new}{'  (clamped)' if row.clamped else ''}\n")
    if result.executed:
        out.write(f"committed: group {result.group_id} will start from NEW-OFFSET\n")
    else:
        out.write("dry run: nothing committed (add --execute to commit NEW-OFFSET)\n")
    for note in result.notes:
        out.write(f"* {note}\n")


def render_json(result: ResetResult, out: TextIO) -> None:
    out.write(json.dumps(asdict(result), indent=2) + "\n")


def run_reset(group_id: str, bootstrap: str, topics: list[tuple[str, list[int] | None]], mode: ResetMode, *,
              execute: bool, output_format: str) -> int:
    async def work() -> int:
        result = await reset_offsets(bootstrap, group_id, topics, mode, execute=execute)
        (render_json if output_format == "json" else render_text)(result, sys.stdout)
        return EXIT_OK

    return run_step_command(f"resetting the offsets of group {group_id!r}", work)
