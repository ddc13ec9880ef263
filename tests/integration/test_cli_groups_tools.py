"""`aiokafka-lite groups list | lag | reset-offsets` beside Kafka's own tool on Apache Kafka 4.3.1.

Kafka's ConsumerGroupCommand (what kafka-consumer-groups.sh runs) is started from the broker's jars
on the same groups: a classic group and a consumer-protocol (KIP-848) group that our Consumer made
by committing and then left (Empty), twins of them that Kafka's tool resets, and one group of each
protocol with a live member. JVM starts cost about a second each, so each Java call covers every
group at once (``--group`` repeated) and runs beside our own commands.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from aiokafka_lite import Consumer, OffsetAndMetadata, TopicPartition
from aiokafka_lite.cli.group_admin import admin_cluster
from aiokafka_lite.cli.groups import describe_group
from aiokafka_lite.cli.reset_offsets import commit_plan
from aiokafka_lite.cli.reset_plan import PlanRow
from aiokafka_lite.errors import BrokerError
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.java_clients import run_kafka_tool

from ._consumers import Poller, poll_until

CLI = [sys.executable, "-m", "aiokafka_lite"]
ENV = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PROTOCOLS = ("classic", "consumer")
RECORDS_PER_PARTITION = 10
# What our Consumer commits before the resets; partition 2 lags most.
COMMITTED = {0: 5, 1: 10, 2: 2}
UNKNOWN_MEMBER_ID = 25


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, env=ENV, check=False)


async def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(run_cli, *args)


async def java(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = await asyncio.to_thread(run_kafka_tool, GROUP_COMMAND, ["--bootstrap-server", bootstrap, *args])
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def java_rows(stdout: str, header: str) -> list[list[str]]:
    """The whitespace-separated rows of each table whose header starts with ``header``."""
    rows, in_table = [], False
    for line in stdout.splitlines():
        if line.startswith(header):
            in_table = True
        elif not line.strip():
            in_table = False
        elif in_table:
            rows.append(line.split())
    return rows


def our_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def _commit_and_leave(bootstrap: str, topic: str, group: str, protocol: str) -> None:
    async with Consumer(topic, bootstrap_servers=bootstrap, group_id=group, group_protocol=protocol,
                        auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        await poll_until(consumer, lambda got: len(got) >= 3 * RECORDS_PER_PARTITION)
        await consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o) for p, o in COMMITTED.items()})


def _produce_with_times(bootstrap: str, topic: str) -> int:
    """Ten records a partition, a second apart; partition 2's an hour older than the others'. The
    returned time (ms) falls on partitions 0 and 1's fifth record and after all of partition 2's."""
    base = (int(time.time()) - 600) * 1000
    records = [{"value": f"p{p}-{i}", "partition": p, "timestamp": base + i * 1000 - (3_600_000 if p == 2 else 0)}
               for p in range(3) for i in range(RECORDS_PER_PARTITION)]
    produce(bootstrap, topic, records, enable_idempotence=True)
    return base + 4 * 1000


def _iso(millis: int) -> str:
    # The form Kafka's tool insists on (yyyy-MM-dd'T'HH:mm:ss.SSS, no zone: UTC); ours reads it too.
    return datetime.fromtimestamp(millis / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


@pytest.mark.asyncio
async def test_list_lag_and_every_reset_mode_agree_with_kafkas_tool(apache_kafka_broker, unique_topic, unique_group):
    bootstrap = apache_kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=3)
    at_time = _produce_with_times(bootstrap, unique_topic)
    ours = {p: f"{unique_group}-{p}-ours" for p in PROTOCOLS}
    theirs = {p: f"{unique_group}-{p}-java" for p in PROTOCOLS}
    active = {p: f"{unique_group}-{p}-active" for p in PROTOCOLS}
    await asyncio.gather(*(_commit_and_leave(bootstrap, unique_topic, g[p], p)
                           for g in (ours, theirs, active) for p in PROTOCOLS))
    live = [Consumer(unique_topic, bootstrap_servers=bootstrap, group_id=active[p], group_protocol=p,
                     auto_offset_reset="earliest", enable_auto_commit=False) for p in PROTOCOLS]
    for consumer in live:
        await consumer.start()
    try:
        async with Poller(live[0]) as classic_poller, Poller(live[1]) as consumer_poller:
            for poller in (classic_poller, consumer_poller):
                await poller.wait_for(lambda p=poller: len(p.consumer.assignment()) == 3, timeout=30)
            await _list_and_lag_agree(bootstrap, ours, active)
            await _unknown_topics_are_refused(bootstrap, unique_topic, ours["classic"])
            await _the_broker_refuses_an_admin_commit_while_there_are_members(bootstrap, unique_topic, active)
            await _resets_agree(bootstrap, unique_topic, ours, theirs, active, at_time)
    finally:
        for consumer in live:
            await consumer.close()


async def _list_and_lag_agree(bootstrap: str, ours: dict[str, str], active: dict[str, str]) -> None:
    groups = [*ours.values(), *active.values()]
    group_args = [arg for g in groups for arg in ("--group", g)]
    listed, described, offsets, our_list, our_stable, *our_lags = await asyncio.gather(
        java(bootstrap, "--list", "--state", "--type"),
        java(bootstrap, "--describe", "--state", *group_args),
        java(bootstrap, "--describe", *group_args),
        cli("groups", "list", "-b", bootstrap, "--format", "json"),
        cli("groups", "list", "-b", bootstrap, "--state", "stable,Reconciling", "--format", "json"),
        *(cli("groups", "lag", g, "-b", bootstrap, "--format", "json") for g in groups))

    # groups list: type and state as `--list --state --type`, members as `--describe --state`.
    their_list = {row[0]: (row[1].lower(), row[2]) for row in java_rows(listed.stdout, "GROUP")}
    their_members = {row[0]: int(row[-1]) for row in java_rows(described.stdout, "GROUP")}
    mine = {g["group_id"]: g for g in our_json(our_list)}
    for group in groups:
        assert (mine[group]["group_type"], mine[group]["state"]) == their_list[group], group
        assert mine[group]["members"] == their_members[group], group
    for protocol in PROTOCOLS:
        assert (mine[ours[protocol]]["state"], mine[ours[protocol]]["members"]) == ("Empty", 0)
        assert (mine[active[protocol]]["state"], mine[active[protocol]]["members"]) == ("Stable", 1)
        assert mine[ours[protocol]]["group_type"] == protocol
    stable = {g["group_id"] for g in our_json(our_stable)}
    assert set(active.values()) <= stable
    assert not stable & set(ours.values())  # (other tests' groups may change state meanwhile: not compared)

    # groups lag: CURRENT-OFFSET, LOG-END-OFFSET and LAG of `--describe`, row for row.
    their_lag = {(row[0], int(row[2])): (int(row[3]), int(row[4]), int(row[5]))
                 for row in java_rows(offsets.stdout, "GROUP")}
    for group, done in zip(groups, our_lags, strict=True):
        view = our_json(done)
        rows = {(group, r["partition"]): (r["committed"], r["end"], r["lag"]) for r in view["partitions"]}
        assert rows == {k: v for k, v in their_lag.items() if k[0] == group}
        assert rows == {(group, p): (o, RECORDS_PER_PARTITION, RECORDS_PER_PARTITION - o) for p, o in COMMITTED.items()}
        assert view["total_lag"] == sum(RECORDS_PER_PARTITION - o for o in COMMITTED.values())


async def _unknown_topics_are_refused(bootstrap: str, topic: str, group: str) -> None:
    missing_topic, missing_partition = await asyncio.gather(
        cli("groups", "reset-offsets", group, "-b", bootstrap, "--topic", f"{topic}-missing", "--to-earliest"),
        cli("groups", "reset-offsets", group, "-b", bootstrap, "--topic", f"{topic}:1,7", "--to-earliest"))
    again = await cli("groups", "reset-offsets", group, "-b", bootstrap, "--topic", f"{topic}-missing", "--to-earliest")
    for done in (missing_topic, again):  # asking did not create it (the broker auto-creates topics)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == f"aiokafka-lite: topic {topic + '-missing'!r} does not exist\n"
    assert (missing_partition.returncode, missing_partition.stdout) == (1, "")
    assert missing_partition.stderr == f"aiokafka-lite: partition(s) {topic}-7 do not exist (topic {topic!r} has 3)\n"


async def _the_broker_refuses_an_admin_commit_while_there_are_members(bootstrap: str, topic: str,
                                                                      active: dict[str, str]) -> None:
    # What a member joining between the state check and the commit would meet: the commit fails.
    async with admin_cluster(bootstrap) as cluster:
        for group in active.values():
            with pytest.raises(BrokerError) as refused:
                await commit_plan(cluster, group, [PlanRow(topic, 0, COMMITTED[0], 0)])
            assert refused.value.code == UNKNOWN_MEMBER_ID, refused.value  # both protocols answer so
        views = await asyncio.gather(*(describe_group(bootstrap, g) for g in active.values()))
    for view in views:
        assert {r.partition: r.committed for r in view.partitions} == COMMITTED


# Each step's options (a last ":P,..." goes after --topic T), run on our groups by us and on the twins
# by Kafka's tool, with what it must commit (partition -> offset; partitions it leaves alone keep theirs).
STEPS: list[tuple[list[str], dict[int, int]]] = [
    (["--shift-by", "-3"], {0: 2, 1: 7, 2: 0}),  # 2 - 3 clamped to the log start
    (["--to-offset", "15", ":0,2"], {0: 10, 2: 10}),  # clamped to the log end; partitions 0 and 2 only
    (["--to-datetime", "AT"], {0: 4, 1: 4, 2: 10}),  # partition 2 has no record that recent: log end
    (["--to-earliest"], {0: 0, 1: 0, 2: 0}),
    (["--to-latest", ":1"], {1: 10}),
]


def _step_args(topic: str, options: list[str], at_time: int) -> list[str]:
    """``--topic T[:P,...]`` and the mode's options of one of STEPS."""
    partitions = options[-1] if options[-1].startswith(":") else ""
    mode = [_iso(at_time) if o == "AT" else o for o in options if not o.startswith(":")]
    return ["--topic", topic + partitions, *mode]


def _rows(result: dict[str, Any], column: str) -> dict[int, int]:
    return {r["partition"]: r[column] for r in result["partitions"]}


async def _committed(bootstrap: str, groups: list[str]) -> list[dict[int, int | None]]:
    # Read back in this process: a CLI start per group costs a second.
    views = await asyncio.gather(*(describe_group(bootstrap, g) for g in groups))
    return [{r.partition: r.committed for r in view.partitions} for view in views]


async def _resets_agree(bootstrap: str, topic: str, ours: dict[str, str], theirs: dict[str, str],
                        active: dict[str, str], at_time: int) -> None:
    """STEPS one after the other: Kafka's tool --execute's each on the twins while we --execute the
    step before on ours, then dry-run this one: the same plan, then the same offsets committed."""
    after: list[dict[int, int]] = []  # what each step leaves committed
    for _options, plan in STEPS:
        after.append({**(after[-1] if after else COMMITTED), **plan})

    async def ours_run(number: int, execute: bool) -> list[dict[str, Any]]:
        extra = ["--execute"] if execute else []
        done = await asyncio.gather(*(cli("groups", "reset-offsets", ours[p], "-b", bootstrap,
                                          *_step_args(topic, STEPS[number][0], at_time), *extra, "--format", "json")
                                      for p in PROTOCOLS))
        results = [our_json(d) for d in done]
        for result in results:
            assert result["executed"] is execute
            assert _rows(result, "new") == STEPS[number][1]
            assert _rows(result, "current") == {p: (after[number - 1] if number else COMMITTED)[p]
                                                for p in STEPS[number][1]}
        if execute:
            assert await _committed(bootstrap, list(ours.values())) == [after[number]] * 2
        return results

    async def ours_chain(number: int) -> list[dict[str, Any]]:
        if number:
            await ours_run(number - 1, execute=True)
        return await ours_run(number, execute=False)

    for number, (options, plan) in enumerate(STEPS):
        refused = list(active.values()) if number == 0 else []  # Kafka's tool refuses them among the rest
        group_args = [arg for g in [*theirs.values(), *refused] for arg in ("--group", g)]
        their_run, dry, *mine_refused = await asyncio.gather(
            java(bootstrap, "--reset-offsets", *group_args, *_step_args(topic, options, at_time), "--execute"),
            ours_chain(number),
            *(cli("groups", "reset-offsets", g, "-b", bootstrap, *_step_args(topic, options, at_time))
              for g in refused))
        their_plan: dict[str, dict[int, int]] = {}
        for row in java_rows(their_run.stdout, "GROUP"):
            their_plan.setdefault(row[0], {})[int(row[2])] = int(row[3])
        assert [their_plan[theirs[p]] for p in PROTOCOLS] == [_rows(result, "new") for result in dry] == [plan] * 2
        assert await _committed(bootstrap, list(theirs.values())) == [after[number]] * 2
        for group, done in zip(refused, mine_refused, strict=True):
            assert (done.returncode, done.stdout) == (1, "")
            assert done.stderr.startswith(f"aiokafka-lite: cannot reset the offsets of group {group!r}: it is "
                                          "active (state Stable, 1 member(s))"), done.stderr
            assert (f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current "
                    "state is Stable.") in their_run.stdout
            assert group not in their_plan
    await ours_run(len(STEPS) - 1, execute=True)


def test_groups_errors_are_one_line(apache_kafka_broker, unique_group, unique_topic):
    bootstrap = apache_kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=1)
    cases = {
        ("lag", unique_group): (1, f"aiokafka-lite: group {unique_group!r} does not exist"),
        ("reset-offsets", unique_group, "--topic", unique_topic, "--to-earliest"):
            (1, f"aiokafka-lite: group {unique_group!r} does not exist"),
    }
    started = time.monotonic()
    for args, (code, line) in cases.items():
        done = run_cli("groups", *args, "-b", bootstrap)
        assert (done.returncode, done.stderr, done.stdout) == (code, line + "\n", "")
    assert time.monotonic() - started < 20


@pytest.mark.asyncio
async def test_on_tansu_list_shows_the_described_state_and_only_earliest_is_committed(tansu_broker, unique_topic,
                                                                                       unique_group):
    bootstrap = tansu_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=1)
    produce(bootstrap, unique_topic, [{"value": f"v{i}"} for i in range(10)], enable_idempotence=True)
    # Short session: Tansu answers a new group's first JoinGroup after half of it.
    async with Consumer(unique_topic, bootstrap_servers=bootstrap, group_id=unique_group, auto_offset_reset="earliest",
                        enable_auto_commit=False, session_timeout_ms=2000, heartbeat_interval_ms=500) as consumer:
        await poll_until(consumer, lambda got: len(got) >= 10)
        await consumer.commit({TopicPartition(unique_topic, 0): OffsetAndMetadata(7)})
    reset = ["groups", "reset-offsets", unique_group, "-b", bootstrap, "--topic", unique_topic]
    listed, latest_plan, latest, earliest = await asyncio.gather(
        cli("groups", "list", "-b", bootstrap, "--format", "json"), cli(*reset, "--to-latest"),
        cli(*reset, "--to-latest", "--execute"), cli(*reset, "--to-earliest", "--execute", "--format", "json"))
    [mine] = [g for g in our_json(listed) if g["group_id"] == unique_group]
    # Tansu 0.6 lists every group as "Unknown"; DescribeGroups knows better.
    assert (mine["group_type"], mine["state"], mine["members"]) == ("classic", "Empty", 0)
    # Its log end is wrong (1 + a batch's base offset, not 10), so the plan says so and is not committed...
    assert latest_plan.returncode == 0, latest_plan.stderr
    assert "* the broker is Tansu, so END and LAG may be too low" in latest_plan.stdout
    assert (latest.returncode, latest.stdout) == (1, "")
    assert latest.stderr.startswith("aiokafka-lite: not committing: the broker is Tansu, whose log-end offsets are "
                                    "wrong, and --to-latest depends on them")
    # ...while the log start is right, so --to-earliest is.
    result = our_json(earliest)
    assert (result["executed"], result["notes"], _rows(result, "new")) == (True, [], {0: 0})
    [view] = await asyncio.gather(describe_group(bootstrap, unique_group))
    assert [(p.partition, p.committed) for p in view.partitions] == [(0, 0)]
