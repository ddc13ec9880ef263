"""Cancelling any consumer call leaves the consumer consistent (Apache Kafka 4.x): a cancelled poll
neither loses nor repeats records and keeps its join running, a cancelled commit leaves the
coordinator connection usable, a cancelled close still closes, and the poll watchdog still fires."""

from __future__ import annotations

import asyncio
import random
import time
from collections import defaultdict

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.errors import ConsumerClosedError
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import Poller, poll_until, until
from ._protocols import GroupProtocol

pytestmark = pytest.mark.asyncio


def settings(broker, group, protocol, **extra):
    base = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=1000)
    return protocol.settings(base, **extra)


async def _cancelled(task):
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def _wait_state(consumer, states, timeout=20.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while consumer.metrics().get("group_state") not in states:
        assert loop.time() < deadline, consumer.metrics().get("group_state")
        await asyncio.sleep(0.001)


async def test_cancelled_poll_during_join_keeps_the_join(apache_kafka_broker, unique_topic, unique_group):
    # Classic only: it cancels poll() while the coordinator holds a JoinGroup. Under KIP-848 the
    # join is a heartbeat the background task sends, answered at once: poll() never waits in it.
    group_protocol = GroupProtocol("classic")
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    produce(broker, unique_topic, [{"value": f"v{i}", "partition": i % 2} for i in range(10)])
    # b is a stable member: a's JoinGroup is held by the coordinator until b rejoins too (about
    # one heartbeat interval), so a's first poll is reliably cancelled mid-join.
    b = Consumer(unique_topic, **settings(broker, unique_group, group_protocol))
    a = Consumer(unique_topic, **settings(broker, unique_group, group_protocol))
    async with b, a, Poller(b) as b_poller:
        await b_poller.wait_for(lambda: len(b.assignment()) == 2, timeout=20)
        poll = asyncio.create_task(a.poll(timeout=30))
        await _wait_state(a, {"JOINING", "SYNCING"})
        await _cancelled(poll)
        assert a.metrics()["group_state"] in ("JOINING", "SYNCING")  # the join goes on
        rebalances = a.metrics()["rebalances"]
        got = await poll_until(a, lambda _: len(a.assignment()) == 1, timeout=20)
        assert a.metrics()["rebalances"] == rebalances + 1  # the same join completed: no second round
        more = await poll_until(a, lambda g: len(got) + len(g) >= 5, timeout=20)
        partition = next(iter(a.assignment())).partition
        assert [r.offset for r in got + more] == list(range(5))
        assert {r.partition for r in got + more} == {partition}


async def test_cancelled_polls_lose_and_repeat_nothing(apache_kafka_broker, unique_topic, unique_group, group_protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    total = 3000
    chunks = [[{"value": f"v{i}", "partition": i % 2} for i in range(start, start + 300)]
              for start in range(0, total, 300)]
    rng = random.Random(1234)
    async with Consumer(unique_topic, **settings(broker, unique_group, group_protocol,
                                                 max_poll_records=50)) as consumer:

        async def producing():
            for chunk in chunks:
                await asyncio.to_thread(produce, broker, unique_topic, chunk)
                await asyncio.sleep(0.05)

        producer = asyncio.create_task(producing())
        got = []
        cancelled = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while len(got) < total:
            assert loop.time() < deadline, len(got)
            task = asyncio.create_task(consumer.poll(timeout=1.0))
            await asyncio.sleep(rng.choice([0, 0, 0.0005, 0.002, 0.01]))
            if task.cancel():
                try:
                    got.extend(await task)  # it finished before the cancellation landed
                except asyncio.CancelledError:
                    cancelled += 1
            else:
                got.extend(task.result())
        await producer
        got.extend(await consumer.poll(timeout=0.5))
        assert cancelled > 10
        by_partition = defaultdict(list)
        for r in got:
            by_partition[r.partition].append(r.offset)
        assert {p: offsets for p, offsets in by_partition.items()} == {
            p: list(range(total // 2)) for p in (0, 1)}


async def test_cancelled_commit_leaves_commits_working(apache_kafka_broker, unique_topic, unique_group, group_protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    produce(broker, unique_topic, [(None, f"v{i}") for i in range(5)])
    async with Consumer(unique_topic, **settings(broker, unique_group, group_protocol)) as consumer:
        await poll_until(consumer, lambda g: len(g) >= 5, timeout=30)
        cancelled = 0
        for i, delay in enumerate([0, 0, 0.0005, 0.001, 0.002, 0.003, 0.005]):
            task = asyncio.create_task(consumer.commit({tp: i}))
            await asyncio.sleep(delay)
            if task.cancel():
                try:
                    await task
                except asyncio.CancelledError:
                    cancelled += 1
        assert cancelled >= 2
        await consumer.commit()
        assert (await consumer.committed([tp]))[tp].offset == 5
        await consumer.commit({tp: 3}, timeout=5)
        assert (await consumer.committed([tp]))[tp].offset == 3
        assert consumer.metrics()["group_state"] == "STABLE"


async def test_cancelled_close_still_closes(apache_kafka_broker, unique_topic, unique_group, group_protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    a = Consumer(unique_topic, **settings(broker, unique_group, group_protocol))
    b = Consumer(unique_topic, **settings(broker, unique_group, group_protocol))
    async with b, Poller(b) as b_poller:
        await a.start()
        await poll_until(a, lambda _: len(a.assignment()) == 1 and len(b.assignment()) == 1, timeout=30)
        closing = asyncio.create_task(a.close())
        await asyncio.sleep(0)  # close() has started its graceful part
        await _cancelled(closing)  # ... which the cancellation cuts short: a closes by force, and leaves
        with pytest.raises(ConsumerClosedError):
            await a.poll(timeout=0.1)
        began = time.monotonic()
        await a.close()  # the close the cancelled call made is over: returns at once
        assert time.monotonic() - began < 0.5
        assert a.metrics()["closed"]
        # The forced part still sent the LeaveGroup: b takes over well before the session timeout (6 s).
        took = await b_poller.wait_for(lambda: len(b.assignment()) == 2, timeout=5)
        assert took < 4.0
    # Both consumers closed: no task of theirs is left behind (it would warn at loop close).
    leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert leftovers == []


async def test_watchdog_fires_after_a_cancelled_poll(apache_kafka_broker, unique_topic, unique_group, group_protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    async with Consumer(unique_topic, **settings(broker, unique_group, group_protocol,
                                                 max_poll_interval_ms=2000)) as consumer:
        await poll_until(consumer, lambda _: len(consumer.assignment()) == 1, timeout=30)
        # A caller waiting in poll() longer than max_poll_interval_ms is polling: no lapse.
        assert len(await consumer.poll(timeout=3.0)) == 0
        assert consumer.metrics()["poll_interval_lapses"] == 0
        assert consumer.metrics()["group_state"] == "STABLE"
        poll = asyncio.create_task(consumer.poll(timeout=30))
        await asyncio.sleep(1.0)
        await _cancelled(poll)
        loop = asyncio.get_running_loop()
        cancelled_at = loop.time()
        while consumer.metrics()["poll_interval_lapses"] == 0:
            assert loop.time() - cancelled_at < 4.0, "the watchdog never fired"
            await asyncio.sleep(0.05)
        # The deadline counts from the end of the cancelled poll (the clock is stamped in finally).
        assert loop.time() - cancelled_at >= 2.0 * 0.95
        assert consumer.metrics()["last_leave_delay_seconds"] < 0.5
        # The lapse is counted as the LeaveGroup is sent; the state is LEAVING until its answer,
        # which a loaded machine can take more than one 50 ms step of the loop above to bring.
        await until(lambda: consumer.metrics()["group_state"] != "LEAVING", 5.0, "the LeaveGroup's answer",
                    interval=0.01)
        assert consumer.metrics()["group_state"] == group_protocol.lapsed_state
        await poll_until(consumer, lambda _: consumer.metrics()["group_state"] == "STABLE", timeout=30)
