"""The KIP-848 member (group_protocol="consumer") against Apache Kafka 4.3.1, before it is wired
into Consumer: a small real MemberHost (a SubscriptionState and a recording listener) drives it."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from aiokafka_lite import TopicPartition
from aiokafka_lite._net.cluster import Cluster
from aiokafka_lite.config import ConsumerConfig
from aiokafka_lite.consumer.wiring import make_cluster
from aiokafka_lite.errors import CommitFailedError, GroupProtocolError
from aiokafka_lite.group.consumer_protocol import offsets as offsets_io
from aiokafka_lite.group.consumer_protocol.member import Kip848Member
from aiokafka_lite.group.consumer_protocol.state import State
from aiokafka_lite.group.member import ListenerEvent
from aiokafka_lite.liveness.timers import LivenessTimers
from aiokafka_lite.protocol.messages import JOIN_GROUP, OFFSET_COMMIT, OFFSET_FETCH
from aiokafka_lite.structs import OffsetAndMetadata
from aiokafka_lite.subscription import SubscriptionState
from aiokafka_lite.testing.helpers import create_topic

pytestmark = pytest.mark.asyncio


class Host:
    """What the member needs of a consumer: a subscription, a listener that records, commits."""

    def __init__(self, config: ConsumerConfig, cluster: Cluster, timers: LivenessTimers) -> None:
        self._config = config
        self._cluster = cluster
        self._subscription = SubscriptionState()
        self.timers = timers
        self.calls: list[tuple[ListenerEvent, set[TopicPartition]]] = []
        self.committed_before_revoke: list[set[TopicPartition]] = []
        self.joined = 0
        self.woken = asyncio.Event()

    @property
    def config(self) -> ConsumerConfig:
        return self._config

    def subscription_state(self) -> SubscriptionState:
        return self._subscription

    async def until_polled(self) -> None:
        return None  # the test polls the member itself

    def callbacks_done(self) -> None:
        return None

    async def refresh_pattern(self) -> bool:
        await self._cluster.refresh_metadata(None, timeout=None)
        return self._subscription.match_pattern(self._cluster.topics(exclude_internal=True))

    @property
    def cluster(self) -> Cluster:
        return self._cluster

    async def run_listener(self, event: ListenerEvent, partitions: set[TopicPartition]) -> None:
        self.calls.append((event, set(partitions)))

    async def commit_before_revoke(self, partitions: set[TopicPartition]) -> None:
        self.committed_before_revoke.append(set(partitions))

    async def drain_commits(self) -> None:
        return None

    def member_joined(self) -> None:
        self.joined += 1
        self.timers.on_join(time.monotonic())

    def wake(self) -> None:
        self.woken.set()

    def events(self, kind: ListenerEvent) -> list[set[TopicPartition]]:
        return [parts for event, parts in self.calls if event is kind]


class Member:
    """One member plus its host; poll() stamps the poll clock and runs due rebalance steps."""

    def __init__(self, broker: Any, group: str, **settings: Any) -> None:
        self.config = ConsumerConfig.from_kwargs(
            bootstrap_servers=broker.bootstrap_servers, group_id=group, group_protocol="consumer",
            **settings)
        self.cluster = make_cluster(self.config)
        c = self.config
        self.timers = LivenessTimers(c.session_timeout, c.heartbeat_interval, c.max_poll_interval,
                                     c.retry_backoff, c.retry_backoff_max)
        self.host = Host(self.config, self.cluster, self.timers)
        self.member = Kip848Member(self.cluster, self.config, self.host, self.timers, threading.Lock())

    async def start(self, *topics: str) -> None:
        await self.cluster.bootstrap()
        self.host.subscription_state().subscribe(topics)
        self.member.subscription_changed("subscribe")

    async def poll(self) -> None:
        self.timers.on_poll(time.monotonic())
        self.member.before_poll()
        if self.member.rebalance_due():
            await self.member.rebalance_step()

    async def poll_until(self, condition: Any, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out; metrics: {self.member.metrics()}"
            await self.poll()
            await asyncio.sleep(0.05)

    def assigned(self) -> set[TopicPartition]:
        return self.host.subscription_state().assigned()

    async def close(self) -> None:
        try:
            await self.member.leave("test over", timeout=5)
        finally:
            await self.member.stop_liveness()
            await self.cluster.close()


def parts(topic: str, *numbers: int) -> set[TopicPartition]:
    return {TopicPartition(topic, n) for n in numbers}


@pytest.fixture
def kafka(apache_kafka_broker: Any) -> Any:
    return apache_kafka_broker


async def test_join_takes_every_partition_then_a_second_member_splits_them(
        kafka: Any, unique_topic: str, unique_group: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    create_topic(kafka, unique_topic, partitions=4)
    a = Member(kafka, unique_group)
    b = Member(kafka, unique_group)
    try:
        await a.start(unique_topic)
        await a.poll_until(lambda: len(a.assigned()) == 4 and a.member.machine.state is State.STABLE)
        assert a.host.events(ListenerEvent.ASSIGNED) == [parts(unique_topic, 0, 1, 2, 3)]
        assert a.member.metrics()["member_epoch"] > 0
        member_id = a.member.metrics()["member_id"]

        await b.start(unique_topic)

        async def both() -> None:
            while not (len(a.assigned()) == 2 and len(b.assigned()) == 2):
                await asyncio.gather(a.poll(), b.poll())
                await asyncio.sleep(0.05)
        await asyncio.wait_for(both(), 30)
        assert a.assigned() | b.assigned() == parts(unique_topic, 0, 1, 2, 3)
        # a revoked exactly the partitions that moved to b, and nothing else; with auto-commit the
        # reconciliation first committed everything a had consumed, as Java's consumer does
        revoked = a.host.events(ListenerEvent.REVOKED)
        assert revoked == [b.assigned()]
        assert a.host.committed_before_revoke == [parts(unique_topic, 0, 1, 2, 3)]
        assert a.host.events(ListenerEvent.LOST) == []
        assert b.host.events(ListenerEvent.REVOKED) == []
        assert a.member.metrics()["last_rebalance_partitions"] == {"assigned": 0, "revoked": 2, "lost": 0}
        assert a.member.metrics()["member_id"] == member_id  # KIP-1082: kept
        assert a.member.metrics()["group_protocol"] == "consumer"
    finally:
        await asyncio.gather(a.close(), b.close())
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []  # healthy: quiet


async def test_poll_lapse_leaves_within_100ms_and_the_other_member_takes_over(
        kafka: Any, unique_topic: str, unique_group: str, caplog: pytest.LogCaptureFixture) -> None:
    create_topic(kafka, unique_topic, partitions=2)
    a = Member(kafka, unique_group, max_poll_interval_ms=3000)
    b = Member(kafka, unique_group)
    try:
        await a.start(unique_topic)
        await b.start(unique_topic)

        async def split() -> None:
            while not (a.assigned() and b.assigned() and a.member.machine.state is State.STABLE
                       and b.member.machine.state is State.STABLE):
                await asyncio.gather(a.poll(), b.poll())
                await asyncio.sleep(0.05)
        await asyncio.wait_for(split(), 30)
        with caplog.at_level(logging.WARNING, logger="aiokafka_lite.consumer"):
            a.timers.on_poll(time.monotonic())  # a stops polling now
            await b.poll_until(lambda: len(b.assigned()) == 2, timeout=20)
        delay = a.member.metrics()["last_leave_delay_seconds"]
        assert delay is not None
        assert 0 <= delay < 0.1
        assert any("exceeds max_poll_interval_ms=3000" in r.getMessage() for r in caplog.records)
        assert a.member.machine.state is State.STALE
        with pytest.raises(CommitFailedError, match="max_poll_interval_ms=3000"):
            await a.member.commit({TopicPartition(unique_topic, 0): OffsetAndMetadata(1)}, timeout=5)
        # the next poll gives the old partitions up as lost and rejoins
        lost_before = a.assigned()
        await a.poll()
        assert a.host.events(ListenerEvent.LOST) == [lost_before]
        assert a.member.machine.state is State.JOINING
    finally:
        await asyncio.gather(a.close(), b.close())


async def test_commit_and_fetch_with_member_epoch(kafka: Any, unique_topic: str, unique_group: str) -> None:
    create_topic(kafka, unique_topic, partitions=1)
    a = Member(kafka, unique_group)
    tp = TopicPartition(unique_topic, 0)
    try:
        await a.start(unique_topic)
        await a.poll_until(lambda: a.assigned() == {tp} and a.member.is_stable)
        await a.member.commit({tp: OffsetAndMetadata(42, "meta")}, timeout=10)
        got = await a.member.fetch_committed([tp], timeout=10)
        assert got[tp] is not None
        assert (got[tp].offset, got[tp].metadata) == (42, "meta")
        # The broker's answer to a commit with another epoch (what a commit racing a heartbeat
        # sees): STALE_MEMBER_EPOCH, which the member retries after its next heartbeat.
        m = a.member.machine
        conn = await a.cluster.coordinator_connection(unique_group)
        body = offsets_io.commit_body(unique_group, m.member_id, m.member_epoch + 7, None,
                                      {tp: OffsetAndMetadata(43)})
        response = await conn.send(OFFSET_COMMIT, conn.version_for(OFFSET_COMMIT, 9), body)
        assert offsets_io.commit_outcome(response, unique_group).stale
        await a.member.commit({tp: OffsetAndMetadata(44)}, timeout=10)
        assert (await a.member.fetch_committed([tp], timeout=10))[tp] == OffsetAndMetadata(44, "", None)
    finally:
        await a.close()


async def test_fenced_member_loses_its_partitions_without_commit_and_rejoins(
        kafka: Any, unique_topic: str, unique_group: str) -> None:
    create_topic(kafka, unique_topic, partitions=2)
    a = Member(kafka, unique_group)
    try:
        await a.start(unique_topic)
        await a.poll_until(lambda: len(a.assigned()) == 2 and a.member.machine.state is State.STABLE)
        a.member.machine.member_epoch += 5  # the broker answers FENCED_MEMBER_EPOCH
        await a.poll_until(lambda: bool(a.host.events(ListenerEvent.LOST)), timeout=15)
        assert a.host.events(ListenerEvent.LOST) == [parts(unique_topic, 0, 1)]
        assert a.host.committed_before_revoke == []
        await a.poll_until(lambda: len(a.assigned()) == 2 and a.member.machine.state is State.STABLE)
        assert a.host.events(ListenerEvent.ASSIGNED)[-1] == parts(unique_topic, 0, 1)
    finally:
        await a.close()


async def test_static_member_restart_keeps_its_assignment(
        kafka: Any, unique_topic: str, unique_group: str) -> None:
    create_topic(kafka, unique_topic, partitions=2)
    a = Member(kafka, unique_group, group_instance_id="static-a")
    b = Member(kafka, unique_group, group_instance_id="static-b")
    a2 = Member(kafka, unique_group, group_instance_id="static-a")
    try:
        await a.start(unique_topic)
        await b.start(unique_topic)

        async def split() -> None:
            while not (len(a.assigned()) == 1 and len(b.assigned()) == 1):
                await asyncio.gather(a.poll(), b.poll())
                await asyncio.sleep(0.05)
        await asyncio.wait_for(split(), 30)
        before = a.assigned()
        # b may have revoked one partition while the two settled (when it was assigned both first).
        revoked_by_b = b.host.events(ListenerEvent.REVOKED)
        await a.close()  # leaves with epoch -2: the broker keeps the static member's assignment
        await a2.start(unique_topic)
        await a2.poll_until(lambda: a2.assigned() == before and a2.member.is_stable)
        assert b.host.events(ListenerEvent.REVOKED) == revoked_by_b  # b saw no rebalance
        assert a2.member.metrics()["member_id"] != a.member.metrics()["member_id"]
    finally:
        await asyncio.gather(a2.close(), b.close())


async def test_a_classic_group_of_another_kind_is_a_typed_error(
        kafka: Any, unique_topic: str, unique_group: str) -> None:
    create_topic(kafka, unique_topic, partitions=1)
    a = Member(kafka, unique_group)
    try:
        await a.cluster.bootstrap()
        conn = await a.cluster.coordinator_connection(unique_group)
        version = conn.version_for(JOIN_GROUP)
        join = {"group_id": unique_group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000,
                "member_id": "", "protocol_type": "connect", "protocols": [{"name": "x", "metadata": b""}]}
        response = await conn.send(JOIN_GROUP, version, join)
        if response["error_code"] == 79:  # MEMBER_ID_REQUIRED
            response = await conn.send(JOIN_GROUP, version, {**join, "member_id": response["member_id"]})
        assert response["error_code"] == 0
        await a.start(unique_topic)
        with pytest.raises(GroupProtocolError, match="group_protocol='classic'"):
            await a.poll_until(lambda: False, timeout=15)
        assert isinstance(a.member.fatal_error, GroupProtocolError)
    finally:
        await a.close()


async def test_pattern_subscription_uses_the_broker_regex(
        kafka: Any, unique_topic: str, unique_group: str) -> None:
    create_topic(kafka, f"{unique_topic}-a", partitions=1)
    create_topic(kafka, f"{unique_topic}-b", partitions=1)
    a = Member(kafka, unique_group)
    try:
        await a.cluster.bootstrap()
        a.host.subscription_state().subscribe_pattern(f"{unique_topic}-.*")
        a.member.subscription_changed("subscribe")
        await a.poll_until(lambda: len(a.assigned()) == 2 and a.member.is_stable)
        assert a.member.machine.subscription.regex == f"{unique_topic}-.*"  # matched by the broker
        assert a.assigned() == {TopicPartition(f"{unique_topic}-a", 0), TopicPartition(f"{unique_topic}-b", 0)}
        assert a.host.subscription_state().topics == {f"{unique_topic}-a", f"{unique_topic}-b"}
    finally:
        await a.close()


async def test_a_former_members_fetch_reads_the_committed_offset(kafka: Any, unique_topic: str,
                                                                 unique_group: str) -> None:
    """The broker no longer knows the member (removed, or fenced, before the member learnt it):
    it refuses the member's OffsetFetch, and the committed offset is read from outside the group
    instead of being taken for none (which would let auto_offset_reset move the position)."""
    create_topic(kafka, unique_topic, partitions=1)
    a = Member(kafka, unique_group)
    tp = TopicPartition(unique_topic, 0)
    try:
        async with asyncio.timeout(60):
            await a.start(unique_topic)
            await a.poll_until(lambda: a.assigned() == {tp} and a.member.is_stable)
            await a.member.commit({tp: OffsetAndMetadata(42)}, timeout=10)
            await a.member.stop_liveness()  # no heartbeat tells the member what follows
            m = a.member.machine
            real_id = m.member_id
            m.member_id = "someone-the-broker-never-saw"
            conn = await a.cluster.coordinator_connection(unique_group)
            body = offsets_io.fetch_body(unique_group, m.member_id, m.member_epoch, [tp])
            refused = offsets_io.fetch_outcome(await conn.send(OFFSET_FETCH, conn.version_for(OFFSET_FETCH, 9), body))
            assert refused.gone  # what the broker answers: UNKNOWN_MEMBER_ID
            got = await a.member.fetch_committed([tp], timeout=10)
            assert got[tp] is not None  # before the fix: None
            assert got[tp].offset == 42
            m.member_id = real_id
    finally:
        await a.close()
