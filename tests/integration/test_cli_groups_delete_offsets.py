"""`aiokafka-lite groups delete-offsets` beside Kafka's own tools on the fixtures' Apache Kafka (4.4.0 by
default; passed on 4.3.1 too, whose tools print the same):
ConsumerGroupCommand (kafka-consumer-groups.sh --delete-offsets) on classic and consumer-protocol
groups, ShareGroupCommand (kafka-share-groups.sh --delete-offsets) on a share group, each run from
the broker's jars on the same groups (or on twins, where both delete). What each tool printed is
printed (-s).

Kafka's tools delete at once (both take --dry-run and delete anyway) and exit 0 whatever failed;
ours deletes at once too, refuses --dry-run/--execute, and exits 1 when a row failed.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import pytest

from aiokafka_lite import Consumer, OffsetAndMetadata, ShareConsumer, TopicPartition
from aiokafka_lite.cli.groups import describe_group
from aiokafka_lite.testing.helpers import create_topic, produce, set_group_config
from aiokafka_lite.testing.java_clients import run_kafka_tool

from ._consumers import poll_until
from .test_cli_groups_share import SHARE_GROUP_COMMAND
from .test_cli_groups_tools import GROUP_COMMAND, PROTOCOLS, cli, java_rows, our_json

pytestmark = pytest.mark.asyncio

PARTITIONS = 2
RECORDS_PER_PARTITION = 5
SUBSCRIBED_ERROR = ("Error: org.apache.kafka.common.errors.GroupSubscribedToTopicException: Deleting offsets of a "
                    "topic is forbidden while the consumer group is actively subscribed to it.")
OURS_SUBSCRIBED = ("Error: GROUP_SUBSCRIBED_TO_TOPIC (86): a member of the group is subscribed to this topic "
                   "(its offsets are in use)")


async def kafka_tool(tool: str, bootstrap: str, *args: str) -> str:
    done = await asyncio.to_thread(run_kafka_tool, tool, ["--bootstrap-server", bootstrap, *args])
    print(f"--- {tool.rsplit('.', 1)[-1]} {' '.join(args)} (exit {done.returncode})\n{done.stdout}{done.stderr}")
    assert done.returncode == 0, "Kafka's tools exit 0 even when a row failed"
    return done.stdout


def shown(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    print(f"--- aiokafka-lite {' '.join(done.args[3:])} (exit {done.returncode})\n{done.stdout}{done.stderr}")
    return done


async def ours(*args: str) -> subprocess.CompletedProcess[str]:
    return shown(await cli("groups", "delete-offsets", *args))


def their_statuses(stdout: str, share: bool = False) -> dict[tuple[str, int | None], str]:
    """(topic, partition or None for a share topic) -> STATUS of Kafka's --delete-offsets table."""
    rows = java_rows(stdout, "TOPIC")
    if share:
        return {(row[0], None): " ".join(row[1:]) for row in rows}
    return {(row[0], int(row[1])): " ".join(row[2:]) for row in rows}


def our_statuses(result: dict[str, Any]) -> dict[tuple[str, int | None], str]:
    return {(row["topic"], row["partition"]): row["status"] for row in result["partitions"]}


async def _committed(bootstrap: str, group: str) -> dict[tuple[str, int], int | None]:
    view = await describe_group(bootstrap, group)
    return {(r.topic, r.partition): r.committed for r in view.partitions if r.committed is not None}


def _commits(topics: list[str]) -> dict[TopicPartition, OffsetAndMetadata]:
    return {TopicPartition(t, p): OffsetAndMetadata(p + 1) for t in topics for p in range(PARTITIONS)}


async def test_consumer_groups_delete_offsets_as_kafkas_tool_does(apache_kafka_broker: Any, unique_topic: str,
                                                                   unique_group: str) -> None:
    """Per protocol, a group (ours) and its twin (Kafka's tool's), each with a live member subscribed
    to ``read`` that committed offsets of ``read`` and ``other``: the broker refuses ``read``'s
    partitions and deletes ``other``'s, for both tools; once the member left, ``read:0`` goes too."""
    bootstrap = apache_kafka_broker.bootstrap_servers
    read, other = f"{unique_topic}-read", f"{unique_topic}-other"
    for topic in (read, other):
        create_topic(bootstrap, topic, partitions=PARTITIONS)
        produce(bootstrap, topic, [{"value": b"v", "partition": i % PARTITIONS}
                                   for i in range(PARTITIONS * RECORDS_PER_PARTITION)])
    groups = {(p, who): f"{unique_group}-{p}-{who}" for p in PROTOCOLS for who in ("ours", "java")}
    members = [Consumer(read, bootstrap_servers=bootstrap, group_id=g, group_protocol=p, auto_offset_reset="earliest",
                        enable_auto_commit=False) for (p, _who), g in groups.items()]
    try:
        for member in members:
            await member.start()
        for member in members:
            await poll_until(member, lambda got: len(got) >= PARTITIONS * RECORDS_PER_PARTITION)
            await member.commit(_commits([read, other]))
        mine = await asyncio.gather(*(ours(groups[p, "ours"], "-b", bootstrap, "--topic", read, "--topic", other,
                                           "--format", "json") for p in PROTOCOLS))
        theirs = [await kafka_tool(GROUP_COMMAND, bootstrap, "--delete-offsets", "--group", groups[p, "java"],
                                   "--topic", read, "--topic", other) for p in PROTOCOLS]
        for done, their_out in zip(mine, theirs, strict=True):
            assert done.returncode == 1
            assert done.stderr == (f"aiokafka-lite: the offsets of {PARTITIONS} partition(s) of group "
                                   f"{our_json_lenient(done)['group_id']!r} were not deleted: "
                                   f"{OURS_SUBSCRIBED.removeprefix('Error: ')}\n")
            expected = {**{(read, p): OURS_SUBSCRIBED for p in range(PARTITIONS)},
                        **{(other, p): "Successful" for p in range(PARTITIONS)}}
            assert our_statuses(our_json_lenient(done)) == expected
            assert their_statuses(their_out) == {
                key: SUBSCRIBED_ERROR if status != "Successful" else status for key, status in expected.items()}
            assert "Error: Encountered some partition-level error, see the follow-up details." in their_out
        for p in PROTOCOLS:  # both tools left the same offsets: only read's
            left = [await _committed(bootstrap, groups[p, who]) for who in ("ours", "java")]
            assert left[0] == left[1] == {(read, q): q + 1 for q in range(PARTITIONS)}
    finally:
        for member in members:
            await member.close()
    # The members gone (Empty): read's partition 0 can go now, for both.
    mine = await asyncio.gather(*(ours(groups[p, "ours"], "-b", bootstrap, "--topic", f"{read}:0") for p in PROTOCOLS))
    for p in PROTOCOLS:
        their_out = await kafka_tool(GROUP_COMMAND, bootstrap, "--delete-offsets", "--group", groups[p, "java"],
                                     "--topic", f"{read}:0")
        assert their_statuses(their_out) == {(read, 0): "Successful"}
        assert f"Request succeeded for deleting offsets from group {groups[p, 'java']}." in their_out
    for p, done in zip(PROTOCOLS, mine, strict=True):
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout == (f"TOPIC  PARTITION  STATUS\n{read}  0  Successful\n"
                               f"deleted: group {groups[p, 'ours']} will start these partitions from its "
                               "auto.offset.reset\n")
        left = [await _committed(bootstrap, groups[p, who]) for who in ("ours", "java")]
        assert left[0] == left[1] == {(read, 1): 2}
    await _refusals(bootstrap, groups["classic", "ours"], read)


def our_json_lenient(done: subprocess.CompletedProcess[str]) -> Any:
    """The JSON of a run that exits 1 because a row failed (our_json wants exit 0)."""
    return json.loads(done.stdout)


async def _refusals(bootstrap: str, group: str, topic: str) -> None:
    """Before anything is deleted: an unknown group, topic or partition (exit 1), --dry-run (exit 2)."""
    unknown, missing, partition, dry, their_unknown = await asyncio.gather(
        ours(f"{group}-none", "-b", bootstrap, "--topic", topic),
        ours(group, "-b", bootstrap, "--topic", f"{topic}-missing"),
        ours(group, "-b", bootstrap, "--topic", f"{topic}:7"),
        ours(group, "-b", bootstrap, "--topic", topic, "--dry-run"),
        kafka_tool(GROUP_COMMAND, bootstrap, "--delete-offsets", "--group", f"{group}-none", "--topic", topic))
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr == f"aiokafka-lite: group {group + '-none'!r} does not exist\n"
    assert "Error: The group id does not exist." in their_unknown
    assert (missing.returncode, missing.stderr) == (1, f"aiokafka-lite: topic {topic + '-missing'!r} does not exist\n")
    assert (partition.returncode, partition.stderr) == (
        1, f"aiokafka-lite: partition(s) {topic}-7 do not exist (topic {topic!r} has {PARTITIONS})\n")
    assert (dry.returncode, dry.stdout) == (2, "")
    assert dry.stderr.startswith("aiokafka-lite: groups delete-offsets deletes at once and has no --dry-run")
    assert await _committed(bootstrap, group) == {(topic, 1): 2}, "a refusal deleted something"


async def _share_start_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    shown_offsets = await kafka_tool(SHARE_GROUP_COMMAND, bootstrap, "--describe", "--offsets", "--group", group)
    return {(row[1], int(row[2])): int(row[3]) for row in java_rows(shown_offsets, "GROUP") if row[0] == group}


async def test_a_share_groups_offsets_are_deleted_as_kafkas_tool_deletes_them(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    """A share group that read two topics: refused by both tools while it has a member; then ours
    deletes one topic and Kafka's the other, each seeing the other's deletion, and both report a topic
    without offsets the same way."""
    bootstrap = apache_kafka_broker.bootstrap_servers
    first, second = f"{unique_topic}-a", f"{unique_topic}-b"
    for topic in (first, second):
        create_topic(bootstrap, topic, partitions=PARTITIONS)
        produce(bootstrap, topic, [{"value": b"v", "partition": i % PARTITIONS}
                                   for i in range(PARTITIONS * RECORDS_PER_PARTITION)])
    set_group_config(bootstrap, unique_group, {"share.auto.offset.reset": "earliest"})
    everything = {(t, p) for t in (first, second) for p in range(PARTITIONS)}  # partitions with a start offset
    async with ShareConsumer(first, second, bootstrap_servers=bootstrap, group_id=unique_group) as share:
        got = 0
        async with asyncio.timeout(60):
            while got < 2 * PARTITIONS * RECORDS_PER_PARTITION:
                got += len(await share.poll(timeout=1.0))
        assert all(error is None for error in (await share.commit(timeout=10)).values())
        refused, their_refused = await asyncio.gather(
            ours(unique_group, "-b", bootstrap, "--topic", first),
            kafka_tool(SHARE_GROUP_COMMAND, bootstrap, "--delete-offsets", "--group", unique_group, "--topic", first))
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr == (f"aiokafka-lite: cannot delete the offsets of share group {unique_group!r}: it is "
                                  "active (state Stable, 1 member(s)); a share group's offsets can only be deleted "
                                  "while it has no member (state Empty)\n")
        assert their_statuses(their_refused, share=True) == {(first, None): "Error: The group is not empty."}
        assert set(await _share_start_offsets(bootstrap, unique_group)) == everything
    by_partition = await ours(unique_group, "-b", bootstrap, "--topic", f"{first}:0")
    assert (by_partition.returncode, by_partition.stdout) == (1, "")
    assert by_partition.stderr == (f"aiokafka-lite: {unique_group!r} is a share group, whose offsets are deleted by "
                                   f"whole topic: give --topic {first} without partitions (not {first}:0)\n")

    deleted = await ours(unique_group, "-b", bootstrap, "--topic", first)
    assert (deleted.returncode, deleted.stderr) == (0, "")
    assert deleted.stdout == (f"TOPIC  STATUS\n{first}  Successful\ndeleted: group {unique_group} will start these "
                              "topics from its share.auto.offset.reset\n")
    assert set(await _share_start_offsets(bootstrap, unique_group)) == {key for key in everything if key[0] == second}
    their_deleted = await kafka_tool(SHARE_GROUP_COMMAND, bootstrap, "--delete-offsets", "--group", unique_group,
                                     "--topic", second)
    assert their_statuses(their_deleted, share=True) == {(second, None): "Successful"}
    lag = our_json(await cli("groups", "lag", unique_group, "-b", bootstrap, "--format", "json"))
    assert lag["partitions"] == []

    again, their_again = await asyncio.gather(
        ours(unique_group, "-b", bootstrap, "--topic", first, "--topic", second, "--format", "json"),
        kafka_tool(SHARE_GROUP_COMMAND, bootstrap, "--delete-offsets", "--group", unique_group,
                   "--topic", first, "--topic", second))
    assert again.returncode == 1
    theirs = their_statuses(their_again, share=True)
    assert theirs == dict.fromkeys([(first, None), (second, None)], "Error: There is no offset information to delete.")
    assert our_statuses(our_json_lenient(again)) == dict.fromkeys(
        theirs, "Error: UNKNOWN_TOPIC_OR_PARTITION (3): There is no offset information to delete.")
