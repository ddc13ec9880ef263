"""Acquisition locks kept while the work goes on (KIP-1222 RENEW) and the record-limit acquire mode
(KIP-1206), against the fixtures' Apache Kafka (4.3.1 and 4.4.0 both serve ShareFetch and
ShareAcknowledge v2; the figures in docs/share.md are 4.3.1's): a handler that runs three
times the group's share.record.lock.duration.ms keeps its record (handled once, delivery count 1),
records waiting behind slow handlers keep theirs, and share_acquire_mode="record_limit" has the
broker acquire at most max_poll_records. What each test measured is printed (-s).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any

import pytest

from aiokafka_lite import ShareConsumer
from aiokafka_lite.processing import process_share
from aiokafka_lite.share import ShareRecord
from aiokafka_lite.testing.helpers import produce

from ._consumers import until
from .test_share_consumer import DEADLINE, _collect, prepare, settings

pytestmark = pytest.mark.asyncio

LOCK_MS = 1500  # the group's share.record.lock.duration.ms (the test broker allows 1 s and up)
SLOW = 3 * LOCK_MS / 1000  # a handler's run: three lock durations


async def _nothing_left(broker: Any, topic: str, group: str) -> list[ShareRecord]:
    """What a new member of the group gets: nothing, once every record was accepted."""
    async with asyncio.timeout(DEADLINE), ShareConsumer(topic, **settings(broker, group)) as late:
        return await _collect(late, 2.0)


def _seen(handled: list[tuple[int, int, Any]]) -> str:
    return ", ".join(f"{offset}@{count}" for offset, count, _ in sorted(handled, key=lambda h: h[:2]))


async def test_a_handler_running_three_lock_durations_keeps_its_record(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, caplog: pytest.LogCaptureFixture) -> None:
    """The issue's scenario: two members, each with process_share() and two workers, 4 records and
    handlers that run 4.5 s against a 1.5 s lock. Every record is handled once, by one worker, with
    delivery count 1: its lock is renewed while the handler runs (and while it waits its turn)."""
    broker, total = apache_kafka_broker, 4
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    prepare(broker, unique_topic, unique_group, [b"job%d" % i for i in range(total)], lock_ms=LOCK_MS)
    handled: list[tuple[int, int, int]] = []  # offset, delivery count, member
    stop = asyncio.Event()

    def handler_of(member: int) -> Any:
        async def handle(record: ShareRecord) -> None:
            handled.append((record.offset, record.delivery_count, member))
            await asyncio.sleep(SLOW)
        return handle

    shares = [ShareConsumer(unique_topic, **settings(broker, unique_group, share_acknowledgement_mode="explicit"))
              for _ in range(2)]
    began = time.monotonic()
    try:
        for share in shares:
            await share.start(timeout=30)
        runs = [asyncio.create_task(process_share(share, handler_of(i), stop=stop, concurrency=2, poll_timeout=0.2))
                for i, share in enumerate(shares)]
        await until(lambda: sum(s.metrics()["accepted"] for s in shares) >= total or
                    len(handled) > 2 * total, 4 * DEADLINE, "every record accepted")
        await asyncio.sleep(LOCK_MS / 1000)  # a lock lapsing now would bring a record back: it must not
        stop.set()
        results = await asyncio.wait_for(asyncio.gather(*runs), DEADLINE)
        committed = [await share.commit(timeout=10) for share in shares]
        renewals = [share.metrics().get("lock_renewals") for share in shares]
    finally:
        for share in shares:
            await share.close(timeout=10)
    left_over = await _nothing_left(broker, unique_topic, unique_group)
    print(f"\n{total} records, handlers of {SLOW:.1f} s against a {LOCK_MS} ms lock, 2 members x 2 workers: "
          f"handled (offset@delivery count) {_seen(handled)} in {time.monotonic() - began:.1f} s; accepted "
          f"{[r.accepted for r in results]}; commits {committed}; renewals {renewals}")
    assert sorted(offset for offset, _, _ in handled) == list(range(total)), "a record handled twice (or never)"
    assert {count for _, count, _ in handled} == {1}, "a record was delivered again while its handler ran"
    assert sum(r.accepted for r in results) == total
    assert all(error is None for answer in committed for error in answer.values()), committed
    assert sum(r.released for r in results) == 0
    assert left_over == [], f"{len(left_over)} records delivered again after all were accepted"
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING], "a healthy run warns"


async def test_records_waiting_behind_slow_handlers_are_not_delivered_twice(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    """One member, max_poll_records 500 (the broker hands it all 10 records at once) and two workers
    whose handlers take 0.9 s: the last records wait 4.5 s, three lock durations, to be handed out.
    Their locks are renewed while they wait: none is delivered twice."""
    broker, total = apache_kafka_broker, 10
    prepare(broker, unique_topic, unique_group, [b"job%d" % i for i in range(total)], lock_ms=LOCK_MS)
    handled: list[tuple[int, int, float]] = []
    stop = asyncio.Event()
    began = time.monotonic()

    async def handle(record: ShareRecord) -> None:
        handled.append((record.offset, record.delivery_count, time.monotonic() - began))
        await asyncio.sleep(0.9)

    async with ShareConsumer(unique_topic, **settings(broker, unique_group, share_acknowledgement_mode="explicit",
                                                      max_poll_records=500)) as share:
        run = asyncio.create_task(process_share(share, handle, stop=stop, concurrency=2, poll_timeout=0.2))
        await until(lambda: (len({h[0] for h in handled}) >= total and share.metrics()["accepted"] >= total)
                    or len(handled) > 2 * total, 4 * DEADLINE, "every record handled")
        await asyncio.sleep(LOCK_MS / 1000)
        stop.set()
        result = await asyncio.wait_for(run, DEADLINE)
        assert all(error is None for error in (await share.commit(timeout=10)).values())
        renewals = share.metrics().get("lock_renewals")
    left_over = await _nothing_left(broker, unique_topic, unique_group)
    last = max(at for _, _, at in handled)
    print(f"\n{total} records, 2 workers x 0.9 s, {LOCK_MS} ms lock: handled {_seen(handled)}; the last began "
          f"{last:.1f} s in; accepted {result.accepted}, released {result.released}; renewals {renewals}")
    assert sorted(offset for offset, _, _ in handled) == list(range(total)), "a record handled twice (or never)"
    assert {count for _, count, _ in handled} == {1}, "a record waiting its turn was delivered again"
    assert last > 2 * LOCK_MS / 1000, "the last records did not wait past their first lock"
    assert left_over == []


@pytest.mark.parametrize("block", ["acknowledging", "renewing"])
async def test_a_share_consumer_block_keeps_the_lock_while_it_runs(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, block: str) -> None:
    """ShareConsumer users: `with share.acknowledging(record):` (accept at the end) and
    `async with share.renewing(record):` (the decision stays the caller's) keep the record's lock
    while the block runs, 4.5 s against a 1.5 s lock, in two tasks iterating one consumer."""
    broker, total = apache_kafka_broker, 4
    prepare(broker, unique_topic, unique_group, [b"job%d" % i for i in range(total)], lock_ms=LOCK_MS)
    handled: list[tuple[int, int, int]] = []
    done = asyncio.Event()

    async def worker(share: ShareConsumer, index: int) -> None:
        async for record in share:
            handled.append((record.offset, record.delivery_count, index))
            if block == "acknowledging":
                with share.acknowledging(record):
                    await asyncio.sleep(SLOW)
            else:
                async with share.renewing(record):
                    await asyncio.sleep(SLOW)
                share.acknowledge(record, "accept")
            if share.metrics()["accepted"] >= total or len(handled) > 2 * total:
                done.set()

    async with ShareConsumer(unique_topic, **settings(broker, unique_group,
                                                      share_acknowledgement_mode="explicit")) as share:
        workers = [asyncio.create_task(worker(share, i)) for i in range(2)]
        try:
            waiting = asyncio.create_task(done.wait())
            await asyncio.wait([waiting, *workers], timeout=4 * DEADLINE, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            for task in workers:
                if task.done():
                    task.result()  # a worker's failure fails the test at once
            await asyncio.sleep(LOCK_MS / 1000)
            assert all(error is None for error in (await share.commit(timeout=10)).values())
            renewals = share.metrics().get("lock_renewals")
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
    left_over = await _nothing_left(broker, unique_topic, unique_group)
    print(f"\n{block}: handled {_seen(handled)} by tasks {collections.Counter(h[2] for h in handled)}; "
          f"renewals {renewals}")
    assert sorted(offset for offset, _, _ in handled) == list(range(total))
    assert {count for _, count, _ in handled} == {1}
    assert left_over == []


async def test_two_records_from_two_answers_keep_their_locks_behind_a_long_poll(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, caplog: pytest.LogCaptureFixture) -> None:
    """Two records acquired by two ShareFetch answers, each kept by a renewing() block for four lock
    durations, while the next ShareFetch long-polls for most of a lock (fetch_max_wait_ms 800 ms,
    1.5 s locks). One record's renewals are nearly always waiting at the broker behind that long
    poll when the other's fall due; those must not wait for their answer and then behind another
    long poll (a lapse at the broker: INVALID_RECORD_STATE, the record delivered twice). Both
    renewed throughout: no renewal failed or lapsed, each handled once with delivery count 1."""
    broker = apache_kafka_broker
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    prepare(broker, unique_topic, unique_group, [b"job0"], lock_ms=LOCK_MS)
    handled: list[tuple[int, int, int]] = []

    async def work(share: ShareConsumer, polled: asyncio.Event) -> None:
        got: list[ShareRecord] = []
        while not got:  # explicit mode: the task that polls a record decides it
            got = await share.poll(1.0)
        polled.set()
        for record in got:
            handled.append((record.offset, record.delivery_count, 0))
            async with share.renewing(record):
                await asyncio.sleep(4 * LOCK_MS / 1000)
            share.acknowledge(record, "accept")

    async with ShareConsumer(unique_topic, **settings(broker, unique_group, share_acknowledgement_mode="explicit",
                                                      fetch_max_wait_ms=800)) as share:
        async with asyncio.timeout(DEADLINE), asyncio.TaskGroup() as tasks:
            first, second = asyncio.Event(), asyncio.Event()
            tasks.create_task(work(share, first))
            await first.wait()
            # The second record, produced now: it comes in an answer of its own.
            await asyncio.to_thread(produce, broker, unique_topic, [{"value": b"job1"}])
            tasks.create_task(work(share, second))
        assert all(error is None for error in (await share.commit(timeout=10)).values())
        renewals = share.metrics()["lock_renewals"]
    left_over = await _nothing_left(broker, unique_topic, unique_group)
    print(f"\nhandled {_seen(handled)}; renewals {renewals}")
    assert sorted(offset for offset, _, _ in handled) == [0, 1]
    assert {count for _, count, _ in handled} == {1}
    assert renewals["renewals_failed"] == renewals["lapsed"] == 0, renewals
    assert renewals["records_renewed"] >= 4  # each at least twice
    assert left_over == []
