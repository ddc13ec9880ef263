"""Issue 39 at the edges of the ShareConsumer and process_share(), against Apache Kafka 4.3.1: a bad
record among good ones, a late decision on a delivery whose lock lapsed, a handler's own
CancelledError, and a close() shorter than the drain. What each test measured is printed (-s).
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

import pytest

from aiokafka_lite import ShareConsumer
from aiokafka_lite.errors import InvalidRecordStateError, RecordDeserializationError
from aiokafka_lite.processing import ShareProcessor
from aiokafka_lite.share import ShareRecord

from ._consumers import until
from .test_share_consumer import DEADLINE, _collect, _poll_until, prepare, settings

pytestmark = pytest.mark.asyncio

CLOCK_GRAIN = 0.001  # seconds: the coarsest event-loop timer clock the suite runs on (uvloop's)


def _text(raw: bytes | None) -> str:
    if raw == b"POISON":
        raise ValueError("not a job")
    return (raw or b"").decode()


async def test_a_bad_record_is_released_alone_and_the_good_ones_around_it_keep_their_delivery_counts(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    """The issue's scenario: good0, POISON, good2, POISON, good4, good5 in one batch. Before the fix,
    good2 first came with delivery count 5 and good4/good5 with 4 (released with each POISON), and
    an ordinary release of good2 then had it archived: lost."""
    broker = apache_kafka_broker
    values = [b"good0", b"POISON", b"good2", b"POISON", b"good4", b"good5"]
    prepare(broker, unique_topic, unique_group, values, lock_ms=5000)
    first_seen: dict[str, int] = {}
    good2_counts: list[int] = []
    errors: collections.Counter[int] = collections.Counter()
    async with asyncio.timeout(DEADLINE), ShareConsumer(unique_topic, **settings(
            broker, unique_group, value_deserializer=_text, share_acknowledgement_mode="explicit")) as s:
        give_up = time.monotonic() + 30  # about 3 s here; a good record archived would never come
        while time.monotonic() < give_up and (len(first_seen) < 4 or len(good2_counts) < 2
                                              or sum(errors.values()) < 10):
            try:
                records = await s.poll(0.5)
            except RecordDeserializationError as error:
                errors[error.offset] += 1
                continue
            for record in records:
                first_seen.setdefault(record.value, record.delivery_count)
                if record.value == "good2":
                    good2_counts.append(record.delivery_count)
                # good2's first delivery: a transient failure, so the ordinary retry, a release
                s.acknowledge(record, "release" if good2_counts == [1] and record.value == "good2" else "accept")
        assert set((await s.commit(timeout=10)).values()) <= {None}
        later = await _collect(s, 3.0)
        metrics = s.metrics()
    print(f"\nfirst deliveries {first_seen}; good2's deliveries {good2_counts}; errors per POISON offset "
          f"{dict(errors)}; after 3 s more {[(r.value, r.delivery_count) for r in later]}; kept "
          f"{metrics.get('records_kept')}, released {metrics['released']}, accepted {metrics['accepted']}")
    assert first_seen == {"good0": 1, "good2": 1, "good4": 1, "good5": 1}
    assert good2_counts == [1, 2], "released by the application: back once, not archived"
    assert errors == {1: 5, 3: 5}, "each POISON released alone until group.share.delivery.count.limit (5)"
    assert later == []
    assert (metrics.get("records_kept"), metrics["accepted"], metrics["released"]) == (0, 4, 11)


async def test_a_late_decision_on_a_delivery_whose_lock_lapsed_is_refused(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    """Task A holds a record past its 1 s lock; the broker acquires it again for this member and task
    B gets it (delivery count 2). Before the fix A's late accept settled B's delivery, and B's own
    decision then raised IllegalStateError."""
    broker = apache_kafka_broker
    prepare(broker, unique_topic, unique_group, [b"job"], lock_ms=1000)
    async with asyncio.timeout(DEADLINE), ShareConsumer(unique_topic, **settings(
            broker, unique_group, share_acknowledgement_mode="explicit")) as s:
        [first] = await _poll_until(s, 1)  # this task is A, slow: its lock lapses
        b_holds, b_decides = asyncio.Event(), asyncio.Event()

        async def task_b() -> ShareRecord:
            [again] = await _poll_until(s, 1)
            b_holds.set()
            await b_decides.wait()
            s.acknowledge(again, "accept")
            return again

        b = asyncio.create_task(task_b())
        began = time.monotonic()
        await b_holds.wait()
        back_after = time.monotonic() - began
        with pytest.raises(InvalidRecordStateError, match="no longer this consumer's"):
            s.acknowledge(first, "accept")  # A, late
        b_decides.set()
        again = await b
        assert set((await s.commit(timeout=10)).values()) <= {None}
        later = await _collect(s, 2.5)  # longer than the lock: B's accept really settled it
    print(f"\nB got the record {back_after:.2f} s after A's poll, delivery count {again.delivery_count}; "
          f"A's late accept refused; after 2.5 s more: {[(r.value, r.delivery_count) for r in later]}")
    assert (first.delivery_count, again.delivery_count) == (1, 2)
    assert later == []


async def test_process_share_takes_a_handlers_own_cancelled_error_as_a_failure(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    """Before the fix one handler's own CancelledError ended a worker and run() returned
    reason="stopped" after a few records, though nobody called stop()."""
    broker, total = apache_kafka_broker, 200
    prepare(broker, unique_topic, unique_group, [b"%d" % i for i in range(total)])
    deliveries: collections.Counter[int] = collections.Counter()

    async def handler(record: ShareRecord) -> None:
        deliveries[record.offset] += 1
        await asyncio.sleep(0.001)
        if record.offset == 10 and record.delivery_count == 1:
            fut = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(fut.cancel)  # another task cancels what it awaits
            await fut

    async with asyncio.timeout(DEADLINE), ShareConsumer(unique_topic, **settings(
            broker, unique_group, share_acknowledgement_mode="explicit")) as s:
        proc = ShareProcessor(s, handler, concurrency=8, poll_timeout=0.1)
        task = asyncio.create_task(proc.run())
        await until(lambda: proc.accepted == total or task.done(), DEADLINE, "every record accepted")
        assert not task.done(), f"run() ended by itself after {proc.accepted} records: {task.result()}"
        proc.stop()
        result = await task
    print(f"\n{result}; record 10 delivered {deliveries[10]} times")
    assert (result.reason, result.accepted, result.released) == ("stopped", total, 1)
    assert deliveries[10] == 2


async def test_close_shorter_than_the_drain_cancels_running_handlers_at_once(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    """close(timeout=1) while a handler hangs and drain_timeout is 10 s. Before the fix, the handler
    ran on for the whole drain_timeout after close() returned (run() returned only then)."""
    broker = apache_kafka_broker
    prepare(broker, unique_topic, unique_group, [b"hangs", b"quick"])
    started = asyncio.Event()
    ended: list[float] = []

    async def handler(record: ShareRecord) -> None:
        if record.value == b"hangs":
            started.set()
            try:
                await asyncio.sleep(60)  # an HTTP call without a timeout
            finally:
                ended.append(time.monotonic())

    async with asyncio.timeout(DEADLINE):
        s = ShareConsumer(unique_topic, **settings(broker, unique_group, share_acknowledgement_mode="explicit"))
        proc = ShareProcessor(s, handler, concurrency=4, drain_timeout=10.0, poll_timeout=0.5)
        task = asyncio.create_task(proc.run())
        await started.wait()
        await until(lambda: proc.accepted == 1, DEADLINE, "the quick record accepted")
        began = time.monotonic()
        await s.close(timeout=1.0)
        closed = time.monotonic()
        result = await task
        returned = time.monotonic()
        async with ShareConsumer(unique_topic, **settings(broker, unique_group)) as later:
            [again] = await _poll_until(later, 1)
    print(f"\nclose() took {(closed - began) * 1000:.0f} ms; run() returned {(returned - closed) * 1000:.0f} ms "
          f"after it, {result}; the hung handler ran {(ended[0] - closed) * 1000:.0f} ms after close() "
          f"returned; its record came back with delivery count {again.delivery_count}")
    assert result.reason == "closed"
    assert returned - closed < 1.0
    assert ended
    assert ended[0] - closed < 1.0
    assert (again.value, again.delivery_count) == (b"hangs", 2)


@pytest.mark.parametrize("way", ["stop", "cancel", "failure"])
async def test_each_way_out_of_process_share_with_a_hung_handler(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, way: str) -> None:
    """The figures docs/share.md gives: drain_timeout 1 s, one handler hung. stop() and a failure
    wait the drain, then cancel it; a cancel of run() cancels it at once. Its record is released
    either way: the next member gets it at once, long before its 30 s lock would lapse."""
    broker = apache_kafka_broker
    prepare(broker, unique_topic, unique_group, [b"hangs", b"poison" if way == "failure" else b"quick"])
    started = asyncio.Event()
    ended: list[float] = []

    async def handler(record: ShareRecord) -> None:
        if record.value == b"hangs":
            started.set()
            try:
                await asyncio.sleep(60)
            finally:
                ended.append(time.monotonic())
        elif record.value == b"poison":
            await started.wait()
            raise ValueError("poison")

    async with asyncio.timeout(DEADLINE), ShareConsumer(unique_topic, **settings(
            broker, unique_group, share_acknowledgement_mode="explicit")) as s:
        proc = ShareProcessor(s, handler, concurrency=4, drain_timeout=1.0, max_retries=0, poll_timeout=0.1)
        task = asyncio.create_task(proc.run())
        await started.wait()
        began = time.monotonic()
        if way == "stop":
            await until(lambda: proc.accepted == 1, DEADLINE, "the quick record accepted")
            began = time.monotonic()
            proc.stop()
        elif way == "cancel":
            task.cancel()
        outcome = (await asyncio.wait([task]))[0].pop()
        returned = time.monotonic() - began
        await s.commit(timeout=10)
    error = None if outcome.cancelled() else outcome.exception()
    async with asyncio.timeout(DEADLINE), ShareConsumer(unique_topic, **settings(broker, unique_group)) as later:
        back = time.monotonic()
        [again] = await _poll_until(later, 1)
        back = time.monotonic() - back
    how = "cancelled" if outcome.cancelled() else type(error).__name__ if error else outcome.result()
    print(f"\n{way}: run() ended {returned * 1000:.0f} ms after it began ({how}"
          f"); the hung handler was cancelled {(ended[0] - began) * 1000:.0f} ms after; its record came back "
          f"{back * 1000:.0f} ms into the next member's polls, delivery count {again.delivery_count}; {proc.metrics()}")
    # 2, or 3 when this consumer's background fetch acquired it again after the release, before its
    # close released it (a record acquired is a delivery for the broker, handed out or not).
    assert again.value == b"hangs"
    assert again.delivery_count in (2, 3)
    if way == "cancel":
        assert outcome.cancelled()
        assert returned < 0.5
    else:
        # The drain's 1 s is the loop's: uvloop's timers fire on a millisecond clock, up to half a
        # millisecond before time.monotonic() says 1 s has passed (uvloop's own behaviour, shown by
        # tests/unit/fetch/test_fetcher_uvloop_timers.py); this failed on uvloop at 0.99997 s.
        assert 1.0 - CLOCK_GRAIN <= returned < 2.0
        assert (type(error).__name__ if error else outcome.result().reason) == (
            "HandlerFailedError" if way == "failure" else "stopped")
