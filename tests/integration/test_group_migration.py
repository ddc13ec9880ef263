"""Rolling migration of a live group from the classic protocol to the KIP-848 consumer protocol
and back (issue #12), on Apache Kafka 4.3.1 with its default migration policy (bidirectional):
members are restarted one by one with the other group_protocol while records keep coming.
Nothing may be lost (every produced offset is read by some member), and at the end every
partition is owned by exactly one member."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.testing.helpers import create_topic

from ._steady import SteadyProducer

pytestmark = pytest.mark.asyncio

PARTITIONS = 6
MEMBERS = 3
RATE = 120.0


class Member:
    def __init__(self, broker, topic: str, group: str, protocol: str, seen: set[tuple[int, int]]) -> None:
        settings = {"group_protocol": protocol}
        if protocol == "classic":
            settings.update(session_timeout_ms=10000, heartbeat_interval_ms=500)
        self.consumer = Consumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                 auto_offset_reset="earliest", auto_commit_interval_ms=500, **settings)
        self.protocol = protocol
        self._seen = seen
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            for record in await self.consumer.poll(timeout=0.2):
                self._seen.add((record.partition, record.offset))

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        if self._task.done() and not self._task.cancelled() and self._task.exception() is not None:
            raise self._task.exception()  # type: ignore[misc]
        await self.consumer.close(timeout=10)  # commits what it read (auto-commit)


def _in_group(m: Member) -> bool:
    """A member of the current group in its own protocol: a member epoch, or a generation."""
    figures = m.consumer.metrics()
    return figures.get("member_epoch", 0) > 0 if m.protocol == "consumer" else figures.get("generation_id", -1) > 0


def _owned_once(members: list[Member]) -> bool:
    owned = [tp for m in members for tp in m.consumer.assignment()]
    return len(owned) == len(set(owned)) == PARTITIONS and all(
        m.consumer.assignment() and _in_group(m) for m in members)


async def _until(condition, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.1)


async def test_rolling_migration_to_the_consumer_protocol_and_back(apache_kafka_broker, unique_topic,
                                                                   unique_group):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    seen: set[tuple[int, int]] = set()
    members = [Member(broker, unique_topic, unique_group, "classic", seen) for _ in range(MEMBERS)]
    try:
        async with SteadyProducer(broker.bootstrap_servers, unique_topic, PARTITIONS, RATE) as producer:
            await _until(lambda: _owned_once(members), 60, "the classic group settles")
            for protocol in ("consumer", "classic"):
                for i in range(MEMBERS):
                    await members[i].stop()
                    members[i] = Member(broker, unique_topic, unique_group, protocol, seen)
                    await _until(lambda: _owned_once(members), 60,
                                 f"member {i} back as {protocol}, each partition owned once")
                    await asyncio.sleep(1.0)  # a little work in the mixed group
        produced = producer.sent
        await _until(lambda: len(seen) >= produced, 60, "every record read")
        assert _owned_once(members)
        assert {m.protocol for m in members} == {"classic"}
    finally:
        for m in members:
            await m.stop()
    per_partition = [sorted(o for p, o in seen if p == partition) for partition in range(PARTITIONS)]
    assert sum(map(len, per_partition)) == produced
    for partition, offsets in enumerate(per_partition):
        assert offsets == list(range(len(offsets))), f"gap in {TopicPartition(unique_topic, partition)}"
