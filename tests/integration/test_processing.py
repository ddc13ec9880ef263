"""process() against Apache Kafka 4.3.1 with the real Consumer: every record once, each key's
records in order under concurrency 50, the watermark committed up to the end; and a restart skipping
what the committed metadata marks finished (the broker stores and returns it as written)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import defaultdict
from typing import Any

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.processing import Processor, decode
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import report, until
from ._protocols import GroupProtocol

pytestmark = pytest.mark.asyncio

PARTITIONS, RECORDS, KEYS = 6, 3000, 200


def consumer_of(broker: Any, group: str, topic: str, protocol: GroupProtocol | None = None,
                **extra: Any) -> Consumer:
    base = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, enable_auto_commit=False,
                auto_offset_reset="earliest", auto_commit_interval_ms=500, session_timeout_ms=30000,
                heartbeat_interval_ms=500, **extra)
    return Consumer(topic, **(protocol.settings(base) if protocol is not None else base))


async def test_every_record_once_in_key_order_and_committed_to_the_end(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, group_protocol: GroupProtocol,
        caplog: pytest.LogCaptureFixture) -> None:
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    produce(broker, unique_topic, [(f"k{i % KEYS}", str(i)) for i in range(RECORDS)], enable_idempotence=True)
    seen: dict[tuple[int, bytes], list[int]] = defaultdict(list)
    values: dict[bytes, list[int]] = defaultdict(list)
    count: dict[tuple[int, int], int] = defaultdict(int)
    running = most = 0

    async def handler(record: Any) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        seen[(record.partition, record.key)].append(record.offset)
        values[record.key].append(int(record.value))
        count[(record.partition, record.offset)] += 1
        try:
            await asyncio.sleep(0.003)
        finally:
            running -= 1

    async with consumer_of(broker, unique_group, unique_topic, group_protocol) as consumer:
        processor = Processor(consumer, handler, concurrency=50, ordering="key")
        started = time.monotonic()
        task = asyncio.create_task(processor.run())
        await until(lambda: len(count) >= RECORDS or task.done(), 60.0, "every record handled")
        elapsed = time.monotonic() - started
        processor.stop()
        result = await asyncio.wait_for(task, 30.0)
        tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(tps)
        committed = await consumer.committed(tps)
    assert len(count) == RECORDS
    assert set(count.values()) == {1}
    assert result.processed == RECORDS
    assert result.reason == "stopped"
    for offsets in seen.values():
        assert offsets == sorted(offsets)
    for produced in values.values():
        assert produced == sorted(produced)  # per key, the order they were produced in
    assert {tp: om.offset for tp, om in committed.items() if om is not None} == ends
    assert most > PARTITIONS  # concurrency inside partitions, not one task per partition
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []  # a healthy run
    report({"test": "processing", "group_protocol": group_protocol.name, "records": RECORDS, "keys": KEYS,
            "concurrency": 50, "max_running": most, "seconds": round(elapsed, 2), "handler_ms": 3})


async def test_a_restart_skips_the_records_finished_above_the_watermark(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    produce(broker, unique_topic, [(f"k{i}", str(i)) for i in range(100)], enable_idempotence=True)
    tp = TopicPartition(unique_topic, 0)
    first: set[int] = set()

    async def stuck_at_ten(record: Any) -> None:
        if record.offset == 10:
            await asyncio.sleep(3600)  # never finishes: the drain cancels it
        first.add(record.offset)

    async with consumer_of(broker, unique_group, unique_topic) as consumer:
        processor = Processor(consumer, stuck_at_ten, concurrency=20, drain_timeout=0.2)
        task = asyncio.create_task(processor.run())
        await until(lambda: len(first) == 99 or task.done(), 60.0, "all but offset 10 handled")
        processor.stop()
        await asyncio.wait_for(task, 30.0)
        committed = (await consumer.committed([tp]))[tp]
    assert committed is not None
    assert committed.offset == 10
    assert decode(committed.metadata, 10).ranges == [(11, 100)]  # as written, from the broker
    second: list[int] = []

    async def handler(record: Any) -> None:
        second.append(record.offset)

    async with consumer_of(broker, unique_group, unique_topic) as consumer:
        processor = Processor(consumer, handler, concurrency=20)
        task = asyncio.create_task(processor.run())
        await until(lambda: processor.metrics()["skipped"] == 89 or task.done(), 60.0, "the finished ones skipped")
        await until(lambda: 10 in second or task.done(), 60.0, "offset 10 handled again")
        processor.stop()
        result = await asyncio.wait_for(task, 30.0)
        committed = (await consumer.committed([tp]))[tp]
    assert second == [10]
    assert result.skipped == 89
    assert result.processed == 1
    assert committed is not None
    assert committed.offset == 100
    assert committed.metadata == ""


@pytest.mark.parametrize("assignor", ["default", "cooperative-sticky"])
async def test_scaling_out_from_one_member_to_three_mid_run(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, group_protocol: GroupProtocol,
        assignor: str) -> None:
    """Members join while the first one processes: revocations drain and commit before the new
    owners start, so no record runs on two members at once, none is lost, and each partition's
    commits (from whichever member) only move forward. Classic: eager (range, the default) and
    cooperative (KIP-429); the consumer protocol has one, the broker's."""
    if assignor != "default" and not group_protocol.is_classic:
        pytest.skip("under the consumer protocol the broker assigns (KIP-848): one case is enough")
    extra = {} if assignor == "default" else {"partition_assignment_strategy": assignor}
    broker = apache_kafka_broker
    records = 2000
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    produce(broker, unique_topic, [(f"k{i % KEYS}", str(i)) for i in range(records)], enable_idempotence=True)
    runs: list[tuple[int, int, int, float, float]] = []  # member, partition, offset, start, end
    commits: list[tuple[float, int, int]] = []  # time, partition, offset

    def handler_of(member: int) -> Any:
        async def handler(record: Any) -> None:
            start = time.monotonic()
            await asyncio.sleep(0.02)
            runs.append((member, record.partition, record.offset, start, time.monotonic()))
        return handler

    def watch_commits(consumer: Consumer) -> None:
        real = consumer.commit

        async def commit(offsets: Any = None, timeout: Any = 30.0) -> None:
            await real(offsets, timeout)
            commits.extend((time.monotonic(), tp.partition, om.offset) for tp, om in offsets.items())
        consumer.commit = commit  # type: ignore[method-assign]

    consumers = [consumer_of(broker, unique_group, unique_topic, group_protocol, **extra) for _ in range(3)]
    processors = [Processor(c, handler_of(i), concurrency=10, commit_interval=0.2) for i, c in enumerate(consumers)]
    tasks: list[asyncio.Task[Any]] = []
    try:
        for consumer in consumers:
            await consumer.start()
            watch_commits(consumer)
        tasks.append(asyncio.create_task(processors[0].run()))
        await until(lambda: len(runs) >= 300 or tasks[0].done(), 60.0, "the first member under way")
        tasks += [asyncio.create_task(p.run()) for p in processors[1:]]
        handled = lambda: {(p, o) for _, p, o, _, _ in runs}  # noqa: E731
        await until(lambda: len(handled()) >= records or any(t.done() for t in tasks), 120.0, "every record handled")
        await until(lambda: len({m for m, *_ in runs}) == 3 or any(t.done() for t in tasks), 60.0,
                    "all three members handling records")
        for processor in processors:
            processor.stop()
        results = await asyncio.wait_for(asyncio.gather(*tasks), 60.0)
        tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
        ends = await consumers[0].end_offsets(tps)
        committed = await consumers[0].committed(tps)
    finally:
        for task in tasks:
            task.cancel()
        for consumer in consumers:
            await consumer.close()
    assert len(handled()) == records
    by_record: dict[tuple[int, int], list[tuple[int, float, float]]] = defaultdict(list)
    for member, partition, offset, start, end in runs:
        by_record[(partition, offset)].append((member, start, end))
    twice = 0
    for handlings in by_record.values():
        handlings.sort(key=lambda h: h[1])
        twice += len(handlings) - 1
        for earlier, later in itertools.pairwise(handlings):
            assert earlier[2] <= later[1], f"handled by members {earlier[0]} and {later[0]} at once"
    for partition in range(PARTITIONS):
        offsets = [offset for _, p, offset in sorted(commits) if p == partition]
        assert offsets == sorted(offsets), f"partition {partition}: commits went backwards"
    assert {tp: om.offset for tp, om in committed.items() if om is not None} == ends
    report({"test": "processing-scale-out", "group_protocol": group_protocol.name, "assignor": assignor,
            "records": records,
            "members": 3, "handled_twice": twice, "per_member": [r.processed for r in results]})


async def test_a_key_that_always_fails_goes_to_the_hook_and_the_other_keys_finish(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    produce(broker, unique_topic, [(f"k{i % 20}", str(i)) for i in range(600)], enable_idempotence=True)
    good: list[int] = []
    dead: list[tuple[int, int]] = []

    async def handler(record: Any) -> None:
        if record.key == b"k7":
            raise ValueError("k7 is poison")
        await asyncio.sleep(0.002)
        good.append(int(record.value))

    async def dead_letter(record: Any, error: Exception) -> None:
        assert isinstance(error, ValueError)
        dead.append((record.partition, record.offset))

    async with consumer_of(broker, unique_group, unique_topic) as consumer:
        processor = Processor(consumer, handler, concurrency=20, max_retries=2, retry_backoff=0.01,
                              on_failure=dead_letter)
        task = asyncio.create_task(processor.run())
        await until(lambda: len(good) + len(dead) >= 600 or task.done(), 60.0, "every record handled or dead")
        processor.stop()
        result = await asyncio.wait_for(task, 30.0)
        tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(tps)
        committed = await consumer.committed(tps)
    assert sorted(good) == [i for i in range(600) if i % 20 != 7]
    assert len(dead) == 30
    assert result.failed == 30
    assert result.retries == 60
    for partition in range(PARTITIONS):
        offsets = [o for p, o in dead if p == partition]
        assert offsets == sorted(offsets)  # the hook saw the key's records in order
    assert {tp: om.offset for tp, om in committed.items() if om is not None} == ends


async def test_close_in_another_task_drains_commits_and_ends_process(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, group_protocol: GroupProtocol,
        caplog: pytest.LogCaptureFixture) -> None:
    """close() runs the revocation (drain within drain_timeout, commit the watermark) in its own
    task; process() then returns reason="closed" and nothing is left running."""
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    produce(broker, unique_topic, [(f"k{i % 10}", str(i)) for i in range(200)], enable_idempotence=True)
    done: set[tuple[int, int]] = set()
    release = asyncio.Event()

    async def handler(record: Any) -> None:
        if record.offset >= 50:
            await release.wait()  # stuck until close() cancels it after drain_timeout
        done.add((record.partition, record.offset))

    consumer = consumer_of(broker, unique_group, unique_topic, group_protocol)
    await consumer.start()
    processor = Processor(consumer, handler, concurrency=40, drain_timeout=0.5)
    task = asyncio.create_task(processor.run())
    try:
        await until(lambda: len(done) >= 100 or task.done(), 60.0, "offsets 0..49 of both partitions handled")
        await asyncio.wait_for(consumer.close(), 30.0)
        result = await asyncio.wait_for(task, 30.0)
    finally:
        task.cancel()
        await consumer.close()
    assert result.reason == "closed"
    assert result.processed == 100
    tps = [TopicPartition(unique_topic, p) for p in range(2)]
    async with consumer_of(broker, unique_group, unique_topic, group_protocol) as check:
        committed = await check.committed(tps)
    assert {tp: om.offset if om is not None else None for tp, om in committed.items()} == {tp: 50 for tp in tps}
    assert {t for t in asyncio.all_tasks() if t.get_coro().__qualname__.startswith("handle")} == set()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_handlers_longer_than_max_poll_interval_keep_the_member_and_back_pressure_holds(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, group_protocol: GroupProtocol) -> None:
    """KIP-62 with the real consumer: handlers blocked for twice max_poll_interval_ms; process() keeps
    polling with every partition paused at the bound, so the member stays in the group."""
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    produce(broker, unique_topic, [(f"k{i}", str(i)) for i in range(300)], enable_idempotence=True)
    release = asyncio.Event()
    handled: set[int] = set()

    async def handler(record: Any) -> None:
        await release.wait()
        handled.add(int(record.value))

    base = dict(bootstrap_servers=broker.bootstrap_servers, group_id=unique_group, enable_auto_commit=False,
                auto_offset_reset="earliest", max_poll_interval_ms=2000, session_timeout_ms=30000,
                heartbeat_interval_ms=500)
    async with Consumer(unique_topic, **group_protocol.settings(base)) as consumer:
        processor = Processor(consumer, handler, concurrency=10, max_pending_records=30)
        task = asyncio.create_task(processor.run())
        await until(lambda: (bool(consumer.assignment()) and consumer.paused() == consumer.assignment())
                    or task.done(), 60.0, "every partition paused at the bound")
        member_before = consumer.metrics().get("member_id")
        await asyncio.sleep(4.0)  # twice max_poll_interval_ms with every handler stuck
        figures, metrics = processor.metrics(), consumer.metrics()
        assert not task.done()
        assert figures["held"] <= 30
        assert figures["in_flight"] == 10
        assert consumer.paused() == consumer.assignment() == {TopicPartition(unique_topic, p)
                                                               for p in range(PARTITIONS)}
        assert metrics["seconds_since_last_poll"] < 1.0
        assert metrics["group_state"] == "STABLE"
        assert metrics.get("poll_interval_lapses", 0) == 0
        assert metrics.get("member_id") == member_before
        release.set()
        await until(lambda: len(handled) >= 300 or task.done(), 60.0, "all handled after the release")
        processor.stop()
        result = await asyncio.wait_for(task, 30.0)
        tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(tps)
        committed = await consumer.committed(tps)
    assert result.processed == 300
    assert {tp: om.offset for tp, om in committed.items() if om is not None} == ends
