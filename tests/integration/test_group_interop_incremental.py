"""Mixed groups that rebalance without stopping the world (issue #12), on Apache Kafka 4.3.1: our
members with Kafka's own Java consumer (VerifiableConsumer, from the broker's jars) and a
librdkafka one (confluent-kafka), under KIP-848 (every member group.protocol=consumer), under the
classic cooperative protocol (cooperative-sticky everywhere), and in a mixed eager/cooperative
group (one of ours keeps Java's default assignor list, range first: an eager member).

100k records are committed exactly once overall (see _ledger.py) while a member joins and the
Java member leaves; none is lost, none committed twice.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from typing import Any

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, TopicPartition
from aiokafka_lite.errors import CommitFailedError, RebalanceInProgressError
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.java_clients import VerifiableConsumer, run_kafka_tool

from ._ledger import CommitLedger

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

RECORDS = 100_000
PARTITIONS = 12
BATCH = 200
PROCESSING = 0.05  # seconds of "work" per batch, so rebalances happen mid-stream
CLASSIC_TIMERS = {"session_timeout_ms": 10000, "heartbeat_interval_ms": 1000}

# Per scenario: settings of our members (the third one of ours is the one that joins), the Java
# member's options, and confluent-kafka's settings.
SCENARIOS: dict[str, dict[str, Any]] = {
    "kip848": {
        "ours": [{"group_protocol": "consumer"}] * 3,
        "java": {"group_protocol": "consumer"},
        "confluent": {"group.protocol": "consumer"},
    },
    "cooperative": {
        "ours": [{"partition_assignment_strategy": ["cooperative-sticky"], **CLASSIC_TIMERS}] * 3,
        "java": {"assignment_strategy": "cooperative-sticky"},
        "confluent": {"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 10000},
    },
    "eager+cooperative": {
        "ours": [{"partition_assignment_strategy": ["range", "cooperative-sticky"], **CLASSIC_TIMERS},
                 {"partition_assignment_strategy": ["cooperative-sticky"], **CLASSIC_TIMERS},
                 {"partition_assignment_strategy": ["cooperative-sticky"], **CLASSIC_TIMERS}],
        "java": {"assignment_strategy": "cooperative-sticky"},
        "confluent": {"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 10000},
    },
}


def _next_offsets(positions: list[tuple[int, int]]) -> dict[int, int]:
    last: dict[int, int] = {}
    for partition, offset in positions:
        last[partition] = max(last.get(partition, -1), offset)
    return {p: o + 1 for p, o in last.items()}


class OurMember(ConsumerRebalanceListener):
    """Commits after processing each batch. A commit refused mid-rebalance is tried again on the
    next poll: under cooperative and KIP-848 the member may keep the partition, and no later
    batch need come to cover it. What it read from a partition being revoked is committed first."""

    def __init__(self, name: str, consumer: Consumer, topic: str, ledger: CommitLedger) -> None:
        self.name, self.consumer, self.topic, self.ledger = name, consumer, topic, ledger
        self.uncommitted: dict[int, int] = {}  # partition -> next offset to commit
        self.history: list[str] = []  # assignments and refused commits, for a failure's message

    def note(self, event: str) -> None:
        self.history.append(f"{time.time():.1f} {event}")

    async def _commit(self, partitions: set[int] | None = None) -> None:
        offsets = {p: o for p, o in self.uncommitted.items() if partitions is None or p in partitions}
        if not offsets:
            return
        try:
            await self.consumer.commit({TopicPartition(self.topic, p): o for p, o in offsets.items()})
        except (CommitFailedError, RebalanceInProgressError) as exc:
            self.note(f"commit refused: {type(exc).__name__}")
            return  # kept: tried again, or handed on by a revocation
        for p, o in offsets.items():
            if self.uncommitted.get(p) == o:
                del self.uncommitted[p]
        self.ledger.committed(self.name, offsets)

    def _drop(self, partitions: set[int]) -> None:
        for p in partitions:
            self.uncommitted.pop(p, None)
        self.ledger.released(self.name, partitions)

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        gone = {tp.partition for tp in revoked}
        self.note(f"revoked {sorted(gone)}")
        await self._commit(gone)
        self._drop(gone)

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.note(f"lost {sorted(tp.partition for tp in lost)}")
        self._drop({tp.partition for tp in lost})

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.note(f"assigned {sorted(tp.partition for tp in assigned)}")

    async def run(self, stop: asyncio.Event) -> None:
        async with self.consumer:
            while not stop.is_set():
                batch = await self.consumer.poll(timeout=0.3)
                positions = [(r.partition, r.offset) for r in batch]
                for partition, offset in positions:
                    self.ledger.read(self.name, partition, (offset,))
                if positions:
                    await asyncio.sleep(PROCESSING)
                self.uncommitted.update(_next_offsets(positions))
                await self._commit()


def run_confluent(bootstrap: str, group: str, topic: str, settings: dict[str, Any], ledger: CommitLedger,
                  stop: threading.Event, assigned: threading.Event, history: list[str]) -> None:
    """librdkafka's member, with the same commit discipline as OurMember; ``assigned`` is set once it
    holds partitions; ``history`` gets its assignments, for a failure's message."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", **settings})

    def note(event: str, partitions: list[Any]) -> None:
        history.append(f"{time.time():.1f} {event} {sorted(tp.partition for tp in partitions)}")

    uncommitted: dict[int, int] = {}

    def commit(partitions: set[int] | None = None) -> None:
        offsets = {p: o for p, o in uncommitted.items() if partitions is None or p in partitions}
        if not offsets:
            return
        try:
            consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, p, o) for p, o in offsets.items()],
                            asynchronous=False)
        except confluent_kafka.KafkaException:
            return
        for p, o in offsets.items():
            if uncommitted.get(p) == o:
                del uncommitted[p]
        ledger.committed("confluent", offsets)

    def drop(partitions: set[int]) -> None:
        for p in partitions:
            uncommitted.pop(p, None)
        ledger.released("confluent", partitions)

    def on_revoke(_consumer: Any, partitions: list[Any]) -> None:
        note("revoked", partitions)
        gone = {tp.partition for tp in partitions}
        commit(gone)
        drop(gone)

    def on_assign(_consumer: Any, partitions: list[Any]) -> None:
        note(f"assigned ({consumer.memberid()})", partitions)
        if partitions:
            assigned.set()

    def on_lost(_consumer: Any, partitions: list[Any]) -> None:
        note("lost", partitions)
        drop({tp.partition for tp in partitions})

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    try:
        while not stop.is_set():
            messages = [m for m in consumer.consume(BATCH, timeout=0.3) if m.error() is None]
            positions = [(m.partition(), m.offset()) for m in messages]
            for partition, offset in positions:
                ledger.read("confluent", partition, (offset,))
            if positions:
                stop.wait(PROCESSING)
            uncommitted.update(_next_offsets(positions))
            commit()
    finally:
        consumer.close()


def _histories(members: list[OurMember]) -> dict[str, list[str]]:
    return {m.name: m.history[-12:] for m in members}


class LeaderLog(logging.Handler):
    """Our leaders' "leader assigned" lines (with the claims they were given), for a failure's
    message; topic names are left out, the test has one topic."""

    def __init__(self, topic: str) -> None:
        super().__init__(logging.INFO)
        self.topic = topic
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "leader assigned" in message:
            what = message.split("leader ", 1)[1].replace(repr(self.topic) + ": ", "")
            self.lines.append(f"{record.created:.1f} {what}")


def _java_assignments(java: VerifiableConsumer) -> list[str]:
    return [f"{e.get('timestamp', 0) / 1000:.1f} {e['name']} {sorted(p['partition'] for p in e['partitions'])}"
            for e in java.events if e["name"] in ("partitions_assigned", "partitions_revoked", "partitions_lost")]


def _story(members: list[OurMember], confluent: list[str], java: VerifiableConsumer, leader: LeaderLog,
           ledger: CommitLedger, broker: Any, group: str) -> str:
    """Who held what and when, from every member's own account and our leaders' assignments; and
    the group as the broker describes it now."""
    described = run_kafka_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                               ["--bootstrap-server", broker.bootstrap_servers, "--describe", "--group", group,
                                "--members", "--verbose"], timeout=30)
    holding = {m.name: sorted(tp.partition for tp in m.consumer.assignment()) for m in members}
    return (f"ours: {_histories(members)}, holding {holding}; "
            f"confluent: {confluent[-12:]}; java: {_java_assignments(java)[-12:]}; "
            f"commits counted {ledger.total()}, twice {ledger.duplicates()}, {ledger.describe()}; "
            f"last read per partition {ledger.readers()}; "
            f"leader: {leader.lines[-6:]}; described: {described.stdout.strip()} {described.stderr.strip()[-300:]}")


async def _until(condition, timeout: float, what, members: list[asyncio.Task[None]]) -> None:
    """Waits for condition; a member that stopped meanwhile fails the wait at once with its error
    (else its failure would hide behind a timeout, its partitions read by the others)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        for task in members:
            if task.done():
                raise AssertionError(f"a member stopped while waiting for "
                                     f"{what() if callable(what) else what}") from task.exception()
        if condition():
            return
        assert loop.time() < deadline, f"timed out waiting for {what() if callable(what) else what}"
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_mixed_group_commits_every_record_exactly_once(apache_kafka_broker, unique_topic, unique_group,
                                                             scenario):
    broker = apache_kafka_broker
    spec = SCENARIOS[scenario]
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    ledger = CommitLedger()
    stop_ours = asyncio.Event()
    stop_confluent = threading.Event()
    confluent_assigned = threading.Event()

    members: list[OurMember] = []
    confluent_history: list[str] = []
    leader = LeaderLog(unique_topic)
    consumer_log = logging.getLogger("aiokafka_lite.consumer")
    level = consumer_log.level

    def ours(index: int) -> asyncio.Task[None]:
        # Named in its member id, while our members still sort before the others, in a random
        # order among themselves, as with the default client id (the assignors rank by member id).
        client_id = f"aiokafka-lite-{secrets.token_hex(2)}-lite-{index + 1}"
        consumer = Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=unique_group, client_id=client_id,
                            enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=BATCH,
                            **spec["ours"][index])
        m = OurMember(f"lite-{index + 1}", consumer, unique_topic, ledger)
        consumer.subscribe([unique_topic], listener=m)
        members.append(m)
        return asyncio.create_task(m.run(stop_ours))

    java = VerifiableConsumer(broker.bootstrap_servers, unique_topic, unique_group, **spec["java"])
    tasks = [ours(0), ours(1), asyncio.create_task(asyncio.to_thread(
        run_confluent, broker.bootstrap_servers, unique_group, unique_topic, spec["confluent"], ledger,
        stop_confluent, confluent_assigned, confluent_history))]
    story = lambda: _story(members, confluent_history, java, leader, ledger, broker, unique_group)  # noqa: E731
    consumer_log.addHandler(leader)  # before any member runs: they run once the test awaits
    consumer_log.setLevel(logging.INFO)
    try:
        await asyncio.to_thread(java.start)  # the JVM takes a second or two: not on the loop
        # Every member holds partitions before any record exists, or a member slow to join (librdkafka
        # under load) could find nothing left and the group would not be mixed.
        await _until(lambda: bool(java.assignment) and confluent_assigned.is_set()
                     and all(m.consumer.assignment() for m in members), 120,
                     lambda: f"our members, the Java one and librdkafka's holding partitions; {story()}", tasks)
        # Each record names its partition, spread evenly, so every member holding partitions has records
        # to read: keyless ones go where librdkafka's sticky partitioner puts them, which can leave
        # partitions empty, and a member holding only those would never take part
        # (test_peer_partitioner.py; CI once waited here on the Java member that way).
        await asyncio.to_thread(produce, broker, unique_topic,
                                ({"value": b"x" * 20, "partition": i % PARTITIONS} for i in range(RECORDS)),
                                linger_ms=20)
        progress = lambda: ledger.total() + java.consumed_count()  # noqa: E731
        # Every member commits before the group changes: a member slow to fetch (librdkafka under
        # load) could otherwise lose its partitions in the next rebalance before reading any.
        took_part = lambda: (java.consumed_count() > 0  # noqa: E731
                             and all(ledger.by_member[m] > 0 for m in ("lite-1", "lite-2", "confluent")))
        await _until(lambda: progress() >= RECORDS // 4 and took_part(), 120,
                     lambda: f"a quarter of the records, every member taking part: {dict(ledger.by_member)}, "
                             f"java read {java.consumed_count()}; {story()}", tasks)
        tasks.append(ours(2))  # a member joins
        await _until(lambda: ledger.by_member["lite-3"] > 0 or progress() >= RECORDS * 3 // 4, 120,
                     lambda: f"the joining member to take part; {story()}", tasks)
        # A member leaves (SIGTERM: the Java consumer closes, leaving the group).
        assert await asyncio.to_thread(java.stop), "the Java consumer did not shut down cleanly"
        try:
            await _until(lambda: ledger.total() + _java_committed(java) >= RECORDS, 180,
                         lambda: f"every record committed; {story()}", tasks)
        except AssertionError as exc:
            java_ledger = CommitLedger()
            java_ledger.replay_java("java", java.events)
            raise AssertionError(f"{exc}; {ledger.describe()}; java {java_ledger.describe()}; ours hold "
                                 f"{[sorted(tp.partition for tp in m.consumer.assignment()) for m in members]}; "
                                 f"{await _group_progress(broker, unique_topic, unique_group)}") from exc.__cause__
        java_events = java.events
    finally:
        if java.running:
            java.kill()
        stop_ours.set()
        stop_confluent.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        consumer_log.removeHandler(leader)
        consumer_log.setLevel(level)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    ledger.replay_java("java", java_events)
    ledger.check(RECORDS)
    assert {"lite-1", "lite-2", "confluent", "java"} <= set(ledger.by_member), dict(ledger.by_member)


async def _group_progress(broker: Any, topic: str, group: str) -> str:
    """Committed vs end offset per partition, to say where a stuck run stands."""
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    async with Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=group) as probe:
        ends = await probe.end_offsets(tps)
        committed = await probe.committed(tps)
    return "committed/end " + ", ".join(
        f"{tp.partition}: {c.offset if (c := committed[tp]) else None}/{ends[tp]}" for tp in tps)


def _java_committed(java: VerifiableConsumer) -> int:
    """What the Java member committed, for the progress checks (the shared ledger decides)."""
    replay = CommitLedger()
    replay.replay_java("java", java.events)
    return replay.total()
