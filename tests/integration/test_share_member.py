"""The KIP-932 share-group member (group/share/member.py) against Apache Kafka 4.3.1: joining and the
assignment two members get, the poll-deadline lapse (leave, one WARNING, rejoin), close() leaving at
once, and a group id that another group type owns. The group is watched from outside with
ShareGroupDescribe on the coordinator (an observer's own Cluster). Figures are printed (-s).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite._net import Cluster, ConnectionOptions
from aiokafka_lite.errors import GroupProtocolError
from aiokafka_lite.group.share.member import ShareMember, ShareMemberSettings
from aiokafka_lite.group.share.state import State
from aiokafka_lite.protocol.messages import SHARE_GROUP_DESCRIBE
from aiokafka_lite.testing.helpers import create_topic

from ._consumers import until

pytestmark = pytest.mark.asyncio

OPTIONS = ConnectionOptions(request_timeout=10.0, retry_backoff=0.05, retry_backoff_max=0.5)
DEADLINE = 30.0  # seconds for what the broker does in the background (coordinator, assignment)
SESSION = 10.0  # the fixture's group.share.session.timeout.ms


def servers(bootstrap: str) -> list[tuple[str, int]]:
    return [(host, int(port)) for host, _, port in (s.rpartition(":") for s in bootstrap.split(","))]


@asynccontextmanager
async def cluster_of(broker: Any) -> AsyncIterator[Cluster]:
    cluster = Cluster(OPTIONS, servers(broker.bootstrap_servers))
    try:
        yield cluster
    finally:
        await cluster.close()


@asynccontextmanager
async def member_of(broker: Any, group: str, topic: str, **settings: Any) -> AsyncIterator[ShareMember]:
    async with cluster_of(broker) as cluster:
        member = ShareMember(cluster, group, ShareMemberSettings(**settings))
        try:
            member.subscribe([topic])
            yield member
        finally:
            await member.close(timeout=5.0)


class Observer:
    """ShareGroupDescribe of one group, sent to its coordinator."""

    def __init__(self, cluster: Cluster, group: str) -> None:
        self.cluster, self.group = cluster, group

    async def describe(self) -> dict[str, Any]:
        conn = await self.cluster.coordinator_connection(self.group, timeout=10.0)
        answer = await conn.send(SHARE_GROUP_DESCRIBE, conn.version_for(SHARE_GROUP_DESCRIBE),
                                 {"group_ids": [self.group]}, timeout=10.0)
        [group] = answer["groups"]
        return group

    async def members(self) -> dict[str, dict[str, Any]]:
        return {m["member_id"]: m for m in (await self.describe())["members"]}

    async def when(self, condition: Callable[[dict[str, dict[str, Any]]], bool], what: str,
                   timeout: float = DEADLINE) -> float:
        """Describe every 20 ms until ``condition(members)``; the monotonic time it first held."""
        deadline = time.monotonic() + timeout
        while True:
            members = await self.members()
            if condition(members):
                return time.monotonic()
            assert time.monotonic() < deadline, f"not within {timeout} s: {what}; members {members}"
            await asyncio.sleep(0.02)


async def polled_until(member: ShareMember, condition: Callable[[], bool], what: str,
                       timeout: float = DEADLINE) -> None:
    """Keep the member's poll clock stamped (as poll() will) until ``condition()``."""
    def stamped() -> bool:
        member.before_poll()
        return condition()
    await until(stamped, timeout, what)


async def test_two_members_assignments_cover_the_partitions(apache_kafka_broker: Any, unique_topic: str,
                                                            unique_group: str, caplog: pytest.LogCaptureFixture
                                                            ) -> None:
    broker = apache_kafka_broker
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    create_topic(broker, unique_topic, partitions=4)
    every = {TopicPartition(unique_topic, p) for p in range(4)}
    async with asyncio.timeout(60), member_of(broker, unique_group, unique_topic) as a, \
            member_of(broker, unique_group, unique_topic) as b, cluster_of(broker) as watcher:
        observer = Observer(watcher, unique_group)

        def settled() -> bool:
            return (a.in_group and b.in_group and bool(a.assignment()) and bool(b.assignment())
                    and a.assignment() | b.assignment() == every)
        await until(lambda: (a.before_poll(), b.before_poll(), settled())[-1], DEADLINE,
                    "both members in the group, each assigned, together every partition")
        members = await observer.members()
        print(f"\nA {sorted(p.partition for p in a.assignment())} epoch {a.member_epoch}, "
              f"B {sorted(p.partition for p in b.assignment())} epoch {b.member_epoch}; "
              f"assignor {(await observer.describe())['assignor_name']}")
        # KIP-932: a share group's assignor may give a partition to more than one member; each
        # member is assigned, and together they cover every partition of the subscribed topic.
        assert set(members) == {a.member_id, b.member_id}
        for member in (a, b):
            described = members[member.member_id]["assignment"]["topic_partitions"]
            assert {TopicPartition(t["topic_name"], p) for t in described for p in t["partitions"]} \
                == member.assignment(), "the member's assignment is the one the broker describes"
            assert set(member.assignment_by_id()) == {broker_topic_id(described)}
        metrics = a.metrics()
        assert metrics["group_state"] == "STABLE"
        assert metrics["member_id"] == a.member_id
        assert metrics["heartbeat_interval_ms"] == 500
        assert metrics["heartbeats_sent"] >= 1
        assert metrics["last_heartbeat_seconds_ago"] < 5.0
        # A new group's coordinator may answer NOT_COORDINATOR or LOAD_IN_PROGRESS to the first
        # heartbeats (INFO): normal, retried, never a WARNING.
        assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def keep_polling(member: ShareMember) -> None:
    """A live member: its poll clock stamped every 50 ms until cancelled."""
    while True:
        member.before_poll()
        await asyncio.sleep(0.05)


def broker_topic_id(described: list[dict[str, Any]]) -> Any:
    [entry] = described
    return entry["topic_id"]


async def test_a_subscription_change_goes_out_and_the_new_topic_is_assigned_by_name(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    broker = apache_kafka_broker
    other = f"{unique_topic}-more"
    create_topic(broker, unique_topic)
    async with asyncio.timeout(60), member_of(broker, unique_group, unique_topic) as member, \
            cluster_of(broker) as watcher:
        await polled_until(member, lambda: member.assignment() == {TopicPartition(unique_topic, 0)}, "the first topic")
        epoch = member.member_epoch
        create_topic(broker, other, partitions=2)  # unknown to the member's metadata until it asks
        member.subscribe([unique_topic, other])
        wanted = {TopicPartition(unique_topic, 0), TopicPartition(other, 0), TopicPartition(other, 1)}
        await polled_until(member, lambda: member.assignment() == wanted, "both topics assigned, by name")
        assert member.member_epoch > epoch
        [described] = (await Observer(watcher, unique_group).members()).values()
        assert sorted(described["subscribed_topic_names"]) == sorted([unique_topic, other])


@pytest.mark.parametrize("fence", ["epoch", "member_id"])
async def test_a_fenced_member_rejoins_with_epoch_0(apache_kafka_broker: Any, unique_topic: str, unique_group: str,
                                                    fence: str, caplog: pytest.LogCaptureFixture) -> None:
    """The broker fences a heartbeat at an epoch it did not give (FENCED_MEMBER_EPOCH) or from a
    member it does not know (UNKNOWN_MEMBER_ID): the member rejoins at once with epoch 0."""
    broker = apache_kafka_broker
    create_topic(broker, unique_topic)
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    async with asyncio.timeout(60), member_of(broker, unique_group, unique_topic) as member:
        await polled_until(member, lambda: member.in_group and bool(member.assignment()), "joined")
        # Stand-ins for a session the broker ended: the next heartbeat carries what it never gave.
        if fence == "epoch":
            member.machine.member_epoch += 10
        else:
            member.machine.member_id = "unknown-to-the-broker-000"
        await polled_until(member, lambda: member.machine.fenced == 1 and member.in_group
                           and bool(member.assignment()), "fenced, then back in the group")
        codes = [r.getMessage() for r in caplog.records if "no longer knows member" in r.getMessage()]
        print(f"\n{fence}: {codes}; rejoined at epoch {member.member_epoch}")
        assert len(codes) == 1
        assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_poll_lapse_leaves_at_the_deadline_warns_once_and_rejoins_on_the_next_poll(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, caplog: pytest.LogCaptureFixture) -> None:
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    every = {TopicPartition(unique_topic, p) for p in range(2)}
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    async with asyncio.timeout(60), member_of(broker, unique_group, unique_topic, max_poll_interval_ms=2000) as a, \
            member_of(broker, unique_group, unique_topic) as b, cluster_of(broker) as watcher:
        observer = Observer(watcher, unique_group)
        keep_b_polling = asyncio.create_task(keep_polling(b))
        try:
            await polled_until(a, lambda: a.in_group and b.in_group and bool(a.assignment()), "A and B in the group")
            first_id = a.member_id
            await observer.when(lambda ms: set(ms) == {a.member_id, b.member_id}, "both described")
            a.before_poll()  # the last poll: the deadline is 2 s from here
            deadline = time.monotonic() + 2.0
            gone = await observer.when(lambda ms: a.member_id not in ms, "A gone after its poll deadline")
            await until(lambda: a.state is State.STALE, 5.0, "A's leave answered")
            leave_delay = a.metrics()["last_leave_delay_seconds"]
            print(f"\nleave answered {leave_delay * 1000:.1f} ms after the poll deadline; describe stopped "
                  f"listing A {(gone - deadline) * 1000:.0f} ms after it")
            assert 0.0 <= leave_delay < 0.1, "the leave heartbeat is answered within 100 ms of the deadline"
            assert gone - deadline < 1.0, "the broker dropped A at once (not after the 10 s session)"
            warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(warnings) == 1, [r.getMessage() for r in warnings]
            assert "max_poll_interval_ms=2000" in warnings[0].getMessage()
            await until(lambda: b.assignment() == every, DEADLINE, "B assigned every partition once A left")
            assert a.assignment() == set()
            assert a.metrics()["poll_interval_lapses"] == 1

            await polled_until(a, lambda: a.in_group and bool(a.assignment()), "A back in the group")
            assert a.member_id == first_id, "the rejoin keeps the member id"
            await observer.when(lambda ms: a.member_id in ms, "A described again")
            assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
        finally:
            keep_b_polling.cancel()
            await asyncio.wait([keep_b_polling])


async def test_close_leaves_at_once(apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    broker = apache_kafka_broker
    create_topic(broker, unique_topic)
    async with asyncio.timeout(60), cluster_of(broker) as watcher, cluster_of(broker) as cluster:
        observer = Observer(watcher, unique_group)
        member = ShareMember(cluster, unique_group)
        member.subscribe([unique_topic])
        await polled_until(member, lambda: member.in_group and bool(member.assignment()), "member joined")
        await observer.when(lambda ms: member.member_id in ms, "member described")
        began = time.monotonic()
        await member.close(timeout=5.0)
        closed = time.monotonic()
        gone = await observer.when(lambda ms: member.member_id not in ms, "member gone", timeout=SESSION)
        print(f"\nclose() took {(closed - began) * 1000:.1f} ms; describe stopped listing the member "
              f"{(gone - began) * 1000:.0f} ms after close() began")
        assert gone - began < 1.0, "close() left the group (not the 10 s session timeout)"
        assert member.state is State.UNSUBSCRIBED
        with pytest.raises(Exception, match="closed"):
            member.before_poll()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_a_group_id_of_a_consumer_group_is_refused_at_once(apache_kafka_broker: Any, unique_topic: str,
                                                                 unique_group: str, protocol: str) -> None:
    broker = apache_kafka_broker
    create_topic(broker, unique_topic)
    async with asyncio.timeout(60):
        async with Consumer(unique_topic, bootstrap_servers=broker.bootstrap_servers, group_id=unique_group,
                            group_protocol=protocol, auto_offset_reset="earliest") as consumer:
            while not consumer.assignment():
                await consumer.poll(timeout=0.2)
            async with member_of(broker, unique_group, unique_topic) as member:
                began = time.monotonic()
                await until(lambda: member.fatal_error is not None, 10.0, "the typed error")
                refused = time.monotonic() - began
                with pytest.raises(GroupProtocolError) as caught:
                    member.before_poll()
                print(f"\n{protocol} group: refused in {refused * 1000:.0f} ms: {caught.value}")
                assert "is not a share group" in str(caught.value)
                assert "group id of its own" in str(caught.value)
                assert member.state is State.FATAL
                assert not member.in_group
                with pytest.raises(GroupProtocolError):
                    member.before_poll()  # raised again on every call: the membership is over


async def test_a_broker_without_share_groups_gives_the_typed_error(kafka39_broker: Any, unique_topic: str,
                                                                   unique_group: str) -> None:
    create_topic(kafka39_broker, unique_topic)
    async with asyncio.timeout(60), member_of(kafka39_broker, unique_group, unique_topic) as member:
        began = time.monotonic()
        await until(lambda: member.fatal_error is not None, 10.0, "the typed error")
        refused = time.monotonic() - began
        with pytest.raises(GroupProtocolError) as caught:
            member.before_poll()
        print(f"\nKafka 3.9.1: refused in {refused * 1000:.0f} ms: {caught.value}")
        assert "Apache Kafka 4.1+ with share groups enabled" in str(caught.value)
