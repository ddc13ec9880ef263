"""Scale-out without a pause (issue #12): three members consume a 12-partition topic at a steady
produce rate, and a fourth joins. Under the cooperative protocol the members that keep partitions
never stop receiving records (no gap longer than 2 x fetch_max_wait_ms) and are revoked only the
partitions that move; under eager every member gives up everything until the new assignment comes. Listener callbacks
run inside poll() under every protocol (as in Java): a slow on_partitions_revoked (REVOKE_WORK)
holds up the kept partitions of a member that gives one up, cooperative or not.

The pause per member is written to the file named by $SCALE_OUT_REPORT (JSON lines), if set.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, TopicPartition
from aiokafka_lite.testing.helpers import create_topic

from ._consumers import until
from ._steady import SteadyProducer

pytestmark = pytest.mark.asyncio

PARTITIONS = 12
FETCH_MAX_WAIT = 0.5
RATE = 240.0  # records/s over all partitions: one every 50 ms per partition
# The classic protocol's timers are the member's; under KIP-848 the broker's (refused if set here).
CLASSIC_TIMERS = {name: {"session_timeout_ms": 10000, "heartbeat_interval_ms": 500}
                  for name in ("eager", "cooperative")}
REVOKE_WORK = 0.0  # seconds each on_partitions_revoked takes (inside poll(), as in Java)


class Member(ConsumerRebalanceListener):
    """One consumer polling in a task, noting when each record arrived and every callback."""

    def __init__(self, name: str, consumer: Consumer) -> None:
        self.name = name
        self.consumer = consumer
        self.arrivals: list[tuple[float, TopicPartition]] = []
        self.events: list[tuple[float, str, frozenset[TopicPartition]]] = []
        self.task: asyncio.Task[None] | None = None

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "assigned", frozenset(assigned)))

    def owned_nothing_between(self, start: float, end: float, owned_at_end: set[TopicPartition]) -> bool:
        """An eager revocation: every partition given up before the new ones came."""
        owned = set(owned_at_end)
        for at, what, tps in reversed(self.events):  # undo the events back to `start`
            if at < start:
                break
            if at <= end:
                owned = owned - tps if what == "assigned" else owned | tps
                if not owned and what == "assigned":
                    return True
        return False

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "revoked", frozenset(revoked)))
        await asyncio.sleep(REVOKE_WORK)  # flushing what was processed, as a real service would

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.events.append((time.monotonic(), "lost", frozenset(lost)))

    async def run(self) -> None:
        while True:
            batch = await self.consumer.poll(timeout=0.2)
            now = time.monotonic()
            self.arrivals.extend((now, TopicPartition(r.topic, r.partition)) for r in batch)

    def between(self, start: float, end: float, kind: str) -> set[TopicPartition]:
        return {tp for at, what, tps in self.events if start <= at <= end and what == kind for tp in tps}

    def longest_gap(self, partitions: set[TopicPartition], start: float, end: float) -> float:
        """The longest time in [start, end] without a record from `partitions`."""
        times = [at for at, tp in self.arrivals if tp in partitions and start <= at <= end]
        edges = [start, *times, end]
        return max(b - a for a, b in itertools.pairwise(edges))


def _balanced(members: list[Member], each: int) -> bool:
    owned = [m.consumer.assignment() for m in members]
    every = [tp for tps in owned for tp in tps]
    return all(len(tps) == each for tps in owned) and len(set(every)) == PARTITIONS == len(every)


PROTOCOLS = {
    "eager": {"partition_assignment_strategy": ["range"]},
    "cooperative": {"partition_assignment_strategy": ["cooperative-sticky"]},
    "kip848": {"group_protocol": "consumer"},
}


@pytest.mark.parametrize("strategy", list(PROTOCOLS))
async def test_fourth_member_joins_without_pausing_the_others(apache_kafka_broker, unique_topic, unique_group,
                                                              strategy):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)

    def member(name: str) -> Member:
        consumer = Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=unique_group,
                            auto_offset_reset="earliest", fetch_max_wait_ms=int(FETCH_MAX_WAIT * 1000),
                            **PROTOCOLS[strategy], **CLASSIC_TIMERS.get(strategy, {}))
        m = Member(name, consumer)
        consumer.subscribe([unique_topic], listener=m)
        m.task = asyncio.create_task(m.run())
        return m

    members: list[Member] = []
    try:
        async with SteadyProducer(broker.bootstrap_servers, unique_topic, PARTITIONS, RATE):
            members = [member(f"m{i}") for i in range(3)]
            await until(lambda: _balanced(members, 4), 60, "three members with 4 partitions each")
            await asyncio.sleep(2.0)  # records flowing to everyone
            before = {m.name: m.consumer.assignment() for m in members}
            joined_at = time.monotonic()
            members.append(member("m3"))
            await until(lambda: _balanced(members, 3), 60, "four members with 3 partitions each")
            settled_at = time.monotonic()
            await asyncio.sleep(1.0)
            end = time.monotonic()
            after = {m.name: m.consumer.assignment() for m in members}
    finally:
        for m in members:
            assert m.task is not None
            m.task.cancel()
        await asyncio.gather(*(m.task for m in members if m.task is not None), return_exceptions=True)
        for m in members:
            await m.consumer.close(timeout=10)

    report = []
    for m in members[:3]:
        kept = before[m.name] & after[m.name]
        revoked = m.between(joined_at, end, "revoked")
        assert not m.between(joined_at, end, "lost")
        pause = m.longest_gap(kept, joined_at, end)
        report.append({"strategy": strategy, "member": m.name, "kept": len(kept), "revoked": len(revoked),
                       "longest_gap_s": round(pause, 3), "rebalance_s": round(settled_at - joined_at, 3)})
        if strategy == "eager":
            assert revoked == before[m.name]  # eager: everything, every time
            assert m.owned_nothing_between(joined_at, end, after[m.name])  # so for a while it reads nothing
        else:
            assert revoked == before[m.name] - after[m.name]  # only what moved
            assert pause < 2 * FETCH_MAX_WAIT, f"{m.name} paused {pause:.2f} s on partitions it kept"
    moved = set().union(*(before[m.name] for m in members[:3])) & after["m3"]
    assert len(moved) == 3
    print(json.dumps(report))
    _append_report(report)


def _append_report(rows: list[dict[str, object]]) -> None:
    if path := os.environ.get("SCALE_OUT_REPORT"):
        with open(path, "a") as out:
            out.writelines(json.dumps(row) + "\n" for row in rows)
