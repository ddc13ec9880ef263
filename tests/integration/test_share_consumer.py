"""The ShareConsumer (aiokafka_lite/share/) and process_share() against Apache Kafka 4.3.1: many
worker tasks on several consumers, each record accepted once; release and reject; the explicit
mode's rule; close leaving at once; the poll-deadline lapse and the rejoin; every awaitable bounded
against a silent broker. What each test measured is printed (-s).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import sys
import time
from typing import Any

import pytest

from aiokafka_lite import ShareConsumer
from aiokafka_lite.errors import ConsumerClosedError, IllegalStateError, InvalidArgumentError, KafkaTimeoutError
from aiokafka_lite.processing import process_share
from aiokafka_lite.share import ShareRecord
from aiokafka_lite.testing.helpers import create_topic, produce, set_group_config

from ..tcp_proxy import silent_server
from ._consumers import until
from .test_share_member import Observer, cluster_of

pytestmark = pytest.mark.asyncio

DEADLINE = 60.0  # seconds for what the broker does in the background, on a loaded machine


def settings(broker: Any, group: str, **more: Any) -> dict[str, Any]:
    return dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, request_timeout_ms=10000,
                retry_backoff_ms=50, **more)


def prepare(broker: Any, topic: str, group: str, values: list[bytes], partitions: int = 1,
            lock_ms: int = 30000) -> None:
    create_topic(broker, topic, partitions=partitions)
    if values:
        produce(broker, topic, [{"value": v, "partition": i % partitions} for i, v in enumerate(values)])
    set_group_config(broker, group, {"share.auto.offset.reset": "earliest",
                                     "share.record.lock.duration.ms": str(lock_ms)})


async def test_three_consumers_with_eight_workers_each_accept_every_record_once(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, caplog: pytest.LogCaptureFixture) -> None:
    """The issue's first done-when: 3 ShareConsumers x 8 `async for` workers on a 2-partition topic,
    50,000 records; each record accepted exactly once overall; more than 2 handlers at once."""
    broker, total = apache_kafka_broker, 50_000
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    prepare(broker, unique_topic, unique_group, [b"%d" % i for i in range(total)], partitions=2)
    accepted: collections.Counter[tuple[int, int]] = collections.Counter()
    per_consumer: collections.Counter[int] = collections.Counter()
    running = peak = 0
    done = asyncio.Event()

    async def worker(share: ShareConsumer, index: int) -> None:
        nonlocal running, peak
        async for record in share:
            running += 1
            peak = max(peak, running)
            try:
                await asyncio.sleep(0.001)  # the work: a handler that awaits
            finally:
                running -= 1
            share.acknowledge(record, "accept")
            accepted[record.partition, record.offset] += 1
            per_consumer[index] += 1
            if sum(accepted.values()) >= total:
                done.set()

    shares = [ShareConsumer(unique_topic, **settings(broker, unique_group, share_acknowledgement_mode="explicit"))
              for _ in range(3)]
    began = time.monotonic()
    try:
        for share in shares:
            await share.start(timeout=30)
        workers = [asyncio.create_task(worker(share, i)) for i, share in enumerate(shares) for _ in range(8)]
        await asyncio.wait_for(done.wait(), 4 * DEADLINE)  # about 30 s here
        elapsed = time.monotonic() - began
        for share in shares:
            results = await share.commit(timeout=10)
            assert all(error is None for error in results.values()), results
    finally:
        for share in shares:
            await share.close(timeout=10)
    await asyncio.wait_for(asyncio.gather(*workers), 10)  # `async for` ends when its consumer closes
    # The broker's side: a new member of the group gets nothing (a record not accepted would have
    # been released when its consumer closed its share session).
    async with asyncio.timeout(DEADLINE), ShareConsumer(unique_topic, **settings(broker, unique_group)) as late:
        left_over = []
        while len(late.assignment()) < 2:
            left_over.extend(await late.poll(0.2))
        left_over.extend(await _collect(late, 2.0))  # a fetch or more once both partitions are assigned
    print(f"\n{total} records accepted in {elapsed:.2f} s by 3 x 8 workers; per consumer "
          f"{[per_consumer[i] for i in range(3)]}; peak concurrency {peak}")
    assert len(accepted) == total
    assert left_over == [], f"{len(left_over)} records delivered again after all were accepted"
    assert set(accepted.values()) == {1}, "a record was accepted twice"
    assert peak > 2, "more handlers in progress at once than partitions"
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING], "a healthy run warns"


async def test_release_comes_back_with_delivery_count_2_and_reject_never_again(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    broker = apache_kafka_broker
    prepare(broker, unique_topic, unique_group, [b"released", b"rejected", b"accepted"], lock_ms=1000)
    seen: list[tuple[bytes, int]] = []
    async with asyncio.timeout(DEADLINE), \
            ShareConsumer(unique_topic, **settings(broker, unique_group, share_acknowledgement_mode="explicit")) as s:
        def decide(record: ShareRecord) -> str:
            seen.append((record.value, record.delivery_count))
            return {b"released": "release", b"rejected": "reject"}.get(record.value, "accept")

        await _poll_and_decide(s, 3, decide)
        # Sent now, well within the 1 s lock (else they would wait for the next fetch to the broker).
        assert set((await s.commit(timeout=10)).values()) <= {None}  # empty: they went with a fetch
        await _poll_and_decide(s, 1, lambda record: (seen.append((record.value, record.delivery_count)), "accept")[1])
        assert set((await s.commit(timeout=10)).values()) <= {None}  # empty: they went with a fetch
        # Longer than the 1 s lock: a record not really settled would come back meanwhile.
        later = await _collect(s, 3.0)
    print(f"\nseen {seen}; after 3 s more: {[(r.value, r.delivery_count) for r in later]}")
    assert sorted(seen) == [(b"accepted", 1), (b"rejected", 1), (b"released", 1), (b"released", 2)]
    assert later == []


async def test_a_record_released_at_every_delivery_stops_at_the_delivery_count_limit(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    """The broker's group.share.delivery.count.limit (5, Apache Kafka's default, which the fixture
    keeps): a record released every time it comes is delivered 5 times, then archived: never again."""
    broker = apache_kafka_broker
    prepare(broker, unique_topic, unique_group, [b"poison", b"fine"], lock_ms=1000)
    deliveries: list[tuple[bytes, int]] = []
    async with asyncio.timeout(DEADLINE), \
            ShareConsumer(unique_topic, **settings(broker, unique_group, share_acknowledgement_mode="explicit")) as s:
        def release_poison(record: ShareRecord) -> str:
            deliveries.append((record.value, record.delivery_count))
            return "release" if record.value == b"poison" else "accept"

        await _poll_and_decide(s, 6, release_poison)
        assert set((await s.commit(timeout=10)).values()) <= {None}
        later = await _collect(s, 3.0)  # longer than the 1 s lock
    print(f"\ndeliveries {deliveries}; after 3 s more: {[(r.value, r.delivery_count) for r in later]}")
    assert [count for value, count in deliveries if value == b"poison"] == [1, 2, 3, 4, 5]
    assert later == []


async def test_process_share_accepts_retries_by_redelivery_and_rejects_past_max_retries(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    broker = apache_kafka_broker
    prepare(broker, unique_topic, unique_group, [b"ok", b"flaky", b"poison"], lock_ms=3000)
    runs: collections.Counter[bytes] = collections.Counter()
    failed: list[tuple[bytes, int]] = []

    async def handler(record: ShareRecord) -> None:
        runs[record.value] += 1
        if record.value == b"flaky" and record.delivery_count == 1:
            raise RuntimeError("try again")
        if record.value == b"poison":
            raise ValueError("never")

    stop = asyncio.Event()
    async with asyncio.timeout(DEADLINE), \
            ShareConsumer(unique_topic, **settings(broker, unique_group, share_acknowledgement_mode="explicit")) as s:
        task = asyncio.create_task(process_share(
            s, handler, concurrency=4, max_retries=1, poll_timeout=0.1, stop=stop,
            on_failure=lambda r, e: failed.append((r.value, r.delivery_count))))
        await until(lambda: bool(failed and runs[b"ok"] and runs[b"flaky"] >= 2), DEADLINE, "every record settled")
        await asyncio.sleep(4.0)  # longer than the 3 s lock: nothing settled may come back
        stop.set()
        result = await task
    print(f"\nhandler runs {dict(runs)}; rejected {failed}; {result}")
    assert runs == {b"ok": 1, b"flaky": 2, b"poison": 2}
    assert failed == [(b"poison", 2)]
    assert (result.accepted, result.released, result.rejected) == (2, 2, 1)


async def test_a_worker_cancelled_mid_record_releases_it_to_another(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    broker = apache_kafka_broker
    prepare(broker, unique_topic, unique_group, [b"job"])
    async with asyncio.timeout(DEADLINE), \
            ShareConsumer(unique_topic, **settings(broker, unique_group, share_acknowledgement_mode="explicit")) as s:
        got = asyncio.Event()

        async def stuck() -> None:
            async for record in s:
                with s.acknowledging(record):
                    got.set()
                    await asyncio.sleep(120)

        task = asyncio.create_task(stuck())
        await got.wait()
        task.cancel()
        await asyncio.wait([task])
        began = time.monotonic()
        [again] = await _poll_until(s, 1)
        s.acknowledge(again, "accept")
        print(f"\nreleased by the cancelled worker; back after {time.monotonic() - began:.2f} s with "
              f"delivery count {again.delivery_count} (the lock was 30 s)")
        assert again.delivery_count == 2
        assert time.monotonic() - began < 10.0, "released at once, not after the lock lapsed"


async def test_explicit_mode_refuses_a_second_poll_from_a_task_holding_records(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    broker = apache_kafka_broker
    prepare(broker, unique_topic, unique_group, [b"a", b"b"])
    async with asyncio.timeout(DEADLINE), \
            ShareConsumer(unique_topic, **settings(broker, unique_group, share_acknowledgement_mode="explicit")) as s:
        [held] = await _poll_until(s, 1, max_records=1)
        with pytest.raises(IllegalStateError, match="acknowledge each record"):
            await s.poll(0.5)
        # The rule is per task: another task polls meanwhile.
        other = await asyncio.create_task(_poll_and_decide(s, 1, lambda record: "accept"))
        s.acknowledge(held, "accept")
        assert {held.value, *(r.value for r in other)} == {b"a", b"b"}
        assert await s.poll(0.2) == []
        assert s.metrics()["records_held"] == 0


async def test_implicit_mode_accepts_at_the_next_poll(apache_kafka_broker: Any, unique_topic: str,
                                                      unique_group: str) -> None:
    broker = apache_kafka_broker
    prepare(broker, unique_topic, unique_group, [b"a", b"b", b"c"], lock_ms=3000)
    async with asyncio.timeout(DEADLINE), ShareConsumer(unique_topic, **settings(broker, unique_group)) as s:
        first = await _poll_until(s, 3)
        with pytest.raises(IllegalStateError, match="explicit"):
            s.acknowledge(first[0], "reject")
        later = await _collect(s, 4.0)  # accepted by this poll: none comes back after the 3 s lock
        results = await s.commit(timeout=10)
        print(f"\nfirst poll {[r.value for r in first]}; then {later}; commit {results}")
        assert sorted(r.delivery_count for r in first) == [1, 1, 1]
        assert later == []
        assert s.metrics()["accepted"] == 3


async def test_close_leaves_at_once(apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    broker = apache_kafka_broker
    prepare(broker, unique_topic, unique_group, [b"x"])
    async with asyncio.timeout(DEADLINE), cluster_of(broker) as watcher:
        observer = Observer(watcher, unique_group)
        s = ShareConsumer(unique_topic, **settings(broker, unique_group))
        await _poll_until(s, 1)
        member_id = s.metrics()["member"]["member_id"]
        await observer.when(lambda ms: member_id in ms, "described")
        waiting = asyncio.create_task(s.poll(30.0))
        await asyncio.sleep(0.1)
        began = time.monotonic()
        await s.close(timeout=10)
        closed = time.monotonic() - began
        with pytest.raises(ConsumerClosedError):
            await waiting
        gone = await observer.when(lambda ms: member_id not in ms, "gone", timeout=10) - began
        print(f"\nclose() took {closed * 1000:.0f} ms; the broker stopped describing the member "
              f"{gone * 1000:.0f} ms after close() began")
        assert gone < 1.0, "close() left the group (not the 10 s session timeout)"
        assert s.metrics()["member"]["group_state"] == "UNSUBSCRIBED"


async def test_a_poll_lapse_leaves_within_100_ms_and_the_next_poll_rejoins(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, caplog: pytest.LogCaptureFixture) -> None:
    broker = apache_kafka_broker
    prepare(broker, unique_topic, unique_group, [], partitions=2)
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    async with asyncio.timeout(DEADLINE), cluster_of(broker) as watcher, \
            ShareConsumer(unique_topic, **settings(broker, unique_group, max_poll_interval_ms=2000)) as a, \
            ShareConsumer(unique_topic, **settings(broker, unique_group)) as b:
        observer = Observer(watcher, unique_group)
        b_got: list[bytes] = []

        async def keep_polling() -> None:
            while True:
                b_got.extend(r.value for r in await b.poll(0.1))

        poller = asyncio.create_task(keep_polling())
        try:
            while not (a.assignment() and b.assignment()):
                await a.poll(0.1)
            a_id = a.metrics()["member"]["member_id"]
            await a.poll(0.0)  # the last poll: the deadline is 2 s from here
            deadline = time.monotonic() + 2.0
            gone = await observer.when(lambda ms: a_id not in ms, "A gone after its poll deadline") - deadline
            await until(lambda: a.metrics()["member"]["last_leave_delay_seconds"] is not None, 5.0, "the leave")
            delay = a.metrics()["member"]["last_leave_delay_seconds"]
            produce(broker, unique_topic, [{"value": b"after %d" % i, "partition": i % 2} for i in range(10)])
            await until(lambda: len(b_got) == 10, DEADLINE, "B takes the records A would have had")
            while not (a.metrics()["member"]["group_state"] == "STABLE" and a.assignment()):
                assert not await a.poll(0.1)  # the first of these polls rejoins; B took every record
            print(f"\nleave answered {delay * 1000:.1f} ms after the poll deadline; describe stopped listing A "
                  f"{gone * 1000:.0f} ms after it; B took {len(b_got)} records; A rejoined as {a_id}")
            assert 0.0 <= delay < 0.1
            assert a.metrics()["member"]["member_id"] == a_id
            warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(warnings) == 1, warnings
            assert "max_poll_interval_ms=2000" in warnings[0]
        finally:
            poller.cancel()
            await asyncio.wait([poller])



@pytest.mark.parametrize("mode", ["implicit", "explicit"])
async def test_a_poll_lapse_hands_the_held_records_to_another_member_at_once(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, mode: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """A holds 5 records (acquired, handed out, not acknowledged) and stops polling: its watchdog
    leaves the group at the 2 s poll deadline and ends its share sessions, so the broker releases
    them; B, polling meanwhile, gets exactly those with delivery count 2, long before their 30 s
    lock would lapse. A's next poll rejoins."""
    broker, total = apache_kafka_broker, 5
    prepare(broker, unique_topic, unique_group, [b"%d" % i for i in range(total)], lock_ms=30000)
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    let_go = asyncio.Event()
    held: list[ShareRecord] = []

    async def hold(share: ShareConsumer) -> None:  # a handler busy with its records until the end
        held.extend(await share.poll(0.5))
        await let_go.wait()

    async with asyncio.timeout(DEADLINE), ShareConsumer(unique_topic, **settings(
            broker, unique_group, max_poll_interval_ms=2000, share_acknowledgement_mode=mode)) as a:
        holders = []
        while len(held) < total:
            holders.append(asyncio.create_task(hold(a)))
            await asyncio.wait([holders[-1]], timeout=0.5)
        deadline = time.monotonic() + 2.0  # the last poll began at most this long ago
        async with ShareConsumer(unique_topic, **settings(broker, unique_group)) as b:
            b_got: list[ShareRecord] = []
            while len(b_got) < total:
                b_got.extend(await b.poll(0.2))
                assert time.monotonic() < deadline + 20.0, f"B got {len(b_got)} of {total} records"
            received = time.monotonic() - deadline
            b_got.extend(await _collect(b, 1.0))
            delay = a.metrics()["member"]["last_leave_delay_seconds"]
            while not (a.metrics()["member"]["group_state"] == "STABLE" and a.assignment()):
                assert not await a.poll(0.1)  # the first of these polls rejoins; B took every record
            let_go.set()
            await asyncio.gather(*holders)
        print(f"\n{mode}: A held {len(held)} records; the leave answered {delay * 1000:.1f} ms after the poll "
              f"deadline; B had them {received:.2f} s after it (lock 30 s), delivery counts "
              f"{sorted(r.delivery_count for r in b_got)}; A rejoined")
        assert delay is not None
        assert 0.0 <= delay < 0.1
        assert sorted(r.offset for r in b_got) == sorted(r.offset for r in held) == list(range(total))
        assert {r.delivery_count for r in held} == {1}
        assert {r.delivery_count for r in b_got} == {2}
        assert received < 10.0, "released by the leave, not by the 30 s lock"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "max_poll_interval_ms=2000" in warnings[0], warnings


TIMEOUT, SLACK, AT_ONCE = 1.0, 0.2, 0.2
METHODS = {
    "start": lambda s: s.start(timeout=TIMEOUT),
    "poll": lambda s: s.poll(TIMEOUT),
    "commit": lambda s: s.commit(timeout=TIMEOUT),
    "close": lambda s: s.close(timeout=TIMEOUT),
}


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("state", ["broker_silent", "not_started", "in_group", "closed"])
async def test_every_call_is_bounded_by_its_own_timeout(apache_kafka_broker: Any, unique_topic: str,
                                                        unique_group: str, state: str, method: str) -> None:
    """As tests/integration/test_call_deadlines.py for the Consumer: returns, or raises
    KafkaTimeoutError, within its timeout + 0.2 s (poll: empty); closed: ConsumerClosedError at once."""
    async with silent_server() as silent:
        if state == "broker_silent":
            s = ShareConsumer(unique_topic, bootstrap_servers=silent, group_id=unique_group)
        else:
            prepare(apache_kafka_broker, unique_topic, unique_group, [b"x"])
            s = ShareConsumer(unique_topic, **settings(apache_kafka_broker, unique_group))
            if state in ("in_group", "closed"):
                await _poll_until(s, 1)  # one record held (implicit): commit has something to send
            if state == "closed":
                await s.close(timeout=10)
        try:
            began = time.monotonic()
            outcome, result = "returned", None
            try:
                result = await asyncio.wait_for(METHODS[method](s), TIMEOUT + 10)
            except (KafkaTimeoutError, ConsumerClosedError) as exc:
                outcome = type(exc).__name__
            elapsed = time.monotonic() - began
            print(f"\n{state} {method}: {outcome} after {elapsed * 1000:.0f} ms")
            assert elapsed <= TIMEOUT + SLACK
            if state == "closed" and method != "close":
                assert outcome == "ConsumerClosedError"
                assert elapsed <= AT_ONCE
            elif method == "poll":
                assert outcome == "returned"
                assert isinstance(result, list)
            elif outcome == "KafkaTimeoutError":
                assert elapsed >= TIMEOUT - 0.05
        finally:
            await s.close(timeout=1)


async def test_a_bad_timeout_is_refused_before_any_io(apache_kafka_broker: Any, unique_topic: str,
                                                      unique_group: str) -> None:
    s = ShareConsumer(unique_topic, **settings(apache_kafka_broker, unique_group))
    for call in (lambda: s.poll(math.nan), lambda: s.poll(-1.0), lambda: s.commit(timeout=math.nan),
                 lambda: s.start(timeout=-2), lambda: s.close(-1)):
        with pytest.raises(InvalidArgumentError):
            await call()
    assert not s.metrics()["started"]
    await s.close()


async def _poll_until(s: ShareConsumer, count: int, max_records: int | None = None) -> list[ShareRecord]:
    got: list[ShareRecord] = []
    while len(got) < count:
        got.extend(await s.poll(0.5, max_records=max_records))
    return got


async def _poll_and_decide(s: ShareConsumer, count: int, decide: Any) -> list[ShareRecord]:
    """Poll (explicit mode) until ``count`` records came, acknowledging each as ``decide(record)`` says."""
    got: list[ShareRecord] = []
    while len(got) < count:
        for record in await s.poll(0.5):
            s.acknowledge(record, decide(record))
            got.append(record)
    return got


async def _collect(s: ShareConsumer, seconds: float) -> list[ShareRecord]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    got: list[ShareRecord] = []
    while (left := deadline - loop.time()) > 0:
        got.extend(await s.poll(min(left, 0.5)))
    return got


HOLDER = """
import asyncio, sys
from aiokafka_lite import ShareConsumer

async def main() -> None:
    bootstrap, topic, group = sys.argv[1:4]
    share = ShareConsumer(topic, bootstrap_servers=bootstrap, group_id=group, share_acknowledgement_mode="explicit",
                          max_poll_records=5)
    await share.start(timeout=30)
    got = []
    while not got:
        got = await share.poll(0.5)
    print("HOLDING", " ".join(str(r.offset) for r in got), flush=True)
    await asyncio.sleep(3600)  # mid-record when it is killed

asyncio.run(main())
"""


async def test_a_member_killed_mid_record_loses_nothing(apache_kafka_broker: Any, unique_topic: str,
                                                        unique_group: str) -> None:
    """A member SIGKILLed while it holds records: they come back once their acquisition lock (2 s
    here) lapses, with delivery count 2; every record is delivered to the survivor."""
    broker, total = apache_kafka_broker, 50
    prepare(broker, unique_topic, unique_group, [b"%d" % i for i in range(total)], lock_ms=2000)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOLDER, broker.bootstrap_servers, unique_topic, unique_group,
        stdout=asyncio.subprocess.PIPE)
    try:
        assert child.stdout is not None
        line = (await asyncio.wait_for(child.stdout.readline(), DEADLINE)).decode()
        assert line.startswith("HOLDING"), line
        held = {int(o) for o in line.split()[1:]}
    finally:
        child.kill()  # SIGKILL: no acknowledgement, no leave, no session close
        await child.wait()
    killed = time.monotonic()
    counts: dict[int, int] = {}
    async with asyncio.timeout(DEADLINE), ShareConsumer(unique_topic, **settings(broker, unique_group)) as s:
        while len(counts) < total:
            for record in await s.poll(0.5):
                counts[record.offset] = record.delivery_count
        back = time.monotonic() - killed
    print(f"\nthe killed member held {len(held)} records; all {total} delivered to the survivor "
          f"{back:.1f} s after the kill; delivery counts of the held ones: {sorted({counts[o] for o in held})}")
    assert held
    assert set(counts) == set(range(total)), "none lost"
    assert all(counts[o] == 2 for o in held), "the held records came back after their lock lapsed"
