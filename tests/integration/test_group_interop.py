"""Our members share a group with librdkafka (confluent-kafka) and aiokafka members on Apache
Kafka 4.x, with the standard ConsumerProtocol and the range / roundrobin assignors.

Every member commits the offsets of each batch right after processing it; a batch whose commit
fails (the generation moved on) is not counted, because the partition's next owner reads it
again from the last committed offset. So the records counted are exactly the committed ones,
and each must appear once: none lost, none committed twice, through two rebalances (a third
aiokafka-lite member joins, then the aiokafka member leaves).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import pytest

from aiokafka_lite import Consumer, TopicPartition
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

    def total(self) -> int:
        with self.lock:
            return sum(self.seen.values())


def _last_offsets(positions: list[tuple[int, int]]) -> dict[int, int]:
    last: dict[int, int] = {}
    for partition, offset in positions:
        last[partition] = max(last.get(partition, -1), offset)
    return last


async def run_ours(name: str, consumer: Consumer, topic: str, ledger: Ledger, stop: asyncio.Event) -> None:
    async with consumer:
        while not stop.is_set():
            batch = await consumer.poll(timeout=0.3)
            read_at = time.monotonic()
            ledger.holds(name, {tp.partition for tp in consumer.assignment()})
            if consumer.assignment():
                ledger.assigned.add(name)
            if not batch:
                continue
            await asyncio.sleep(PROCESSING)
            positions = [(r.partition, r.offset) for r in batch]
            commit = {TopicPartition(topic, p): off + 1 for p, off in _last_offsets(positions).items()}
            sent_at = time.monotonic()
            try:
                await consumer.commit(commit)
            except (CommitFailedError, RebalanceInProgressError):
                continue
            ledger.add(name, positions, read_at, sent_at)


def run_confluent(bootstrap: str, group: str, topic: str, strategy: str, ledger: Ledger,
                  stop: threading.Event) -> None:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "partition.assignment.strategy": strategy,
        "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
    })
    # The callbacks run inside consume(): they note the assignment the moment it changes.
    consumer.subscribe([topic],
                       on_assign=lambda c, parts: ledger.holds("confluent", {p.partition for p in parts}),
                       on_revoke=lambda c, parts: ledger.holds("confluent", set()))
    try:
        while not stop.is_set():
            messages = [m for m in consumer.consume(BATCH, timeout=0.3) if m.error() is None]
            read_at = time.monotonic()
            if consumer.assignment():
                ledger.assigned.add("confluent")
            if not messages:
                continue
            stop.wait(PROCESSING)
            positions = [(m.partition(), m.offset()) for m in messages]
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
        topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
        auto_offset_reset="earliest", partition_assignment_strategy=(assignor,),
        session_timeout_ms=10000, heartbeat_interval_ms=1000)
    await consumer.start()
    try:
        while not stop.is_set():
            data = await consumer.getmany(timeout_ms=300, max_records=BATCH)
            read_at = time.monotonic()
            ledger.holds("aiokafka", {tp.partition for tp in consumer.assignment()})
            positions = [(tp.partition, m.offset) for tp, msgs in data.items() for m in msgs]
            if consumer.assignment():
                ledger.assigned.add("aiokafka")
            if not positions:
                continue
            await asyncio.sleep(PROCESSING)
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


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
async def test_mixed_group_consumes_exactly_once_through_rebalances(apache_kafka_broker, unique_topic,
                                                                    unique_group, strategy):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    ledger = Ledger()
    stop_all = asyncio.Event()
    stop_aiokafka = asyncio.Event()
    stop_confluent = threading.Event()

    def ours(name: str) -> asyncio.Task[None]:
        consumer = Consumer(unique_topic, bootstrap_servers=broker.bootstrap_servers, group_id=unique_group,
                            enable_auto_commit=False, auto_offset_reset="earliest",
                            partition_assignment_strategy=(strategy,), max_poll_records=BATCH,
                            session_timeout_ms=10000, heartbeat_interval_ms=1000)
        return asyncio.create_task(run_ours(name, consumer, unique_topic, ledger, stop_all))

    tasks = [ours("lite-1"), ours("lite-2"),
             asyncio.create_task(run_aiokafka(broker.bootstrap_servers, unique_group, unique_topic, strategy,
                                              ledger, stop_aiokafka)),
             asyncio.create_task(asyncio.to_thread(run_confluent, broker.bootstrap_servers, unique_group,
                                                   unique_topic, strategy, ledger, stop_confluent))]
    try:
        await _wait_until(lambda: len(ledger.assigned) == 4, 120, "all four members to hold partitions")
        # The group's start-up rebalances (members joining one by one, aiokafka rejoining after its
        # first coordinator lookup fails) end before any record exists: a member that gets a partition
        # back then resumes at offset 0 however it tracks positions.
        await _wait_until(lambda: ledger.settled(PARTITIONS, 2.0), 120, "the group to settle", ledger)
        # Every member commits before the group changes: a member slow to fetch (aiokafka, librdkafka
        # under load) could otherwise see its commits refused by each rebalance and never take part.
        # The records come in a trickle until then, so a member briefly out of the group (aiokafka
        # losing its coordinator at start-up) still finds records left when it is back.
        sent = await _trickle_until(lambda: all(ledger.by_member[m] > 0 for m in FIRST_MEMBERS), broker,
                                    unique_topic, ledger)
        await asyncio.to_thread(produce, broker, unique_topic, ((None, b"x" * 20) for _ in range(RECORDS - sent)),
                                linger_ms=20)
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
    assert not ledger.duplicates(), ledger.duplicates()
    assert len(ledger.seen) == RECORDS
    assert set(ledger.by_member) >= {"lite-1", "lite-2", "aiokafka", "confluent"}, ledger.by_member
