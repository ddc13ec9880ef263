"""The KIP-848 consumer protocol through the Consumer (group_protocol="consumer"), on Apache Kafka
4.3.1: static membership, and the clear error a broker without the protocol gives."""

from __future__ import annotations

import asyncio
import logging

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, TopicPartition
from aiokafka_lite.errors import CommitFailedError, GroupProtocolError, UnreleasedInstanceIdError
from aiokafka_lite.testing.helpers import create_topic

from ._consumers import Poller, poll_until

pytestmark = pytest.mark.asyncio

PARTITIONS = 4


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.calls.append(("assigned", set(assigned)))

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.calls.append(("revoked", set(revoked)))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.calls.append(("lost", set(lost)))


def member(broker, topic: str, group: str, listener: Recorder | None = None, **extra) -> Consumer:
    consumer = Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=group, group_protocol="consumer",
                        auto_offset_reset="earliest", **extra)
    consumer.subscribe([topic], listener=listener)
    return consumer


def split_evenly(*consumers: Consumer) -> bool:
    owned = [c.assignment() for c in consumers]
    every = [tp for tps in owned for tp in tps]
    return len(every) == len(set(every)) == PARTITIONS and all(len(tps) == PARTITIONS // len(owned) for tps in owned)


async def test_static_member_restarted_within_the_session_gets_its_partitions_back(
        apache_kafka_broker, unique_topic, unique_group):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    b_calls = Recorder()
    a = member(broker, unique_topic, unique_group, group_instance_id="static-a")
    b = member(broker, unique_topic, unique_group, b_calls, group_instance_id="static-b")
    async with b, Poller(b):
        async with a, Poller(a) as a_poller:
            await a_poller.wait_for(lambda: split_evenly(a, b), timeout=60)
            a_had = a.assignment()
        # a closed: a static member leaves with epoch -2, so the broker keeps its partitions
        # for the session timeout (10 s on the test broker) instead of moving them.
        settled = len(b_calls.calls)
        a2 = member(broker, unique_topic, unique_group, group_instance_id="static-a")
        async with a2, Poller(a2) as a2_poller:
            await a2_poller.wait_for(lambda: a2.assignment() == a_had, timeout=8)
            await asyncio.sleep(1.0)  # a heartbeat or two: b must still see nothing
            assert b_calls.calls[settled:] == []
            assert split_evenly(a2, b)
            assert a2.metrics()["member_epoch"] > 0


async def test_a_second_member_with_the_same_instance_id_gets_a_typed_error(
        apache_kafka_broker, unique_topic, unique_group):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    first = member(broker, unique_topic, unique_group, group_instance_id="only-one")
    async with first, Poller(first) as poller:
        await poller.wait_for(lambda: len(first.assignment()) == PARTITIONS, timeout=60)
        second = member(broker, unique_topic, unique_group, group_instance_id="only-one")
        async with second:
            with pytest.raises(UnreleasedInstanceIdError):
                await poll_until(second, lambda _: False, timeout=20)
        assert len(first.assignment()) == PARTITIONS  # the first member is not disturbed


async def test_a_broker_without_the_consumer_protocol_gives_an_error_naming_the_setting(
        kafka39_broker, unique_topic, unique_group):
    create_topic(kafka39_broker, unique_topic, partitions=1)
    consumer = member(kafka39_broker, unique_topic, unique_group)
    async with consumer:
        with pytest.raises(GroupProtocolError, match="group_protocol"):
            await poll_until(consumer, lambda _: False, timeout=20)


async def test_poll_deadline_lapse_leaves_at_once_and_the_next_poll_rejoins(
        apache_kafka_broker, unique_topic, unique_group, caplog):
    """KIP-62 under KIP-848: the watchdog leaves (member epoch -1) within 100 ms of the deadline, a
    peer owns every partition within the deadline + 2 s, and the lapsed member's next poll rejoins."""
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    a = member(broker, unique_topic, unique_group, max_poll_interval_ms=3000)
    b = member(broker, unique_topic, unique_group)
    every = {TopicPartition(unique_topic, p) for p in range(PARTITIONS)}
    async with a, b, Poller(b) as b_poller:
        await poll_until(a, lambda _: split_evenly(a, b), timeout=60)
        loop = asyncio.get_running_loop()
        last_poll = loop.time()  # a stops polling here
        caplog.set_level(logging.WARNING, logger="aiokafka_lite.consumer")
        held = a.assignment()
        await b_poller.wait_for(lambda: b.assignment() == every, timeout=20)
        assert loop.time() - last_poll < 3.0 + 2.0
        with pytest.raises(CommitFailedError, match="max_poll_interval_ms"):  # the stale commit
            await a.commit({tp: 0 for tp in held})
        figures = a.metrics()
        assert figures["poll_interval_lapses"] == 1
        assert figures["last_leave_delay_seconds"] < 0.1
        assert any("max_poll_interval_ms=3000" in r.getMessage() for r in caplog.records)
        await poll_until(a, lambda _: split_evenly(a, b), timeout=30)  # rejoined, partitions again
        assert a.metrics()["group_state"] == "STABLE"
