"""Where a record read twice comes from, member by member, on Apache Kafka (issue 40 item 1).

test_group_interop's mixed group once committed records twice. These tests take each suspect
alone, in a group of two on a one-partition topic, so that each answer names its member:

- a member given a partition back, after another member committed records of it, starts at the
  committed offset, not at the position it had before (the hypothesis of commit aba697d: false for
  ours, librdkafka and aiokafka alike);
- a batch in the application's hands when the group rebalances: ours rebalances only inside
  poll(), so the commit that follows is made in the batch's own generation and the next poll()
  goes on after it. aiokafka rejoins in a background task: the rebalance completes while the
  application still holds the batch, aiokafka then resumes from the committed offset it fetched
  during that rebalance, and the application's commit, accepted in the new generation, does not
  stop the batch coming back. A peer's behaviour (aiokafka 0.13): test_group_interop's aiokafka
  member therefore drops a batch read before a rebalance, as an aiokafka application must.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import until
from ._protocols import GroupProtocol

pytestmark = pytest.mark.asyncio
CLASSIC = GroupProtocol("classic")


def _ours(broker: Any, topic: str, group: str, client_id: str, group_protocol: Any, **extra: Any) -> Consumer:
    settings = group_protocol.settings({"partition_assignment_strategy": ("range",), "heartbeat_interval_ms": 500})
    return Consumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group, client_id=client_id,
                    enable_auto_commit=False, auto_offset_reset="earliest", **settings, **extra)


class _Member:
    """The member under test, polled in the background; notes what it holds and what it reads."""

    def __init__(self) -> None:
        self.held: set[int] = set()
        self.read: list[int] = []
        self.stop = threading.Event()


async def _ours_member(consumer: Consumer, member: _Member) -> None:
    async with consumer:
        while not member.stop.is_set():
            batch = await consumer.poll(timeout=0.2)
            member.held = {tp.partition for tp in consumer.assignment()}
            member.read.extend(r.offset for r in batch)


def _confluent_member(bootstrap: str, topic: str, group: str, member: _Member) -> None:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": "z-member", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "partition.assignment.strategy": "range", "heartbeat.interval.ms": 500})
    consumer.subscribe([topic], on_assign=lambda c, parts: setattr(member, "held", {p.partition for p in parts}),
                       on_revoke=lambda c, parts: setattr(member, "held", set()))
    try:
        while not member.stop.is_set():
            member.read.extend(m.offset() for m in consumer.consume(100, timeout=0.2) if m.error() is None)
    finally:
        consumer.close()


async def _aiokafka_member(bootstrap: str, topic: str, group: str, member: _Member) -> None:
    import aiokafka
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor

    consumer = aiokafka.AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, client_id="z-member", enable_auto_commit=False,
        auto_offset_reset="earliest", partition_assignment_strategy=(RangePartitionAssignor,),
        heartbeat_interval_ms=500)
    await consumer.start()
    try:
        while not member.stop.is_set():
            data = await consumer.getmany(timeout_ms=200)
            member.held = {tp.partition for tp in consumer.assignment()}
            member.read.extend(m.offset for records in data.values() for m in records)
    finally:
        await consumer.stop()


@pytest.mark.parametrize("kind", ["ours", "librdkafka", "aiokafka"])
async def test_a_member_given_a_partition_back_starts_at_the_committed_offset(apache_kafka_broker, unique_topic,
                                                                              unique_group, kind):
    """Classic members, range assignor: the client ids decide who gets the one partition."""
    group_protocol = CLASSIC
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    member = _Member()
    if kind == "ours":
        task = asyncio.create_task(_ours_member(
            _ours(broker, unique_topic, unique_group, "z-member", group_protocol), member))
    elif kind == "librdkafka":
        task = asyncio.create_task(asyncio.to_thread(_confluent_member, broker.bootstrap_servers, unique_topic,
                                                     unique_group, member))
    else:
        task = asyncio.create_task(_aiokafka_member(broker.bootstrap_servers, unique_topic, unique_group, member))
    try:
        await until(lambda: member.held == {0}, 60, "the member to hold the partition")
        await asyncio.sleep(1.0)  # it fetches the empty partition: its position is 0
        # Another member takes the partition (range: "a-other" sorts first).
        other = _ours(broker, unique_topic, unique_group, "a-other", group_protocol)
        await other.start()
        try:
            tp = TopicPartition(unique_topic, 0)

            async def other_holds() -> bool:
                await other.poll(timeout=0.2)
                return tp in other.assignment() and not member.held
            deadline = time.monotonic() + 60
            while not await other_holds():
                assert time.monotonic() < deadline, "the other member never took the partition"
            await asyncio.to_thread(produce, broker, unique_topic, ((None, b"v") for _ in range(200)))
            read = 0
            while read < 200:
                read += len(await other.poll(timeout=1.0))
            await other.commit({tp: 200})
        finally:
            await other.close()
        await until(lambda: member.held == {0}, 60, "the member to hold the partition again")
        await asyncio.sleep(2.0)
    finally:
        member.stop.set()
        await task
    assert member.read == [], f"{kind} read offsets {min(member.read)}-{max(member.read)} although 200 was committed"


async def test_ours_goes_on_after_a_batch_committed_across_a_rebalance(apache_kafka_broker, unique_topic,
                                                                         unique_group, group_protocol):
    """The scenario aiokafka redelivers in (below): our next poll() goes on after the commit."""
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    await asyncio.to_thread(produce, broker, unique_topic, ((None, b"v") for _ in range(1000)))
    tp = TopicPartition(unique_topic, 0)
    consumer = _ours(broker, unique_topic, unique_group, "a-member", group_protocol, max_poll_records=100)
    other = _ours(broker, unique_topic, unique_group, "z-other", group_protocol)
    async with consumer, other:
        batch: list[int] = []
        while not batch:
            batch = [r.offset for r in await consumer.poll(timeout=1.0)]
        joining = asyncio.create_task(other.poll(timeout=5.0))  # the group rebalances
        await asyncio.sleep(3.0)  # while the application holds its batch
        await consumer.commit({tp: batch[-1] + 1})
        after: list[int] = []
        deadline = time.monotonic() + 30
        while not after and time.monotonic() < deadline:
            after = [r.offset for r in await consumer.poll(timeout=1.0)]
            if tp not in consumer.assignment():
                break
        await joining
    assert not after or after[0] == batch[-1] + 1, f"after committing {batch[-1] + 1}, poll() returned {after[0]}"


async def test_aiokafka_redelivers_a_batch_committed_across_its_background_rebalance(apache_kafka_broker,
                                                                                    unique_topic, unique_group):
    """A peer's behaviour, shown alone: aiokafka's batch comes back although its commit succeeded."""
    import aiokafka
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor

    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    await asyncio.to_thread(produce, broker, unique_topic, ((None, b"v") for _ in range(1000)))
    rebalanced = asyncio.Event()

    class Noting(aiokafka.ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: object) -> None:
            pass

        async def on_partitions_assigned(self, assigned: object) -> None:
            rebalanced.set()

    peer = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=broker.bootstrap_servers, group_id=unique_group, client_id="a-peer",
        enable_auto_commit=False, auto_offset_reset="earliest", partition_assignment_strategy=(RangePartitionAssignor,),
        heartbeat_interval_ms=200)
    peer.subscribe([unique_topic], listener=Noting())
    other = Consumer(unique_topic, bootstrap_servers=broker.bootstrap_servers, group_id=unique_group,
                     client_id="z-other", auto_offset_reset="earliest", partition_assignment_strategy=("range",))
    await peer.start()
    try:
        batch: list[int] = []
        while not batch:
            data = await peer.getmany(timeout_ms=1000, max_records=100)
            batch = [m.offset for records in data.values() for m in records]
        rebalanced.clear()
        async with other:
            joining = asyncio.create_task(other.poll(timeout=5.0))
            await asyncio.wait_for(rebalanced.wait(), 30)  # completed in aiokafka's background task
            await peer.commit({aiokafka.TopicPartition(unique_topic, 0): batch[-1] + 1})  # accepted
            data = await peer.getmany(timeout_ms=5000, max_records=100)
            after = [m.offset for records in data.values() for m in records]
            await joining
    finally:
        await peer.stop()
    # If this fails, aiokafka no longer redelivers: test_group_interop's aiokafka member can stop
    # dropping batches read before a rebalance.
    assert after, "aiokafka returned nothing after the rebalance"
    assert after[0] == batch[0] == 0, f"batch {batch[0]}-{batch[-1]}, then from {after[0]}"
