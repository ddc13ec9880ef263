"""KIP-62 on Apache Kafka 4.x: the poll-deadline watchdog, heartbeats across long awaits, handover
on close() and after SIGKILL; under both group protocols (the ``group_protocol`` fixture)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import textwrap

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.errors import CommitFailedError
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import Poller, poll_until

pytestmark = pytest.mark.asyncio

PARTITIONS = 4


def settings(broker, group, protocol, **extra):
    base = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                enable_auto_commit=False, session_timeout_ms=30000, heartbeat_interval_ms=500)
    return protocol.settings(base, **extra)


def all_partitions(topic):
    return {TopicPartition(topic, p) for p in range(PARTITIONS)}


async def test_watchdog_leaves_on_poll_lapse_and_next_poll_rejoins(apache_kafka_broker, unique_topic,
                                                                   unique_group, group_protocol, caplog):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    produce(broker, unique_topic, [(None, f"v{i}") for i in range(400)])
    a_conf = settings(broker, unique_group, group_protocol, max_poll_interval_ms=3000)
    a = Consumer(unique_topic, **a_conf)
    b = Consumer(unique_topic, **settings(broker, unique_group, group_protocol, max_poll_interval_ms=60000))
    session = group_protocol.session_timeout(a_conf)
    async with a, b:
        handed_to_a = await poll_until(a, lambda got: bool(got))  # A joins alone, gets records
        async with Poller(b) as b_poller:
            # A keeps polling until the group settles on two members.
            await poll_until(a, lambda _: len(a.assignment()) == PARTITIONS // 2
                             and len(b.assignment()) == PARTITIONS // 2, timeout=60)
            stale = dict.fromkeys(a.assignment())
            caplog.set_level(logging.WARNING, logger="aiokafka_lite.consumer")
            loop = asyncio.get_running_loop()
            last_poll = loop.time()
            # A stops polling. B must own everything within the deadline plus one rebalance,
            # below the session timeout (30 s classic, the broker's 10 s under KIP-848) that
            # would hand A's partitions over if A merely went silent.
            took = await b_poller.wait_for(lambda: b.assignment() == all_partitions(unique_topic), timeout=20)
            since_last_poll = loop.time() - last_poll
            assert since_last_poll < 3.0 + 5.0 < 3.0 + session, since_last_poll
            metrics = a.metrics()
            assert metrics["poll_interval_lapses"] == 1
            assert metrics["last_leave_delay_seconds"] < 0.1
            assert any("max_poll_interval_ms=3000" in r.getMessage() for r in caplog.records)
            assert took > 0
            with pytest.raises(CommitFailedError, match="max_poll_interval_ms"):
                await a.commit({tp: handed_to_a[0].offset + 1 for tp in stale})
            # A's next poll rejoins and gets partitions again.
            assert a.metrics()["group_state"] == group_protocol.lapsed_state
            await poll_until(a, lambda _: a.metrics()["group_state"] == "STABLE"
                             and len(a.assignment()) == PARTITIONS // 2, timeout=60)
            assert a.metrics()["rebalances"] >= 3


async def test_heartbeats_keep_member_while_it_awaits(apache_kafka_broker, unique_topic, unique_group,
                                                      group_protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    conf = settings(broker, unique_group, group_protocol, session_timeout_ms=6000, heartbeat_interval_ms=1000,
                    max_poll_interval_ms=60000)
    # Several sessions (6 s classic; the broker's 10 s under KIP-848) with the loop free and no poll.
    idle = max(3 * 6.0, 2 * group_protocol.session_timeout(conf))
    a = Consumer(unique_topic, **conf)
    b = Consumer(unique_topic, **conf)
    async with a, b, Poller(b):
        await poll_until(a, lambda _: len(a.assignment()) == 2 and len(b.assignment()) == 2, timeout=60)
        generation = a.metrics()["generation_id"]
        owned_a, owned_b = a.assignment(), b.assignment()
        await asyncio.sleep(idle)  # loop free, no poll
        assert a.assignment() == owned_a
        assert b.assignment() == owned_b
        assert a.metrics()["generation_id"] == generation == b.metrics()["generation_id"]
        assert a.metrics()["heartbeats_sent"] >= 15
        await a.commit({tp: 0 for tp in owned_a})  # still a member of this generation


async def test_close_hands_partitions_over_fast(apache_kafka_broker, unique_topic, unique_group, group_protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    a = Consumer(unique_topic, **settings(broker, unique_group, group_protocol))
    b = Consumer(unique_topic, **settings(broker, unique_group, group_protocol))
    async with b:
        await a.start()
        async with Poller(b) as b_poller:
            await poll_until(a, lambda _: len(a.assignment()) == 2 and len(b.assignment()) == 2, timeout=60)
            loop = asyncio.get_running_loop()
            start = loop.time()
            await a.close()
            await b_poller.wait_for(lambda: b.assignment() == all_partitions(unique_topic), timeout=10)
            assert loop.time() - start < 2.0


MEMBER_SCRIPT = textwrap.dedent("""
    import asyncio, json, sys
    from aiokafka_lite import Consumer
    async def main():
        c = Consumer(sys.argv[1], **json.loads(sys.argv[2]))
        await c.start()
        announced = False
        while True:
            await c.poll(timeout=0.2)
            if c.assignment() and not announced:
                print("assigned", flush=True)
                announced = True
    asyncio.run(main())
""")


async def test_sigkill_hands_partitions_over_after_session_timeout(apache_kafka_broker, unique_topic,
                                                                   unique_group, group_protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    conf = settings(broker, unique_group, group_protocol, session_timeout_ms=6000, heartbeat_interval_ms=1000)
    session = group_protocol.session_timeout(conf)  # 6 s classic; the broker's 10 s under KIP-848
    b = Consumer(unique_topic, **conf)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", MEMBER_SCRIPT, unique_topic, json.dumps(conf),
                                                stdout=asyncio.subprocess.PIPE)
    try:
        async with b, Poller(b) as b_poller:
            await b_poller.wait_for(lambda: len(b.assignment()) == 2, timeout=60)
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line.strip() == b"assigned"
            loop = asyncio.get_running_loop()
            os.kill(proc.pid, signal.SIGKILL)
            start = loop.time()
            await b_poller.wait_for(lambda: b.assignment() == all_partitions(unique_topic), timeout=30)
            took = loop.time() - start
            assert session * 0.8 <= took < session + 8.0, took
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
