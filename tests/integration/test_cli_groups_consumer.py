"""`aiokafka-lite groups describe` on Kafka 4.3.1 groups whose member is Kafka's Java consumer, one per
group protocol: KIP-848 "consumer" groups (ConsumerGroupDescribe) and classic ones (DescribeGroups)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.java_clients import VerifiableConsumer

CLI = [sys.executable, "-m", "aiokafka_lite"]
ENV = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}


def describe(group: str, bootstrap: str) -> tuple[dict[str, Any], str]:
    """The group as --format json (parsed) and as text."""
    results = [subprocess.run([*CLI, "groups", "describe", group, "-b", bootstrap, *extra], capture_output=True,
                              text=True, timeout=60, env=ENV, check=False)
               for extra in (["--format", "json"], [])]
    for result in results:
        assert result.returncode == 0, result.stderr
    return json.loads(results[0].stdout), results[1].stdout


def _lag_rows(view: dict[str, Any]) -> dict[int, tuple[int, int, int, str | None]]:
    return {r["partition"]: (r["committed"], r["end"], r["lag"], r["member_id"]) for r in view["partitions"]}


@pytest.mark.parametrize("group_protocol", ["consumer", "classic"])
def test_describe_shows_a_java_members_assignment_epochs_and_lag(apache_kafka_broker, unique_topic, unique_group,
                                                                 group_protocol):
    bootstrap = apache_kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=3)
    produce(bootstrap, unique_topic, [{"value": f"v{i}", "partition": i % 3} for i in range(30)])
    tps = {TopicPartition(unique_topic, p) for p in range(3)}
    with VerifiableConsumer(bootstrap, unique_topic, unique_group, group_protocol=group_protocol) as java:
        java.wait_for(lambda: java.committed == {tp: 10 for tp in tps}, timeout=60, what="all 30 committed")
        view, text = describe(unique_group, bootstrap)
        assert java.assignment == tps  # still the one member holding everything
        assert java.stop() is True

    assert view["group_type"] == group_protocol
    assert view["state"] == "Stable"
    assert view["protocol_type"] == "consumer"
    [member] = view["members"]
    assert member["client_id"].startswith(f"consumer-{unique_group}-")  # the Java client's default id
    assert member["client_host"] == "/127.0.0.1"
    assert member["group_instance_id"] is None
    assert member["subscription"] == [unique_topic]
    assigned = [{"topic": unique_topic, "partition": p} for p in range(3)]
    assert member["assignment"] == assigned
    assert _lag_rows(view) == {p: (10, 10, 0, member["member_id"]) for p in range(3)}
    if group_protocol == "consumer":
        assert view["protocol"] == "uniform"  # the broker's default assignor (group.consumer.assignors)
        assert member["target_assignment"] == assigned  # reconciled: nothing left to move
        # The member has caught up with the group's epoch and the assignment was computed at it.
        assert view["group_epoch"] >= 1
        assert member["member_epoch"] == view["group_epoch"] == view["assignment_epoch"]
        assert member["subscription_regex"] is None
        assert (f"state Stable, consumer protocol (KIP-848), assignor uniform, group epoch {view['group_epoch']}, "
                f"assignment epoch {view['assignment_epoch']}, 1 member(s)") in text
        assert "MEMBER  CLIENT-ID  HOST  INSTANCE-ID  EPOCH  SUBSCRIPTION  ASSIGNMENT  TARGET-ASSIGNMENT" in text
        partitions = ",".join(f"{unique_topic}-{p}" for p in range(3))
        assert (f"{member['member_id']}  {member['client_id']}  /127.0.0.1  -  {member['member_epoch']}  "
                f"{unique_topic}  {partitions}  {partitions}") in text
    else:
        assert view["protocol"] == "range"  # VerifiableConsumer's default assignor
        assert (view["group_epoch"], view["assignment_epoch"]) == (None, None)
        assert (member["member_epoch"], member["target_assignment"]) == (None, None)
        assert f"group {unique_group}: state Stable, protocol consumer/range, 1 member(s)" in text
        assert "MEMBER  CLIENT-ID  HOST  INSTANCE-ID  SUBSCRIPTION  ASSIGNMENT\n" in text
    assert f"{unique_topic}  0  10  10  0  {member['member_id']}" in text

    # The member left cleanly; records arriving now are lag, and the group keeps its type and offsets.
    produce(bootstrap, unique_topic, [{"value": f"late{i}", "partition": 1} for i in range(7)])
    view, text = describe(unique_group, bootstrap)
    assert view["group_type"] == group_protocol
    assert view["state"] == "Empty"
    assert view["members"] == []
    assert _lag_rows(view) == {0: (10, 10, 0, None), 1: (10, 17, 7, None), 2: (10, 10, 0, None)}
    assert f"{unique_topic}  1  10  17  7  -" in text


def test_describe_of_a_group_that_does_not_exist_says_so_in_one_line(apache_kafka_broker, unique_group):
    result = subprocess.run([*CLI, "groups", "describe", unique_group, "-b", apache_kafka_broker.bootstrap_servers],
                            capture_output=True, text=True, timeout=60, env=ENV, check=False)
    # ConsumerGroupDescribe says GROUP_ID_NOT_FOUND, so DescribeGroups is asked, and says the same:
    # as kafka-consumer-groups.sh, the group does not exist (not a raw broker error).
    assert result.returncode == 1
    assert result.stderr == f"aiokafka-lite: group {unique_group!r} does not exist\n"
    assert result.stdout == ""
