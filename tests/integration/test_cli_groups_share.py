"""`aiokafka-lite groups list | describe | lag | reset-offsets` on a KIP-932 share group, beside Kafka's
own tools on Apache Kafka 4.3.1: GroupsCommand (kafka-groups.sh) for the listing, ShareGroupCommand
(kafka-share-groups.sh) for members, start offsets, lag and resets. The share group is made by our
ShareConsumer: it reads and accepts every record of two partitions (start offset 10 on each), stays
a member for the live checks, then leaves for the reset.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from aiokafka_lite import ShareConsumer
from aiokafka_lite.cli import share_groups
from aiokafka_lite.cli.groups import describe_group
from aiokafka_lite.group.share import offsets as share_offsets
from aiokafka_lite.testing.helpers import create_topic, produce, set_group_config
from aiokafka_lite.testing.java_clients import run_kafka_tool

from .test_cli_groups_tools import java_rows

pytestmark = pytest.mark.asyncio

CLI = [sys.executable, "-m", "aiokafka_lite"]
ENV = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
GROUPS_COMMAND = "org.apache.kafka.tools.GroupsCommand"
SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
PARTITIONS = 2
RECORDS_PER_PARTITION = 10


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, env=ENV, check=False)


async def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(run_cli, *args)


async def java(tool: str, bootstrap: str, *args: str) -> str:
    done = await asyncio.to_thread(run_kafka_tool, tool, ["--bootstrap-server", bootstrap, *args])
    assert done.returncode == 0, done.stdout + done.stderr
    print(f"--- {tool.rsplit('.', 1)[-1]} {' '.join(args)}\n{done.stdout}")
    return done.stdout


def our_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    return json.loads(done.stdout)


async def _read_everything(share: ShareConsumer) -> None:
    got = 0
    async with asyncio.timeout(60):
        while got < PARTITIONS * RECORDS_PER_PARTITION:
            got += len(await share.poll(timeout=1.0))
    results = await share.commit(timeout=10)
    assert all(error is None for error in results.values()), results


async def test_a_share_group_is_listed_described_and_lagged_as_kafkas_tools_show_it(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bootstrap = apache_kafka_broker.bootstrap_servers
    create_topic(apache_kafka_broker, unique_topic, partitions=PARTITIONS)
    produce(apache_kafka_broker, unique_topic,
            [{"value": b"v", "partition": i % PARTITIONS} for i in range(PARTITIONS * RECORDS_PER_PARTITION)])
    set_group_config(apache_kafka_broker, unique_group, {"share.auto.offset.reset": "earliest"})
    async with ShareConsumer(unique_topic, bootstrap_servers=bootstrap, group_id=unique_group,
                             client_id="share-cli-test") as share:
        await _read_everything(share)
        listed, our_list = await asyncio.gather(java(GROUPS_COMMAND, bootstrap, "--list"),
                                                cli("groups", "list", "-b", bootstrap, "--format", "json"))
        their_types = {row[0]: row[1].lower() for row in java_rows(listed, "GROUP")}
        mine = {g["group_id"]: g for g in our_json(our_list)}
        assert unique_group in mine, f"{unique_group} not listed: {sorted(mine)}"
        assert (mine[unique_group]["group_type"], mine[unique_group]["state"],
                mine[unique_group]["members"]) == ("share", "Stable", 1)
        for group, listing in mine.items():
            assert listing["group_type"] == their_types.get(group, listing["group_type"]), group
        assert their_types[unique_group] == "share"
        await _describe_and_lag_agree(bootstrap, unique_topic, unique_group)
        await _without_lag_on_v0(bootstrap, unique_group, monkeypatch)
        refused = await cli("groups", "reset-offsets", unique_group, "-b", bootstrap, "--topic", unique_topic,
                            "--to-earliest", "--execute")
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr == (f"aiokafka-lite: cannot reset the offsets of group {unique_group!r}: it is active "
                                  "(state Stable, 1 member(s)); offsets can only be reset while the group is "
                                  "inactive (no member: state Empty)\n")
    await _resets_agree(bootstrap, unique_topic, unique_group)


async def _without_lag_on_v0(bootstrap: str, group: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker answering DescribeShareGroupOffsets v0 only (before KIP-1226) reports no lag: asked at
    v0, the start offsets are still shown, LAG is unknown and a note says why."""
    v1 = await describe_group(bootstrap, group)
    with monkeypatch.context() as patched:
        patched.setattr(share_offsets, "DESCRIBE_SHARE_GROUP_OFFSETS",
                        dataclasses.replace(share_offsets.DESCRIBE_SHARE_GROUP_OFFSETS, max_version=0))
        v0 = await describe_group(bootstrap, group)
    assert v1.share is not None
    assert v0.share is not None
    assert (v1.share.lag_reported, v1.share.notes) == (True, [])
    assert v0.share.lag_reported is False
    assert v0.share.notes == [share_groups.lag_not_available_note(0)]
    assert [(p.partition, p.start_offset, p.lag) for p in v0.share.partitions] == [
        (p.partition, p.start_offset, None) for p in v1.share.partitions]
    assert share_groups.total_lag(v0.share) is None
    out = io.StringIO()
    share_groups.render_lag_text(v0.share, out)
    print(out.getvalue())
    assert out.getvalue().splitlines()[-2].startswith("TOTAL LAG  -  (share group ")


async def _start_offsets(bootstrap: str, group: str) -> dict[int, int]:
    """Partition -> START-OFFSET as Kafka's tool shows it."""
    shown = await java(SHARE_GROUP_COMMAND, bootstrap, "--describe", "--offsets", "--group", group)
    header = next(line.split() for line in shown.splitlines() if line.startswith("GROUP"))
    column = header.index("START-OFFSET")
    return {int(row[2]): int(row[column]) for row in java_rows(shown, "GROUP") if row[0] == group}


async def _resets_agree(bootstrap: str, topic: str, group: str) -> None:
    """With the member gone (Empty): our dry run plans what Kafka's does, our --execute moves the start
    offsets as Kafka's tool then sees them, and Kafka's --execute moves them as ours sees them."""
    theirs_planned, ours_planned = await asyncio.gather(
        java(SHARE_GROUP_COMMAND, bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
             "--to-latest", "--dry-run"),
        cli("groups", "reset-offsets", group, "-b", bootstrap, "--topic", topic, "--to-latest", "--format", "json"))
    plan = our_json(ours_planned)
    shown = await cli("groups", "reset-offsets", group, "-b", bootstrap, "--topic", topic, "--to-latest")
    print(shown.stdout, shown.stderr)
    assert (plan["group_type"], plan["state"], plan["executed"]) == ("share", "Empty", False)
    header = next(line.split() for line in theirs_planned.splitlines() if line.startswith("GROUP"))
    column = header.index("NEW-OFFSET")
    their_plan = {int(row[2]): int(row[column]) for row in java_rows(theirs_planned, "GROUP") if row[0] == group}
    assert {r["partition"]: r["new"] for r in plan["partitions"]} == their_plan
    assert their_plan == dict.fromkeys(range(PARTITIONS), RECORDS_PER_PARTITION)
    before = await _start_offsets(bootstrap, group)
    assert {r["partition"]: r["current"] for r in plan["partitions"]} == before  # the dry run changed nothing

    executed = our_json(await cli("groups", "reset-offsets", group, "-b", bootstrap, "--topic", f"{topic}:1",
                                  "--to-latest", "--execute", "--format", "json"))
    assert executed["executed"] is True
    assert await _start_offsets(bootstrap, group) == {**before, 1: RECORDS_PER_PARTITION}

    await java(SHARE_GROUP_COMMAND, bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
               "--to-latest", "--execute")
    lag = our_json(await cli("groups", "lag", group, "-b", bootstrap, "--format", "json"))
    assert {p["partition"]: (p["start_offset"], p["lag"]) for p in lag["partitions"]} == dict.fromkeys(
        range(PARTITIONS), (RECORDS_PER_PARTITION, 0))
    await java(SHARE_GROUP_COMMAND, bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
               "--to-earliest", "--execute")
    lag = our_json(await cli("groups", "lag", group, "-b", bootstrap, "--format", "json"))
    assert {p["partition"]: (p["start_offset"], p["lag"]) for p in lag["partitions"]} == dict.fromkeys(
        range(PARTITIONS), (0, RECORDS_PER_PARTITION))
    assert lag["total_lag"] == PARTITIONS * RECORDS_PER_PARTITION


async def _describe_and_lag_agree(bootstrap: str, topic: str, group: str) -> None:
    members, offsets, our_describe, our_lag, our_text = await asyncio.gather(
        java(SHARE_GROUP_COMMAND, bootstrap, "--describe", "--members", "--verbose", "--group", group),
        java(SHARE_GROUP_COMMAND, bootstrap, "--describe", "--offsets", "--verbose", "--group", group),
        cli("groups", "describe", group, "-b", bootstrap, "--format", "json"),
        cli("groups", "lag", group, "-b", bootstrap, "--format", "json"),
        cli("groups", "describe", group, "-b", bootstrap))
    print(our_text.stdout, our_text.stderr)
    for args in (("list",), ("lag", group)):
        shown = await cli("groups", *args, "-b", bootstrap)
        print(shown.stdout, shown.stderr)
    view, lag = our_json(our_describe), our_json(our_lag)
    # Members: CONSUMER-ID HOST CLIENT-ID #PARTITIONS MEMBER-EPOCH ASSIGNMENT of --members --verbose.
    [their_member] = [row for row in java_rows(members, "GROUP") if row[0] == group]
    [member] = view["members"]
    assignment = sorted(f"{a['topic']}-{a['partition']}" for a in member["assignment"])
    assert assignment == [f"{topic}-{p}" for p in range(PARTITIONS)]
    assert [member["member_id"], member["client_host"], member["client_id"], str(len(assignment)),
            str(member["member_epoch"])] == their_member[1:6]
    assert their_member[6] == f"{topic}:" + ",".join(str(p) for p in range(PARTITIONS))
    assert (view["group_type"], view["state"], member["client_id"]) == ("share", "Stable", "share-cli-test")
    # Offsets: LEADER-EPOCH START-OFFSET LAG of --offsets --verbose, partition by partition.
    theirs = {int(row[2]): (int(row[3]), int(row[4]), int(row[5]))
              for row in java_rows(offsets, "GROUP") if row[0] == group}
    mine = {p["partition"]: (p["leader_epoch"], p["start_offset"], p["lag"]) for p in view["partitions"]}
    assert mine == theirs
    assert sorted(mine) == list(range(PARTITIONS))
    assert all(p["members"] == [member["member_id"]] for p in view["partitions"])
    assert {p["partition"]: (p["start_offset"], p["lag"]) for p in lag["partitions"]} == {
        p: (start, their_lag) for p, (_, start, their_lag) in theirs.items()}
    assert lag["total_lag"] == sum(their_lag for _, _, their_lag in theirs.values())
    assert (lag["group_type"], lag["members"], lag["notes"]) == ("share", 1, [])
