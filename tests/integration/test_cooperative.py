"""Rebalances that keep partitions flowing (cooperative KIP-429, and KIP-848) on Apache Kafka 4.3.1:
the listener runs inside poll() only, as in Java, never while the application processes records;
a member whose generation is gone loses its partitions (no revocation, no commit)."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import Poller, poll_until

pytestmark = pytest.mark.asyncio

PARTITIONS = 4
PROTOCOLS = {
    "eager": {"partition_assignment_strategy": ["range"], "session_timeout_ms": 10000,
              "heartbeat_interval_ms": 500},
    "cooperative": {"partition_assignment_strategy": ["cooperative-sticky"], "session_timeout_ms": 10000,
                    "heartbeat_interval_ms": 500},
    "kip848": {"group_protocol": "consumer"},
}


class Watched(ConsumerRebalanceListener):
    """Notes, for every callback, whether the application was processing records handed out by
    poll() at the time (from a poll() that returned records until the next poll() call)."""

    def __init__(self) -> None:
        self.processing = False
        self.calls: list[tuple[str, frozenset[TopicPartition], bool]] = []

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.calls.append(("assigned", frozenset(assigned), self.processing))

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.calls.append(("revoked", frozenset(revoked), self.processing))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.calls.append(("lost", frozenset(lost), self.processing))

    async def poll(self, consumer: Consumer, timeout: float) -> int:
        self.processing = False
        got = len(await consumer.poll(timeout=timeout))
        self.processing = got > 0
        return got


def member(broker, topic: str, group: str, listener: ConsumerRebalanceListener, protocol: str,
           **extra) -> Consumer:
    consumer = Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                        **PROTOCOLS[protocol], **extra)
    consumer.subscribe([topic], listener=listener)
    return consumer


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
async def test_callbacks_run_only_inside_poll(apache_kafka_broker, unique_topic, unique_group, protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    produce(broker, unique_topic, [(None, f"v{i}") for i in range(2000)])
    busy, other = Watched(), Watched()
    a = member(broker, unique_topic, unique_group, busy, protocol, max_poll_records=50)
    b = member(broker, unique_topic, unique_group, other, protocol)
    async with a, b:
        while not a.assignment():
            await busy.poll(a, 0.5)

        async def application() -> None:  # short polls, long processing: mostly outside poll()
            while True:
                await busy.poll(a, 0.05)
                await asyncio.sleep(0.4)

        app = asyncio.create_task(application())
        try:
            await poll_until(b, lambda _: len(a.assignment()) == len(b.assignment()) == PARTITIONS // 2,
                             timeout=60)
            await asyncio.sleep(1.0)  # the second cooperative round, if any, completes
        finally:
            app.cancel()
            await asyncio.gather(app, return_exceptions=True)
    assert any(kind == "revoked" for kind, _tps, _processing in busy.calls), busy.calls  # a gave some up to b
    # As in Java, where callbacks run inside poll(): never one while the application works on
    # records poll() handed out (close(), which revokes last, is outside this loop anyway).
    assert not [c for c in busy.calls[:-1] if c[2]], busy.calls


@pytest.mark.parametrize("protocol", ["cooperative", "kip848"])
async def test_a_lapsed_member_loses_its_partitions_without_committing(apache_kafka_broker, unique_topic,
                                                                       unique_group, protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    produce(broker, unique_topic, [(None, f"v{i}") for i in range(400)])
    lapsing, peer = Watched(), Watched()
    a = member(broker, unique_topic, unique_group, lapsing, protocol, max_poll_interval_ms=3000,
               enable_auto_commit=True, auto_commit_interval_ms=100)
    b = member(broker, unique_topic, unique_group, peer, protocol, enable_auto_commit=False)
    every = {TopicPartition(unique_topic, p) for p in range(PARTITIONS)}
    async with a, b, Poller(b) as b_poller:
        await poll_until(a, lambda _: len(a.assignment()) == PARTITIONS // 2
                         and len(b.assignment()) == PARTITIONS // 2, timeout=60)
        held = a.assignment()
        committed_before = await a.committed(held)
        await b_poller.wait_for(lambda: b.assignment() == every, timeout=20)  # a stopped polling
        await lapsing.poll(a, 1.0)  # the next poll: the partitions are lost, then a rejoins
        lost = [tps for kind, tps, _ in lapsing.calls if kind == "lost"]
        assert lost == [frozenset(held)]
        assert not any(kind == "revoked" for kind, _tps, _ in lapsing.calls[-1:])
        assert await b.committed(held) == committed_before  # nothing committed for them after the lapse
