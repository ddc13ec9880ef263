"""The rebalance step runs once per rebalance as work the consumer owns (issue #11, item 2): a
listener callback slower than the caller's poll timeout is never cancelled or started again by
poll(), the commit inside it lands, and the member keeps its place in the group. On Apache Kafka."""

from __future__ import annotations

import asyncio
import time

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import Poller, poll_until
from ._protocols import GroupProtocol

pytestmark = pytest.mark.asyncio

CLASSIC = GroupProtocol("classic")
CALLBACK_SECONDS = 3.0  # the case is 8 s; 15 polls of 0.2 s fit in 3 s just as well


def settings(broker, group, protocol=CLASSIC, **extra):
    base = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
                max_poll_interval_ms=20000)
    return protocol.settings(base, **extra)


class SlowRevocation(ConsumerRebalanceListener):
    """Flushes work for CALLBACK_SECONDS, then commits, on revocation."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.consumer: Consumer | None = None
        self.revoked_started = 0
        self.revoked_cancelled = 0
        self.revoked_finished = 0
        self.commit_error: BaseException | None = None

    def on_partitions_revoked(self, revoked):
        self.revoked_started += 1
        if self.kind == "sync":
            time.sleep(CALLBACK_SECONDS)
            assert self.consumer is not None
            self.consumer.commit_async(callback=self._committed)
            self.revoked_finished += 1
            return None
        return self._revoke_async()

    async def _revoke_async(self):
        try:
            await asyncio.sleep(CALLBACK_SECONDS)
            assert self.consumer is not None
            try:
                await self.consumer.commit(timeout=10)
            except Exception as exc:
                self.commit_error = exc
            self.revoked_finished += 1
        except asyncio.CancelledError:
            self.revoked_cancelled += 1
            raise

    def _committed(self, offsets, error):
        self.commit_error = error


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_slow_revocation_callback_runs_once_and_its_commit_lands(apache_kafka_broker, unique_topic,
                                                                        unique_group, group_protocol, kind):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    produce(broker, unique_topic, [(f"k{i}", f"v{i}") for i in range(40)])
    listener = SlowRevocation(kind)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as first:
        listener.consumer = first
        first.subscribe([unique_topic], listener=listener)
        got = await poll_until(first, lambda g: len(g) >= 40, timeout=30)
        assert len(got) == 40
        member_id = first.metrics()["member_id"]
        positions = {tp: await first.position(tp) for tp in first.assignment()}

        second = Consumer(unique_topic, **settings(broker, unique_group, group_protocol))
        async with second, Poller(second) as other:
            # The caller's loop: short polls, far shorter than the callback.
            deadline = asyncio.get_running_loop().time() + 30
            polls = 0
            while not (first.assignment() and other.consumer.assignment()
                       and listener.revoked_finished == 1):
                assert asyncio.get_running_loop().time() < deadline, (
                    f"no rebalance: {first.assignment()} / {second.assignment()}, {listener.__dict__}")
                await first.poll(timeout=0.2)
                polls += 1
            if kind == "async":  # a sync callback blocks the loop: no poll() runs meanwhile
                assert polls > CALLBACK_SECONDS / 0.2 * 0.5  # many polls lapsed while it ran

            assert listener.revoked_started == 1
            assert listener.revoked_cancelled == 0
            assert listener.revoked_finished == 1
            if kind == "sync":
                await asyncio.sleep(0)  # the commit_async callback runs on the loop
            assert listener.commit_error is None
            # The member kept its place: same member id, no lapse, one partition each.
            metrics = first.metrics()
            assert metrics["member_id"] == member_id
            assert metrics["poll_interval_lapses"] == 0
            assert len(first.assignment()) == 1
            assert len(second.assignment()) == 1
            committed = await second.committed(list(positions))
            assert {tp: om.offset for tp, om in committed.items() if om is not None} == positions


async def test_time_in_a_callback_counts_toward_max_poll_interval(apache_kafka_broker, unique_topic,
                                                                  unique_group, group_protocol):
    """KIP-62 as in Java: a callback running longer than max_poll_interval_ms gets the member
    out of the group, even while the caller keeps calling poll()."""
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    started = asyncio.Event()

    class Stuck(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            started.set()
            await asyncio.sleep(6)

    async with Consumer(**settings(broker, unique_group, group_protocol, max_poll_interval_ms=2500)) as first:
        first.subscribe([unique_topic], listener=Stuck())
        await poll_until(first, lambda _: len(first.assignment()) == 2, timeout=30)
        second = Consumer(unique_topic, **settings(broker, unique_group, group_protocol))
        async with second, Poller(second) as other:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            while first.metrics()["poll_interval_lapses"] == 0:
                assert loop.time() < deadline, "the watchdog never fired while the callback ran"
                await first.poll(timeout=0.2)
            assert started.is_set()
            # The live member gets every partition once the stuck one has left.
            await other.wait_for(lambda: len(second.assignment()) == 2, timeout=20)


async def test_close_cancels_a_running_callback_once(apache_kafka_broker, unique_topic, unique_group):
    """close() is what cancels a running callback; the event is not delivered a second time.

    Classic (eager) only: a changed subscription revokes everything first. Cooperative and KIP-848
    members keep the partitions they still own, so nothing would be revoked here."""
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    calls: list[str] = []

    class Slow(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            calls.append("revoked")
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                calls.append("cancelled")
                raise

    first = Consumer(**settings(broker, unique_group))
    first.subscribe([unique_topic], listener=Slow())
    await poll_until(first, lambda _: first.assignment() == {TopicPartition(unique_topic, 0)}, timeout=30)
    first.subscribe([unique_topic, unique_topic + "-other"])  # a rejoin: revocation first
    await first.poll(timeout=0.3)
    assert calls == ["revoked"]
    started = asyncio.get_running_loop().time()
    await first.close(timeout=5)
    assert asyncio.get_running_loop().time() - started < 5
    assert calls == ["revoked", "cancelled"]
