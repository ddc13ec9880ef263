"""`aiokafka-lite groups delete-offsets GROUP --topic T[:P,...]`: kafka-consumer-groups.sh
--delete-offsets for classic and consumer-protocol (KIP-848) groups, kafka-share-groups.sh
--delete-offsets for share groups (KIP-932).

No dry run, as in Kafka's tools (which take ``--dry-run`` and delete anyway): the offsets are
deleted at once and each partition's (or share topic's) outcome is shown. The group's type decides
the request:

* a classic or consumer group: one OffsetDelete (key 47) to its coordinator. The broker deletes the
  committed offsets of the partitions of topics the group is not subscribed to, members or not, and
  refuses the others partition by partition (GROUP_SUBSCRIBED_TO_TOPIC).
* a share group: one DeleteShareGroupOffsets (key 92), whole topics only (a share group's start
  offsets cannot be deleted partition by partition). It needs the group without members, as the
  reset does: refused beforehand, and the broker's NON_EMPTY_GROUP for a member that joined since.

A topic or partition that does not exist is refused before anything is deleted. Any row that failed
makes the command exit 1 (Kafka's tools exit 0).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from .._net.cluster import Cluster
from ..errors import BrokerError
from ..protocol.messages import DELETE_SHARE_GROUP_OFFSETS, OFFSET_DELETE
from ..structs import TopicPartition
from .group_admin import INACTIVE_STATES, admin_cluster, bounded, existing_group, topic_partitions
from .groups import TIMEOUT_SECONDS
from .run import EXIT_KAFKA_ERROR, EXIT_OK, CommandFailed, run_step_command

NON_EMPTY_GROUP = 68
# Why the broker keeps a partition's offsets, where its error table says too little.
_WHY = {86: "a member of the group is subscribed to this topic (its offsets are in use)"}


@dataclass
class DeleteRow:
    topic: str
    partition: int | None  # None: a share group's whole topic
    error: str | None = None  # None: deleted

    @property
    def status(self) -> str:
        return "Successful" if self.error is None else f"Error: {self.error}"


@dataclass
class DeleteResult:
    group_id: str
    group_type: str
    state: str
    partitions: list[DeleteRow] = field(default_factory=list)

    @property
    def failed(self) -> list[DeleteRow]:
        return [row for row in self.partitions if row.error is not None]


def row_error(code: int, message: str | None = None) -> str | None:
    """What a row shows for the broker's error code (None: deleted)."""
    if not code:
        return None
    error = BrokerError(code)
    why = message or _WHY.get(code)
    return f"{error.name} ({code}): {why}" if why else str(error)


def offset_delete_body(group_id: str, tps: list[TopicPartition]) -> dict[str, Any]:
    topics: dict[str, list[dict[str, int]]] = {}
    for tp in sorted(tps):
        topics.setdefault(tp.topic, []).append({"partition_index": tp.partition})
    return {"group_id": group_id, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def offset_delete_rows(group_id: str, response: dict[str, Any]) -> list[DeleteRow]:
    """One row per partition of an OffsetDelete answer; a group-level error raises (nothing deleted)."""
    if response["error_code"]:
        raise BrokerError(response["error_code"], f"OffsetDelete {group_id!r}")
    return sorted((DeleteRow(topic["name"], p["partition_index"], row_error(p["error_code"]))
                   for topic in response["topics"] for p in topic["partitions"]),
                  key=lambda row: (row.topic, row.partition or 0))


def share_delete_rows(group_id: str, response: dict[str, Any]) -> list[DeleteRow]:
    """One row per topic of a DeleteShareGroupOffsets answer; a group-level error raises (nothing deleted)."""
    if response["error_code"]:
        raise BrokerError(response["error_code"], f"DeleteShareGroupOffsets {group_id!r}: {response['error_message']}")
    return sorted((DeleteRow(t["topic_name"], None, row_error(t["error_code"], t["error_message"]))
                   for t in response["responses"]), key=lambda row: row.topic)


def share_refusal(group_id: str, state: str, members: int) -> str:
    return (f"cannot delete the offsets of share group {group_id!r}: it is active (state {state}, {members} "
            "member(s)); a share group's offsets can only be deleted while it has no member (state Empty)")


async def _delete_share(cluster: Cluster, group_id: str, topics: list[str]) -> list[DeleteRow]:
    node_id = await cluster.find_coordinator(group_id)
    response = await cluster.send(node_id, DELETE_SHARE_GROUP_OFFSETS,
                                  {"group_id": group_id, "topics": [{"topic_name": t} for t in topics]})
    try:
        return share_delete_rows(group_id, response)
    except BrokerError as exc:
        if exc.code != NON_EMPTY_GROUP:
            raise
        raise CommandFailed(f"share group {group_id!r} has a member again (it joined after the check); the broker "
                            f"refused ({exc}): nothing was deleted") from None


async def _delete_committed(cluster: Cluster, group_id: str, tps: list[TopicPartition]) -> list[DeleteRow]:
    node_id = await cluster.find_coordinator(group_id)
    response = await cluster.send(node_id, OFFSET_DELETE, offset_delete_body(group_id, tps))
    return offset_delete_rows(group_id, response)


async def delete_offsets(bootstrap: str, group_id: str, topics: list[tuple[str, list[int] | None]], *,
                         timeout: float = TIMEOUT_SECONDS) -> DeleteResult:
    """Delete the group's offsets of ``topics`` (name, partitions or None for all); CommandFailed for
    an unknown group, topic or partition, partitions of a share group's topic, or an active share group."""
    async with admin_cluster(bootstrap, timeout) as cluster, bounded(f"deleting the offsets of group {group_id!r}",
                                                                      timeout):
        group, _committed, share = await existing_group(cluster, group_id)
        if share is None:
            tps = await topic_partitions(cluster, topics)
            rows = await _delete_committed(cluster, group_id, tps)
            return DeleteResult(group_id, group.group_type, group.state, rows)
        partial = sorted(f"{name}:{','.join(map(str, wanted))}" for name, wanted in topics if wanted is not None)
        if partial:
            raise CommandFailed(f"{group_id!r} is a share group, whose offsets are deleted by whole topic: "
                                f"give --topic {partial[0].split(':')[0]} without partitions (not {partial[0]})")
        if share.members or share.state not in INACTIVE_STATES:
            raise CommandFailed(share_refusal(group_id, share.state, len(share.members)))
        await topic_partitions(cluster, topics)  # each topic exists
        rows = await _delete_share(cluster, group_id, sorted({name for name, _ in topics}))
        return DeleteResult(group_id, share.group_type, share.state, rows)


def render_text(result: DeleteResult, out: TextIO) -> None:
    share = result.group_type == "share"
    out.write("TOPIC  STATUS\n" if share else "TOPIC  PARTITION  STATUS\n")
    for row in result.partitions:
        out.write(f"{row.topic}  {row.status}\n" if share else f"{row.topic}  {row.partition}  {row.status}\n")
    what = "topics" if share else "partitions"
    reset = "share.auto.offset.reset" if share else "auto.offset.reset"
    failed = len(result.failed)
    if failed:
        out.write(f"not all deleted: {failed} of {len(result.partitions)} {what} failed (see STATUS)\n")
    else:
        out.write(f"deleted: group {result.group_id} will start these {what} from its {reset}\n")


def render_json(result: DeleteResult, out: TextIO) -> None:
    data = asdict(result)
    for row, shown in zip(result.partitions, data["partitions"], strict=True):
        shown["status"] = row.status
    out.write(json.dumps(data, indent=2) + "\n")


def run_delete(group_id: str, bootstrap: str, topics: list[tuple[str, list[int] | None]], *,
               output_format: str) -> int:
    async def work() -> int:
        result = await delete_offsets(bootstrap, group_id, topics)
        (render_json if output_format == "json" else render_text)(result, sys.stdout)
        if not result.failed:
            return EXIT_OK
        sys.stdout.flush()
        what = "topic(s)" if result.group_type == "share" else "partition(s)"
        print(f"aiokafka-lite: the offsets of {len(result.failed)} {what} of group {group_id!r} were not "
              f"deleted: {result.failed[0].error}", file=sys.stderr)
        return EXIT_KAFKA_ERROR

    return run_step_command(f"deleting the offsets of group {group_id!r}", work)
