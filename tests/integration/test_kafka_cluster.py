"""Three Apache Kafka 4.3.1 brokers and a controller (aiokafka_lite.testing.KafkaCluster), replicated
topics (replication factor 3, min.insync.replicas 2), and our consumers through broker faults.

Kafka's own system test is the model: tests/kafkatest/tests/client/consumer_test.py in apache/kafka
(test_broker_rolling_bounce: a rolling bounce of every broker while a group consumes with manual
commits; nothing lost, nothing read twice, no rebalance).

The rolling bounce's figures (longest pause of a partition, seconds to drain the backlog after
production stopped) are appended to the file named by $CLUSTER_REPORT (JSON lines), if set.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, TopicPartition
from aiokafka_lite.errors import KafkaError
from aiokafka_lite.testing.helpers import produce
from aiokafka_lite.testing.kafka_cluster import BROKER_IDS, KafkaCluster

from ._consumers import poll_until, report, until
from ._ledger import CommitLedger
from ._steady import SteadyProducer

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]
PARTITIONS = 6
MEMBERS = 3
ROUNDS = 3  # rolling bounces over every broker, as the issue asks (Kafka's system test does 5)


@pytest.fixture
def cluster(kafka_cluster: KafkaCluster) -> KafkaCluster:
    return kafka_cluster


async def test_the_cluster_replicates_and_names_leaders_and_coordinators(
        cluster: KafkaCluster, unique_topic: str, unique_group: str) -> None:
    cluster.create_topic(unique_topic, partitions=PARTITIONS)
    tp = TopicPartition(unique_topic, 0)
    replicas, in_sync = cluster.replicas_of(tp)
    assert sorted(replicas) == sorted(in_sync) == list(BROKER_IDS)
    assert cluster.leader_of(tp) in BROKER_IDS
    produce(cluster.bootstrap_servers, unique_topic, [{"value": f"v{i}", "partition": i % PARTITIONS}
                                                      for i in range(300)])
    async with Consumer(unique_topic, bootstrap_servers=cluster.bootstrap_servers, group_id=unique_group,
                        auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        got = await poll_until(consumer, lambda got: len(got) >= 300)
        assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(300))
        await consumer.commit()
        assert cluster.coordinator_of(unique_group) in BROKER_IDS


class Member(ConsumerRebalanceListener):
    """A group member committing after every poll, its reads and commits kept in the ledger."""

    def __init__(self, name: str, consumer: Consumer, ledger: CommitLedger, progress: dict[int, float],
                 pauses: dict[int, float], values: dict[bytes, set[tuple[int, int]]]) -> None:
        self.name, self.consumer, self.ledger, self.progress, self.pauses = name, consumer, ledger, progress, pauses
        self.values = values
        self.assignments = 0
        self.positions: dict[int, int] = {}
        self.commit_failures = 0

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.assignments += 1

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.ledger.released(self.name, [tp.partition for tp in revoked])

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.ledger.released(self.name, [tp.partition for tp in lost])

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self.consumer.poll(timeout=0.2)
            for record in batch:
                self.values.setdefault(record.value, set()).add((record.partition, record.offset))
            for tp in batch.partitions():
                offsets = [r.offset for r in batch.records(tp)]
                self.ledger.read(self.name, tp.partition, offsets)
                self.positions[tp.partition] = offsets[-1] + 1
            if not batch:
                continue
            try:
                await self.consumer.commit()
            except KafkaError as exc:  # e.g. the coordinator moving: the next commit covers these
                self.commit_failures += 1
                logging.getLogger(__name__).info("%s: commit failed: %r", self.name, exc)
                continue
            owned = {tp.partition for tp in self.consumer.assignment()}
            self.ledger.committed(self.name, {p: o for p, o in self.positions.items() if p in owned})
            now = loop.time()
            for tp in batch.partitions():
                if tp.partition in self.progress:
                    gap = now - self.progress[tp.partition]
                    self.pauses[tp.partition] = max(gap, self.pauses.get(tp.partition, 0.0))
                self.progress[tp.partition] = now


class Group:
    """Three members of one group consuming ``topic`` while a steady producer writes to it."""

    def __init__(self, cluster: KafkaCluster, topic: str, group_id: str, **settings: Any) -> None:
        """``settings`` override the members' consumer settings below."""
        self.ledger = CommitLedger()
        self.progress: dict[int, float] = {}  # partition -> loop time of its last committed records
        self.pauses: dict[int, float] = {}  # partition -> longest time between two of its commits
        self.values: dict[bytes, set[tuple[int, int]]] = {}  # value read -> (partition, offset) it was read at
        chosen: dict[str, Any] = {
            "bootstrap_servers": cluster.bootstrap_servers, "group_id": group_id, "auto_offset_reset": "earliest",
            "enable_auto_commit": False, "session_timeout_ms": 10000, "heartbeat_interval_ms": 500,
            "request_timeout_ms": 10000, "fetch_max_wait_ms": 200, **settings}
        self.members = [Member(f"m{i}", Consumer(**chosen), self.ledger, self.progress, self.pauses,
                               self.values) for i in range(MEMBERS)]
        self.topic, self.cluster = topic, cluster
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> list[int]:
        """Subscribe every member; return the assignment counts once the group is stable."""
        for member in self.members:
            member.consumer.subscribe([self.topic], listener=member)
            self._tasks.append(asyncio.create_task(member.run()))
        await until(lambda: sum(len(m.consumer.assignment()) for m in self.members) == PARTITIONS
                    and all(m.consumer.assignment() for m in self.members), 60, "a stable group of three")
        await until(lambda: self.ledger.total() > 100, 30, "records committed")
        return self.assignments()

    def assignments(self) -> list[int]:
        return [m.assignments for m in self.members]

    async def resumed_after(self, started: float, timeout: float) -> float:
        """Seconds from ``started`` until every partition had records committed again."""
        async with self.diagnosed():
            await until(lambda: len(self.progress) == PARTITIONS and min(self.progress.values()) > started,
                        timeout, "every partition consumed again")
        return max(self.progress.values()) - started

    @contextlib.asynccontextmanager
    async def diagnosed(self) -> AsyncIterator[None]:
        """A wait that fails says where each partition stands: who reads it from which broker, its lag,
        the fetch sessions and failing connections, and which broker leads it now."""
        try:
            yield
        except AssertionError as exc:
            members = {m.name: {k: m.consumer.metrics().get(k) for k in (
                "assignment", "lag", "fetching_from", "fetch_sessions", "connection_failures",
                "seconds_since_last_poll", "group_state")} for m in self.members}
            leaders = await asyncio.to_thread(lambda: {p: self.cluster.leader_of(TopicPartition(self.topic, p))
                                                       for p in range(PARTITIONS)})
            raise AssertionError(f"{exc}; ledger: {self.ledger.describe()}; leaders now {leaders}; "
                                 f"members: {json.dumps(members, default=str)}") from None

    async def drained(self, sent: int) -> tuple[float, dict[bytes, list[tuple[int, int]]]]:
        """Once production stopped: seconds until every record in the log was committed, each offset
        once, and the broker's committed offsets are the end offsets; every value sent was read.
        Also returns the values the log holds more than once (the producer's retries, not ours)."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        tps = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
        consumer = self.members[0].consumer
        ends = {tp.partition: end for tp, end in (await consumer.end_offsets(tps)).items()}
        in_log = sum(ends.values())
        async with self.diagnosed():
            await until(lambda: self.ledger.total() >= in_log, 60, f"every one of the {in_log} records committed")
        drain = loop.time() - began
        self.ledger.check(in_log)
        committed = {tp.partition: c.offset if c else None for tp, c in (await consumer.committed(tps)).items()}
        assert committed == ends, f"committed {committed}, end offsets {ends}"
        missing = [i for i in range(sent) if b"%d" % i not in self.values]
        assert not missing, f"{len(missing)} records sent were never read, e.g. {missing[:5]}"
        copies = {value: sorted(at) for value, at in self.values.items() if len(at) > 1}
        assert in_log == sent + sum(len(at) - 1 for at in copies.values()), f"{in_log} records in the log, {sent} sent"
        return drain, copies

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for member in self.members:
            await member.consumer.close()


async def test_rolling_bounce_of_every_broker_loses_and_repeats_nothing(
        cluster: KafkaCluster, unique_topic: str, unique_group: str) -> None:
    """consumer_test.py's test_broker_rolling_bounce: ROUNDS times, each broker in turn stopped
    (SIGTERM) and started, waiting until it is back in the ISR, while three members consume and commit."""
    cluster.create_topic(unique_topic, partitions=PARTITIONS)
    group = Group(cluster, unique_topic, unique_group)
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        async with SteadyProducer(cluster.bootstrap_servers, unique_topic, PARTITIONS, per_second=200) as producer:
            assignments = await group.start()
            for _round in range(ROUNDS):
                for node_id in BROKER_IDS:
                    await asyncio.to_thread(cluster.restart_broker, node_id)
                    await group.resumed_after(loop.time(), 30)
        drain, copies = await group.drained(producer.sent)
        assert group.assignments() == assignments, "a broker bounce rebalanced the group"
        report({"test": "rolling_bounce", "rounds": ROUNDS, "records": producer.sent,
                "lost": sum(1 for i in range(producer.sent) if b"%d" % i not in group.values),
                "duplicates": group.ledger.duplicates(), "in_log_twice": len(copies),
                "longest_pause_s": round(max(group.pauses.values()), 2), "drain_s": round(drain, 2),
                "in_log_twice_at": {v.decode(): at for v, at in list(copies.items())[:3]},
                "commit_failures": sum(m.commit_failures for m in group.members),
                "wall_s": round(loop.time() - began, 1)})
    finally:
        await group.close()


async def test_killing_the_busiest_leader_then_the_coordinator(
        cluster: KafkaCluster, unique_topic: str, unique_group: str) -> None:
    """SIGKILL the broker leading most partitions, then the group coordinator's broker (each
    restarted after): consumption resumes within 10 s each time, nothing lost, no rebalance."""
    cluster.create_topic(unique_topic, partitions=PARTITIONS)
    group = Group(cluster, unique_topic, unique_group)
    loop = asyncio.get_running_loop()
    try:
        async with SteadyProducer(cluster.bootstrap_servers, unique_topic, PARTITIONS, per_second=200) as producer:
            assignments = await group.start()
            leaders = [cluster.leader_of(TopicPartition(unique_topic, p)) for p in range(PARTITIONS)]
            busiest = max(BROKER_IDS, key=leaders.count)
            resumed = []
            for victim in (busiest, cluster.coordinator_of(unique_group)):
                killed_at = loop.time()
                cluster.kill_broker(victim)
                resumed.append(await group.resumed_after(killed_at, 30))
                await asyncio.to_thread(cluster.start_broker, victim)
            assert max(resumed) < 10.0, f"consumption resumed after {resumed} s"
        await group.drained(producer.sent)
        assert group.assignments() == assignments, "a leader or coordinator move rebalanced the group"
    finally:
        await group.close()
