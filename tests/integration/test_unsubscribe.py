"""unsubscribe() as Java's (issue #29, defect 4), on Apache Kafka under both group protocols: the
revoke callback runs for what the member owned, auto-commit commits what was consumed, and only
then does the group hear that the member left, so the next owner starts where it stopped.
"""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, TopicPartition
from aiokafka_lite.errors import ConsumerClosedError, IllegalStateError
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import poll_until
from ._protocols import GroupProtocol

pytestmark = pytest.mark.asyncio

RECORDS = 10


class Recorder(ConsumerRebalanceListener):
    def __init__(self, consumer: Consumer | None = None, commit_on_revoke: bool = False) -> None:
        self.consumer = consumer
        self.commit_on_revoke = commit_on_revoke
        self.events: list[tuple[str, set[TopicPartition]]] = []

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", set(revoked)))
        if self.commit_on_revoke and revoked:
            assert self.consumer is not None
            await self.consumer.commit()

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", set(assigned)))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.events.append(("lost", set(lost)))


def settings(broker, group, protocol: GroupProtocol, **extra):
    base = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                session_timeout_ms=10000, heartbeat_interval_ms=500, auto_commit_interval_ms=600000)
    return protocol.settings(base, **extra)


async def _consume_all(broker, topic, group, protocol, listening=Recorder, **extra
                       ) -> tuple[Consumer, Recorder, set[TopicPartition]]:
    create_topic(broker, topic, partitions=2)
    produce(broker, topic, [{"value": f"v{i}", "partition": i % 2} for i in range(RECORDS)])
    consumer = Consumer(**settings(broker, group, protocol, **extra))
    listener = listening(consumer, commit_on_revoke=not extra.get("enable_auto_commit", True))
    consumer.subscribe([topic], listener=listener)
    await consumer.start()
    await poll_until(consumer, lambda got: len(got) >= RECORDS, timeout=60)
    return consumer, listener, {TopicPartition(topic, p) for p in range(2)}


async def _committed(broker, group, tps) -> dict[TopicPartition, int | None]:
    async with Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=group) as reader:
        found = await reader.committed(list(tps))
    return {tp: None if om is None else om.offset for tp, om in found.items()}


@pytest.mark.parametrize("commit", ["auto-commit", "commit in on_partitions_revoked"])
async def test_unsubscribe_revokes_commits_then_leaves(apache_kafka_broker, unique_topic, unique_group,
                                                       group_protocol, commit):
    broker = apache_kafka_broker
    auto = commit == "auto-commit"
    consumer, listener, tps = await _consume_all(broker, unique_topic, unique_group, group_protocol,
                                                 enable_auto_commit=auto)
    try:
        await consumer.unsubscribe()
        assert consumer.assignment() == set()
        assert listener.events[-1] == ("revoked", tps)
        assert await _committed(broker, unique_group, tps) == {tp: RECORDS // 2 for tp in tps}
        # The member left: a newcomer owns both partitions at once and has nothing to re-read.
        newcomer = Consumer(unique_topic, **settings(broker, unique_group, group_protocol))
        async with newcomer:
            got = await poll_until(newcomer, lambda got: newcomer.assignment() == tps, timeout=30)
            assert got == []
    finally:
        await consumer.close()


async def test_unsubscribe_not_awaited_is_finished_by_close(apache_kafka_broker, unique_topic, unique_group,
                                                           group_protocol):
    broker = apache_kafka_broker
    consumer, listener, tps = await _consume_all(broker, unique_topic, unique_group, group_protocol)
    consumer.unsubscribe()
    assert consumer.assignment() == set()  # at once, as in Java
    assert consumer.subscription() == set()
    await consumer.close()
    assert ("revoked", tps) in listener.events
    assert await _committed(broker, unique_group, tps) == {tp: RECORDS // 2 for tp in tps}


async def test_subscribe_again_after_unsubscribe(apache_kafka_broker, unique_topic, unique_group, group_protocol):
    """The usual unsubscribe(); subscribe(...) pair, without await: the next poll() finishes the
    revocation and the leave first, then joins again and reads from the committed offsets."""
    broker = apache_kafka_broker
    consumer, listener, tps = await _consume_all(broker, unique_topic, unique_group, group_protocol)
    try:
        consumer.unsubscribe()
        consumer.subscribe([unique_topic], listener=listener)
        produce(broker, unique_topic, [{"value": "new", "partition": 0}])
        got = await poll_until(consumer, lambda got: len(got) >= 1, timeout=60)
        assert [r.value for r in got] == [b"new"]
        assert ("revoked", tps) in listener.events
    finally:
        await consumer.close()


async def test_unsubscribe_raises_the_callbacks_error_and_still_leaves(apache_kafka_broker, unique_topic,
                                                                       unique_group, group_protocol):
    broker = apache_kafka_broker

    class Failing(Recorder):
        async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
            raise RuntimeError("revoke failed")

    consumer, _, tps = await _consume_all(broker, unique_topic, unique_group, group_protocol, Failing)
    try:
        with pytest.raises(RuntimeError, match="revoke failed"):
            await consumer.unsubscribe()
        assert await _committed(broker, unique_group, tps) == {tp: RECORDS // 2 for tp in tps}  # before the callback
        newcomer = Consumer(unique_topic, **settings(broker, unique_group, group_protocol))
        async with newcomer:
            await poll_until(newcomer, lambda got: newcomer.assignment() == tps, timeout=30)
        with pytest.raises(IllegalStateError):
            await consumer.poll(0)  # unsubscribed: nothing to poll
    finally:
        await consumer.close()


async def test_close_during_unsubscribe_ends_its_waiter_with_consumer_closed(apache_kafka_broker, unique_topic,
                                                                              unique_group):
    broker = apache_kafka_broker
    revoking = asyncio.Event()

    class Slow(Recorder):
        async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
            revoking.set()
            await asyncio.sleep(30)

    consumer, _, _ = await _consume_all(broker, unique_topic, unique_group, GroupProtocol("classic"), Slow)
    waiter = asyncio.create_task(_await(consumer))
    await asyncio.wait_for(revoking.wait(), 10)
    await consumer.close(timeout=0.5)
    with pytest.raises(ConsumerClosedError):
        await waiter


async def _await(consumer: Consumer) -> None:
    await consumer.unsubscribe()
