"""Our members share a group with librdkafka (confluent-kafka) and aiokafka members on Apache
Kafka 4.x, with the standard ConsumerProtocol and the range / roundrobin assignors.

Every member commits the offsets of each batch right after processing it; a batch whose commit
fails (the generation moved on) is not counted, because the partition's next owner reads it
again from the last committed offset. So the records counted are exactly the committed ones,
and each must appear once: none lost, none committed twice, through two rebalances (a third
aiokafka-lite member joins, then the aiokafka member leaves).

The records come either once the group has settled, or from the start, while the members are still
joining one by one (as CI first ran it, when 200 records were once committed twice: issue 40).
Each member notes the committed offset it found on each assignment and the first offset it then
read; ours also the generation and assignment when each commit was built and when it was sent. A
duplicate prints that story per partition, and a member that read below the committed offset it
was assigned with fails the test on its own, naming the member. The aiokafka member drops a batch
read before a rebalance instead of committing it: aiokafka rebalances in the background and then
redelivers such a batch even when its commit succeeds (test_rebalance_redelivery shows it alone).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, TopicPartition
from aiokafka_lite.errors import CommitFailedError, RebalanceInProgressError
from aiokafka_lite.testing.helpers import create_topic, produce

pytestmark = pytest.mark.asyncio

RECORDS = 100_000
PARTITIONS = 12
BATCH = 200
PROCESSING = 0.05  # seconds of "work" per batch, so rebalances happen mid-stream


class Ledger:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: Counter[tuple[int, int]] = Counter()
        self.by_member: Counter[str] = Counter()
        self.assigned: set[str] = set()  # members that have held partitions
        self.committers: dict[tuple[int, int], list[str]] = {}  # who committed each record, in order
        # (time, member, partitions, what): what each member held and committed, for a failure's story
        self.events: list[tuple[float, str, frozenset[int], str]] = []
        self.held: dict[str, frozenset[int]] = {}
        # (member, partition) -> the committed offset found on its latest assignment, until the
        # member's first read of that partition is checked against it
        self.starts: dict[tuple[str, int], int] = {}
        self.rewinds: list[tuple[int, str]] = []  # (partition, what): reads below the committed offset

    def assigned_with(self, member: str, committed: dict[int, int | None]) -> None:
        """``member`` was assigned these partitions and found these committed offsets (None: none)."""
        with self.lock:
            for partition, offset in committed.items():
                self.starts[(member, partition)] = -1 if offset is None else offset
                self.events.append((time.monotonic(), member, frozenset({partition}),
                                    f"assigned p{partition}, committed offset {offset}"))

    def read(self, member: str, positions: list[tuple[int, int]]) -> None:
        """The first read of each partition after an assignment must start at the committed offset."""
        with self.lock:
            for partition, first in _first_offsets(positions).items():
                start = self.starts.pop((member, partition), None)
                if start is not None:
                    self.events.append((time.monotonic(), member, frozenset({partition}),
                                        f"first read p{partition} at {first}"))
                    if first < start:
                        self.rewinds.append((partition, f"{member} read p{partition} from offset {first} although "
                                                        f"it was assigned it with committed offset {start}"))

    def note(self, member: str, partitions: set[int], what: str) -> None:
        with self.lock:
            self.events.append((time.monotonic(), member, frozenset(partitions), what))

    def holds(self, member: str, partitions: set[int]) -> None:
        """Called after each poll with the member's assignment; notes each change."""
        with self.lock:
            if self.held.get(member) != partitions:
                self.held[member] = frozenset(partitions)
                self.events.append((time.monotonic(), member, frozenset(partitions),
                                    f"holds {sorted(partitions)}"))

    def settled(self, partitions: int, quiet: float) -> bool:
        """Every partition held by exactly one member, and no member's holding changed for ``quiet`` s."""
        with self.lock:
            held = [p for member_held in self.held.values() for p in member_held]
            last_change = max((t for t, _, _, what in self.events if what.startswith("holds")), default=0.0)
        return sorted(held) == list(range(partitions)) and time.monotonic() - last_change >= quiet

    def add(self, member: str, positions: list[tuple[int, int]], read_at: float, sent_at: float) -> None:
        with self.lock:
            self.seen.update(positions)
            self.by_member[member] += len(positions)
            for position in positions:
                self.committers.setdefault(position, []).append(member)
            for partition in {p for p, _ in positions}:
                offsets = [o for p, o in positions if p == partition]
                self.events.append((time.monotonic(), member, frozenset({partition}),
                                    f"committed p{partition} {min(offsets)}-{max(offsets)} (read "
                                    f"{read_at - time.monotonic():+.3f} s, sent {sent_at - time.monotonic():+.3f} s)"))

    def story(self, partition: int | None = None) -> str:
        """Who held and committed the partition, in time order (times relative to the first event);
        without one, who held what."""
        with self.lock:
            events = sorted(self.events)
        start = events[0][0] if events else 0.0
        return "\n".join(f"  {t - start:9.3f} {member:9} {what}" for t, member, partitions, what in events
                         if (partition in partitions if partition is not None else what.startswith("holds")))

    def duplicates(self) -> str:
        """Records committed more than once, grouped by who committed them (empty if none)."""
        with self.lock:
            twice = {pos: members for pos, members in self.committers.items() if len(members) > 1}
        if not twice:
            return ""
        by_members: dict[tuple[str, ...], list[tuple[int, int]]] = {}
        for pos, members in sorted(twice.items()):
            by_members.setdefault(tuple(members), []).append(pos)
        groups = "; ".join(f"by {' then '.join(members)}: {len(positions)} records, partition {positions[0][0]} "
                           f"offsets {positions[0][1]}-{positions[-1][1]}"
                           for members, positions in by_members.items())
        stories = "\n".join(f"partition {p}:\n{self.story(p)}" for p in sorted({p for p, _ in twice}))
        return f"{len(twice)} records committed twice ({groups})\n{stories}"

    def rewound(self) -> str:
        with self.lock:
            rewinds = list(self.rewinds)
        stories = "\n".join(f"partition {p}:\n{self.story(p)}" for p in sorted({p for p, _ in rewinds}))
        return "; ".join(what for _, what in rewinds) + ("\n" + stories if rewinds else "")

    def total(self) -> int:
        with self.lock:
            return sum(self.seen.values())


def _first_offsets(positions: list[tuple[int, int]]) -> dict[int, int]:
    first: dict[int, int] = {}
    for partition, offset in positions:
        first[partition] = min(first.get(partition, offset), offset)
    return first


def _last_offsets(positions: list[tuple[int, int]]) -> dict[int, int]:
    last: dict[int, int] = {}
    for partition, offset in positions:
        last[partition] = max(last.get(partition, -1), offset)
    return last


class NotingListener(ConsumerRebalanceListener):
    """Notes the committed offset of each partition our member is assigned, as it is assigned."""

    def __init__(self, name: str, ledger: Ledger) -> None:
        self.name, self.ledger = name, ledger
        self.consumer: Consumer | None = None

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if assigned and self.consumer is not None:
            committed = await self.consumer.committed(assigned)
            self.ledger.assigned_with(self.name, {tp.partition: None if committed.get(tp) is None
                                             else committed[tp].offset for tp in assigned})


def _membership(consumer: Consumer) -> tuple[object, list[int]]:
    return consumer.metrics().get("generation_id"), sorted(tp.partition for tp in consumer.assignment())


async def run_ours(name: str, consumer: Consumer, topic: str, ledger: Ledger, stop: asyncio.Event) -> None:
    listener = NotingListener(name, ledger)
    listener.consumer = consumer
    consumer.subscribe([topic], listener=listener)
    async with consumer:
        while not stop.is_set():
            batch = await consumer.poll(timeout=0.3)
            read_at = time.monotonic()
            built_in = _membership(consumer)
            ledger.holds(name, {tp.partition for tp in consumer.assignment()})
            if consumer.assignment():
                ledger.assigned.add(name)
            if not batch:
                continue
            positions = [(r.partition, r.offset) for r in batch]
            ledger.read(name, positions)
            await asyncio.sleep(PROCESSING)
            commit = {TopicPartition(topic, p): off + 1 for p, off in _last_offsets(positions).items()}
            sent_at = time.monotonic()
            sent_in = _membership(consumer)
            if sent_in != built_in:
                ledger.note(name, {tp.partition for tp in commit},
                            f"commit built in (generation, assignment) {built_in}, sent in {sent_in}")
            try:
                await consumer.commit(commit)
            except (CommitFailedError, RebalanceInProgressError):
                continue
            ledger.add(name, positions, read_at, sent_at)


def run_confluent(bootstrap: str, group: str, topic: str, strategy: str, ledger: Ledger,
                  stop: threading.Event) -> None:
    import confluent_kafka

    settings: dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                   "auto.offset.reset": "earliest"}
    if strategy == "consumer":
        settings["group.protocol"] = "consumer"
    else:
        settings.update({"partition.assignment.strategy": strategy, "session.timeout.ms": 10000,
                         "heartbeat.interval.ms": 1000})
    consumer = confluent_kafka.Consumer(settings)
    held: set[int] = set()

    # The callbacks run inside consume(): they note the assignment the moment it changes, and the
    # committed offset of each partition assigned (incrementally under the consumer protocol).
    def on_assign(c: object, parts: list[object]) -> None:
        held.update(p.partition for p in parts)  # type: ignore[attr-defined]
        ledger.holds("confluent", set(held))
        if parts:
            committed = consumer.committed(parts, timeout=10)
            ledger.assigned_with("confluent", {p.partition: p.offset if p.offset >= 0 else None for p in committed})
        if strategy == "consumer":
            consumer.incremental_assign(parts)

    def on_revoke(c: object, parts: list[object]) -> None:
        held.difference_update(p.partition for p in parts)  # type: ignore[attr-defined]
        ledger.holds("confluent", set(held))
        if strategy == "consumer":
            consumer.incremental_unassign(parts)

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    try:
        while not stop.is_set():
            messages = [m for m in consumer.consume(BATCH, timeout=0.3) if m.error() is None]
            read_at = time.monotonic()
            if consumer.assignment():
                ledger.assigned.add("confluent")
            if not messages:
                continue
            positions = [(m.partition(), m.offset()) for m in messages]
            ledger.read("confluent", positions)
            stop.wait(PROCESSING)
            commit = [confluent_kafka.TopicPartition(topic, p, off + 1)
                      for p, off in _last_offsets(positions).items()]
            sent_at = time.monotonic()
            try:
                consumer.commit(offsets=commit, asynchronous=False)
            except confluent_kafka.KafkaException:
                continue
            ledger.add("confluent", positions, read_at, sent_at)
    finally:
        consumer.close()


async def run_aiokafka(bootstrap: str, group: str, topic: str, strategy: str, ledger: Ledger,
                       stop: asyncio.Event) -> None:
    import aiokafka
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import CommitFailedError as AioCommitFailed
    from aiokafka.errors import IllegalStateError as AioIllegalState
    from aiokafka.errors import KafkaError as AioKafkaError

    assignor = RangePartitionAssignor if strategy == "range" else RoundRobinPartitionAssignor
    consumer = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
        auto_offset_reset="earliest", partition_assignment_strategy=(assignor,),
        session_timeout_ms=10000, heartbeat_interval_ms=1000)

    rebalances = 0

    class Noting(aiokafka.ConsumerRebalanceListener):  # type: ignore[misc]
        # Counted at both ends: aiokafka revokes before its JoinGroup, and a commit sent after the
        # join (before the assignment is applied) is made in the new generation.
        async def on_partitions_revoked(self, revoked: object) -> None:
            nonlocal rebalances
            rebalances += 1

        async def on_partitions_assigned(self, assigned: set[aiokafka.TopicPartition]) -> None:
            nonlocal rebalances
            rebalances += 1
            ledger.assigned_with("aiokafka", {tp.partition: await consumer.committed(tp) for tp in assigned})

    consumer.subscribe([topic], listener=Noting())
    await consumer.start()
    try:
        while not stop.is_set():
            data = await consumer.getmany(timeout_ms=300, max_records=BATCH)
            read_at, read_in = time.monotonic(), rebalances
            ledger.holds("aiokafka", {tp.partition for tp in consumer.assignment()})
            positions = [(tp.partition, m.offset) for tp, msgs in data.items() for m in msgs]
            if consumer.assignment():
                ledger.assigned.add("aiokafka")
            if not positions:
                continue
            ledger.read("aiokafka", positions)
            await asyncio.sleep(PROCESSING)
            if rebalances != read_in:
                # aiokafka rebalances in the background: a batch read before it would be committed
                # in the new generation, even for a partition now another member's, and it comes
                # back even if that commit succeeds. An aiokafka application drops it
                # (test_rebalance_redelivery shows aiokafka alone redelivering it).
                continue
            commit = {aiokafka.TopicPartition(topic, p): off + 1 for p, off in _last_offsets(positions).items()}
            sent_at = time.monotonic()
            try:
                await consumer.commit(commit)
            except (AioCommitFailed, AioIllegalState, AioKafkaError):
                continue
            ledger.add("aiokafka", positions, read_at, sent_at)
    finally:
        await consumer.stop()


async def _wait_until(condition, timeout: float, what, ledger: Ledger | None = None) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, (f"timed out waiting for {what}" + (
            "" if ledger is None else f"; committed by member {dict(ledger.by_member)}, "
                                      f"held partitions: {sorted(ledger.assigned)}; who held what:\n"
                                      f"{ledger.story()}"))
        await asyncio.sleep(0.05)


FIRST_MEMBERS = ("lite-1", "lite-2", "aiokafka", "confluent")


async def _trickle_until(condition, broker, topic: str, ledger: Ledger, chunk: int = 500,
                         timeout: float = 120.0) -> int:
    """Produce ``chunk`` records at a time, a quarter of a second apart, until ``condition()``
    holds (at most half the records); return how many were sent."""
    sent = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if sent + chunk > RECORDS // 2 or loop.time() >= deadline:
            pytest.fail(f"not every member took part, {sent} records sent; committed by member "
                        f"{dict(ledger.by_member)}, held partitions: {sorted(ledger.assigned)}; who held "
                        f"what:\n{ledger.story()}")
        sent += await asyncio.to_thread(produce, broker, topic, ((None, b"x" * 20) for _ in range(chunk)))
        await asyncio.sleep(0.25)
    return sent


# (our members' group protocol and assignor, librdkafka's "partition.assignment.strategy" or
# "consumer", when the records come). Under the consumer protocol aiokafka, which speaks only the
# classic one, joins as a classic member of a consumer group (Kafka 4's upgrade path).
SCENARIOS = {
    "range": ("range", "settled"),
    "roundrobin": ("roundrobin", "settled"),
    "roundrobin-while-joining": ("roundrobin", "startup"),
    "consumer-while-joining": ("consumer", "startup"),
}


@pytest.mark.slow
@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_mixed_group_consumes_exactly_once_through_rebalances(apache_kafka_broker, unique_topic,
                                                                    unique_group, scenario):
    strategy, records_come = SCENARIOS[scenario]
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    ledger = Ledger()
    stop_all = asyncio.Event()
    stop_aiokafka = asyncio.Event()
    stop_confluent = threading.Event()

    def ours(name: str) -> asyncio.Task[None]:
        group_settings: dict[str, object] = (
            {"group_protocol": "consumer"} if strategy == "consumer" else
            {"partition_assignment_strategy": (strategy,), "session_timeout_ms": 10000, "heartbeat_interval_ms": 1000})
        consumer = Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=unique_group,
                            enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=BATCH,
                            **group_settings)
        return asyncio.create_task(run_ours(name, consumer, unique_topic, ledger, stop_all))

    aiokafka_strategy = "roundrobin" if strategy == "consumer" else strategy
    tasks = [ours("lite-1"), ours("lite-2"),
             asyncio.create_task(run_aiokafka(broker.bootstrap_servers, unique_group, unique_topic,
                                              aiokafka_strategy, ledger, stop_aiokafka)),
             asyncio.create_task(asyncio.to_thread(run_confluent, broker.bootstrap_servers, unique_group,
                                                   unique_topic, strategy, ledger, stop_confluent))]
    try:
        sent = 0
        if records_come == "startup":
            # As CI first ran it: every record is there while the members join one by one.
            sent = await asyncio.to_thread(produce, broker, unique_topic,
                                           ((None, b"x" * 20) for _ in range(RECORDS)), linger_ms=20)
        await _wait_until(lambda: len(ledger.assigned) == 4 or ledger.total() >= RECORDS // 2, 120,
                          "all four members to hold partitions", ledger)
        if records_come == "settled":
            # The group's start-up rebalances end before any record exists. Every member commits
            # before the group changes: a member slow to fetch (aiokafka, librdkafka under load)
            # could otherwise see its commits refused by each rebalance and never take part. The
            # records come in a trickle until then, so a member briefly out of the group (aiokafka
            # losing its coordinator at start-up) still finds records left when it is back.
            await _wait_until(lambda: ledger.settled(PARTITIONS, 2.0), 120, "the group to settle", ledger)
            sent = await _trickle_until(lambda: all(ledger.by_member[m] > 0 for m in FIRST_MEMBERS), broker,
                                        unique_topic, ledger)
            await asyncio.to_thread(produce, broker, unique_topic,
                                    ((None, b"x" * 20) for _ in range(RECORDS - sent)), linger_ms=20)
        await _wait_until(lambda: ledger.total() >= RECORDS // 4, 120, "a quarter of the records", ledger)
        tasks.append(ours("lite-3"))  # rebalance 1: a member joins
        await _wait_until(lambda: ledger.by_member["lite-3"] > 0 or ledger.total() >= RECORDS * 3 // 4,
                          120, "the third member to take part", ledger)
        stop_aiokafka.set()  # rebalance 2: the aiokafka member leaves
        await _wait_until(lambda: ledger.total() >= RECORDS, 180, "every record", ledger)
    finally:
        stop_all.set()
        stop_aiokafka.set()
        stop_confluent.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    assert not ledger.rewound(), ledger.rewound()
    assert not ledger.duplicates(), ledger.duplicates()
    assert len(ledger.seen) == RECORDS
    if records_come == "settled":
        # With every record there from the start, a member that joined late may find none left.
        assert set(ledger.by_member) >= set(FIRST_MEMBERS), ledger.by_member
