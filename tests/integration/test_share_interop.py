"""Our ShareConsumer and Kafka's own Java share consumer (VerifiableShareConsumer, Kafka 4.3.1) as
members of ONE share group (KIP-932), against Apache Kafka 4.3.1. What the run measured is printed (-s).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any

import pytest

from aiokafka_lite import ShareConsumer
from aiokafka_lite.fetch.share.fetcher import AckResults
from aiokafka_lite.testing.helpers import create_topic, produce, set_group_config
from aiokafka_lite.testing.java_share import ACK_TYPE, VerifiableShareConsumer

from ._consumers import until
from .test_share_consumer import DEADLINE, _collect, settings

pytestmark = pytest.mark.asyncio


async def test_ours_and_javas_share_consumer_accept_every_record_once_between_them(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, caplog: pytest.LogCaptureFixture) -> None:
    """5,000 records on 2 partitions; Java's VerifiableShareConsumer and one ShareConsumer with 4
    `async for` workers (explicit mode) share them. The Java tool never calls acknowledge(): its
    KafkaShareConsumer is in implicit mode, and with ``--acknowledgement-mode sync`` (used here) it
    commits after every poll that returned records (commitSync: every record of that poll accepted),
    then reports the offsets settled in ``offsets_acknowledged``. Each record is accepted exactly
    once overall, both members accept some, and a fresh member afterwards gets nothing. (Kafka
    4.3.1's share assignor gives each of two members one of the two partitions once both joined;
    a partition the first member had alone moves over with its records' states kept.)"""
    broker, total = apache_kafka_broker, 5000
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    create_topic(broker, unique_topic, partitions=2)
    produce(broker, unique_topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(total)])
    set_group_config(broker, unique_group, {"share.auto.offset.reset": "earliest"})
    ours: collections.Counter[tuple[int, int]] = collections.Counter()
    failed: list[AckResults] = []
    java_accepted: collections.Counter[tuple[int, int]] = collections.Counter()

    async def worker(share: ShareConsumer) -> None:
        async for record in share:
            await asyncio.sleep(0.001)  # the work: a handler that awaits
            share.acknowledge(record, "accept")
            ours[record.partition, record.offset] += 1

    began = time.monotonic()
    # The JVM starts first (about a second), so both are in the group before the records run out;
    # small polls keep either side from taking whole partitions' worth at once.
    with VerifiableShareConsumer(broker.bootstrap_servers, unique_topic, unique_group, acknowledgement_mode="sync",
                                 properties={"max.poll.records": "50"}) as java:
        share = ShareConsumer(unique_topic, **settings(broker, unique_group, share_acknowledgement_mode="explicit",
                                                       max_poll_records=50))
        share.set_acknowledgement_commit_callback(
            lambda results: failed.extend([results] if any(e is not None for e in results.values()) else []))
        try:
            await share.start(timeout=30)
            workers = [asyncio.create_task(worker(share)) for _ in range(4)]
            await until(lambda: sum(ours.values()) + java.acknowledged_count() >= total, DEADLINE, "all accepted")
            elapsed = time.monotonic() - began
            assignment = sorted(tp.partition for tp in share.assignment())
            results = await share.commit(timeout=10)
            assert all(error is None for error in results.values()), results
        finally:
            await share.close(timeout=10)
        await asyncio.wait_for(asyncio.gather(*workers), 10)  # `async for` ends when its consumer closes
        assert await asyncio.to_thread(java.stop), "the Java consumer did not shut down cleanly"
        java_accepted = java.accepted()
        java_failures = java.failed_acknowledgements
        java_consumed = java.consumed_count()
    # The broker's side: a new member gets nothing (a record not accepted would have been released
    # when its consumer closed its share session, and delivered here).
    async with asyncio.timeout(DEADLINE), ShareConsumer(unique_topic, **settings(broker, unique_group)) as late:
        left_over = []
        while len(late.assignment()) < 2:
            left_over.extend(await late.poll(0.2))
        left_over.extend(await _collect(late, 2.0))
    both = ours + java_accepted
    by_partition = {p: tuple(sum(n for (q, _), n in side.items() if q == p) for side in (ours, java_accepted))
                    for p in (0, 1)}
    print(f"\nper partition (ours, Java's): {by_partition}; our consumer's partitions at the end {assignment}")
    print(f"\n{total} records in {elapsed:.2f} s: ours accepted {sum(ours.values())} (4 workers), Java's "
          f"VerifiableShareConsumer accepted {sum(java_accepted.values())} ({ACK_TYPE}, sync mode; it was handed "
          f"{java_consumed}); {len(left_over)} left for a fresh member")
    assert not failed, failed
    assert not java_failures, java_failures
    assert set(both) == {(i % 2, i // 2) for i in range(total)}, "a record was never accepted"
    assert set(both.values()) == {1}, f"accepted twice: {sorted(k for k, n in both.items() if n > 1)[:10]}"
    assert ours, "ours accepted some records"
    assert java_accepted, "Java's accepted some records"
    assert left_over == [], f"{len(left_over)} records delivered again after all were accepted"
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING], "a healthy run warns"
