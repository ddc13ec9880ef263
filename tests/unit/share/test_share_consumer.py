"""The ShareConsumer's own logic on a scripted fetcher and member (fake.py): settings, the
per-task acknowledgement modes, many tasks polling at once, cancellation, commit and close."""

from __future__ import annotations

import asyncio
import math

import pytest

from aiokafka_lite import ShareConsumer, errors
from aiokafka_lite.errors import (
    ConfigError,
    ConsumerClosedError,
    IllegalStateError,
    InvalidArgumentError,
    KafkaError,
    RecordDeserializationError,
)
from aiokafka_lite.fetch.share.ledger import AckType
from aiokafka_lite.fetch.share.records import ShareRecord
from aiokafka_lite.group.share.state import State

from .fake import TP, Parts, record

pytestmark = pytest.mark.asyncio
SERVERS = "127.0.0.1:1"


def share(**settings: object) -> ShareConsumer:
    return ShareConsumer("jobs", bootstrap_servers=SERVERS, group_id="workers", **settings)


# ------------------------------------------------------------ settings

async def test_settings_are_checked_as_the_consumers_are() -> None:
    with pytest.raises(ConfigError, match="share_acknowledgement_mode"):
        ShareConsumer(bootstrap_servers=SERVERS, group_id="g", share_acknowledgment_mode="explicit")
    with pytest.raises(ConfigError, match="share_acknowledgement_mode"):
        ShareConsumer(bootstrap_servers=SERVERS, group_id="g", share_acknowledgement_mode="sometimes")
    with pytest.raises(ConfigError, match="group_id"):
        ShareConsumer(bootstrap_servers=SERVERS)


@pytest.mark.parametrize(("name", "value"), [("auto_offset_reset", "earliest"), ("group_protocol", "consumer"),
                                         ("isolation_level", "read_committed"), ("session_timeout_ms", 10000),
                                         ("group_instance_id", "a")])
async def test_settings_a_share_group_does_not_use_are_refused(name: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"{name}.*does not apply to a ShareConsumer"):
        share(**{name: value})


async def test_java_names_through_from_properties() -> None:
    s = ShareConsumer.from_properties({"bootstrap.servers": SERVERS, "group.id": "g",
                                       "share.acknowledgement.mode": "explicit", "max.poll.records": "7"}, "jobs")
    assert s.explicit
    assert s.config.max_poll_records == 7
    assert s.subscription() == {"jobs"}
    assert not share().explicit  # implicit by default, as Java


# ------------------------------------------------------------ poll's arguments, before any I/O

@pytest.mark.parametrize("timeout", [math.nan, -1, None, "1"])
async def test_a_bad_poll_timeout_is_refused_at_once(parts: Parts, timeout: object) -> None:
    s = share()
    with pytest.raises(InvalidArgumentError):
        await s.poll(timeout)  # type: ignore[arg-type]
    assert not hasattr(parts, "cluster")  # nothing was started
    with pytest.raises(InvalidArgumentError):
        await s.poll(1.0, max_records=0)
    with pytest.raises(InvalidArgumentError):
        await s.commit(timeout=-1)
    with pytest.raises(InvalidArgumentError):
        await s.close(math.nan)


async def test_poll_before_subscribe_is_refused(parts: Parts) -> None:
    s = ShareConsumer(bootstrap_servers=SERVERS, group_id="g")
    with pytest.raises(IllegalStateError, match="subscribe"):
        await s.poll(0.1)
    await s.close()


# ------------------------------------------------------------ poll

async def test_poll_hands_out_records_and_returns_empty_when_time_runs_out(parts: Parts) -> None:
    async with share() as s:
        parts.fetcher.add(record(0), record(1))
        assert [r.offset for r in await s.poll(1.0)] == [0, 1]
        assert parts.member.polls >= 1  # the poll clock was stamped through before_poll()
        assert parts.fetcher.assigned == {TP}
        loop = asyncio.get_running_loop()
        began = loop.time()
        assert await s.poll(0.05) == []  # the same task: its two records are accepted first
        assert loop.time() - began < 2.0
        assert sorted(parts.fetcher.acks) == [(0, AckType.ACCEPT), (1, AckType.ACCEPT)]


async def test_implicit_mode_refuses_acknowledge(parts: Parts) -> None:
    async with share() as s:
        parts.fetcher.add(record(0))
        (r,) = await s.poll(1.0)
        with pytest.raises(IllegalStateError, match="explicit"):
            s.acknowledge(r, "reject")


async def test_explicit_mode_refuses_a_poll_from_a_task_holding_undecided_records(parts: Parts) -> None:
    async with share(share_acknowledgement_mode="explicit") as s:
        parts.fetcher.add(record(0), record(1))
        (first,) = await s.poll(1.0, max_records=1)
        with pytest.raises(IllegalStateError, match="acknowledge each record"):
            await s.poll(0.1)
        # Another task may poll meanwhile: the rule is per task.
        (second,) = await asyncio.create_task(_poll_and_ack(s, "release"))
        assert second.offset == 1
        s.acknowledge(first, "reject")
        assert await s.poll(0.01) == []
        assert parts.fetcher.acks == [(1, AckType.RELEASE), (0, AckType.REJECT)]
        with pytest.raises(InvalidArgumentError, match="acknowledge type"):
            s.acknowledge(first, "maybe")


async def _poll_and_ack(s: ShareConsumer, kind: str) -> list[object]:
    records = await s.poll(1.0, max_records=1)
    for r in records:
        s.acknowledge(r, kind)
    return records


async def test_many_tasks_iterate_at_once_and_each_record_goes_to_one(parts: Parts) -> None:
    seen: list[int] = []
    running = most = 0

    async def worker(s: ShareConsumer) -> None:
        nonlocal running, most
        async for r in s:
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.001)
            seen.append(r.offset)
            running -= 1
            s.acknowledge(r, "accept")
            if len(seen) == 200:
                await s.close()

    async with share(share_acknowledgement_mode="explicit") as s:
        parts.fetcher.add(*(record(i) for i in range(200)))
        async with asyncio.timeout(20):
            await asyncio.gather(*(worker(s) for _ in range(8)))
    assert sorted(seen) == list(range(200))
    assert most > 2
    assert sorted(o for o, _ in parts.fetcher.acks) == list(range(200))


async def test_a_task_cancelled_mid_record_releases_it(parts: Parts) -> None:
    async with share(share_acknowledgement_mode="explicit") as s:
        parts.fetcher.add(record(0))
        started = asyncio.Event()

        async def worker() -> None:
            async for _ in s:
                started.set()
                await asyncio.sleep(60)

        task = asyncio.create_task(worker())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert parts.fetcher.acks == [(0, AckType.RELEASE)]
        assert s.metrics()["records_held"] == 0


async def test_acknowledging_block_accepts_or_releases_by_outcome(parts: Parts) -> None:
    async with share(share_acknowledgement_mode="explicit") as s:
        parts.fetcher.add(record(0), record(1), record(2))
        a, b, c = await s.poll(1.0)
        with s.acknowledging(a):
            pass
        with pytest.raises(ValueError, match="bad"), s.acknowledging(b):
            raise ValueError("bad")

        async def cancelled_block() -> None:
            async with s.acknowledging(c):
                await asyncio.sleep(60)

        task = asyncio.create_task(cancelled_block())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert parts.fetcher.acks == [(0, AckType.ACCEPT), (1, AckType.RELEASE), (2, AckType.RELEASE)]


async def test_renewing_and_acknowledging_keep_the_lock_while_their_block_runs(parts: Parts) -> None:
    """The fetcher keeps the record's lock (KIP-1222) from the block's start to its end, and the
    decision of acknowledging() comes after; nothing is kept for a record already decided, nor once
    the consumer is closed."""
    async with share(share_acknowledgement_mode="explicit") as s:
        parts.fetcher.add(record(0), record(1), record(2))
        a, b, c = await s.poll(1.0)
        async with s.renewing(a):
            assert parts.fetcher.locked == [0]
        assert parts.fetcher.locked == []
        assert parts.fetcher.acks == []  # renewing() decides nothing
        with s.acknowledging(b):
            assert parts.fetcher.locked == [1]
        assert (parts.fetcher.locked, parts.fetcher.acks) == ([], [(1, AckType.ACCEPT)])
        with s.renewing(b):  # decided already: nothing to keep
            assert parts.fetcher.locked == []
        s.acknowledge(a, "accept")
    with s.renewing(c):
        assert parts.fetcher.locked == []
    assert "lock_renewals" in s.metrics()


async def test_implicit_mode_accepts_a_finished_tasks_records_and_releases_a_cancelled_ones(parts: Parts) -> None:
    async with share() as s:
        parts.fetcher.add(record(0), record(1))
        await asyncio.create_task(s.poll(1.0, max_records=1))
        blocked = asyncio.Event()

        async def slow() -> None:
            await s.poll(1.0, max_records=1)
            blocked.set()
            await asyncio.sleep(60)

        task = asyncio.create_task(slow())
        await blocked.wait()
        task.cancel()
        await asyncio.wait([task])
        assert parts.fetcher.acks == [(0, AckType.ACCEPT), (1, AckType.RELEASE)]


def _text(raw: bytes | None) -> str:
    if raw == b"POISON":
        raise ValueError("not a job")
    return (raw or b"").decode()


async def test_a_bad_record_is_released_alone_and_the_ones_behind_it_come_next_untouched(parts: Parts) -> None:
    """Issue 39, defect 1: good0, POISON, good2, POISON, good4, good5 in one batch. Each good record
    reaches the application once, delivery count 1; each POISON alone is released, its error raised
    in turn by the poll after the records before it; polls from several tasks, as workers do."""
    values = [b"good0", b"POISON", b"good2", b"POISON", b"good4", b"good5"]
    async with share(value_deserializer=_text, share_acknowledgement_mode="explicit") as s:
        parts.fetcher.add(*(record(i, value=v) for i, v in enumerate(values)))
        outcomes: list[object] = []
        kept: list[int] = []
        for _ in range(5):
            try:
                got = await asyncio.create_task(_poll_accepting(s))  # a task of its own, each time
                outcomes.append([(r.value, r.delivery_count) for r in got])
            except RecordDeserializationError as error:
                outcomes.append(("error", error.offset, type(error.__cause__).__name__))
            kept.append(s.metrics().get("records_kept", -1))
        assert outcomes == [[("good0", 1)], ("error", 1, "ValueError"), [("good2", 1)], ("error", 3, "ValueError"),
                            [("good4", 1), ("good5", 1)]]
        assert kept == [4, 4, 2, 2, 0]
        assert sorted(parts.fetcher.acks) == [(0, AckType.ACCEPT), (1, AckType.RELEASE), (2, AckType.ACCEPT),
                                              (3, AckType.RELEASE), (4, AckType.ACCEPT), (5, AckType.ACCEPT)]
        m = s.metrics()
        assert (m["records_handed_out"], m["accepted"], m["released"], m["records_held"]) == (4, 4, 2, 0)


async def _poll_accepting(s: ShareConsumer) -> list[ShareRecord]:
    records = await s.poll(1.0)
    for r in records:
        s.acknowledge(r, "accept")
    return records


async def test_a_bad_record_first_in_the_batch_raises_at_once_and_keeps_the_rest(parts: Parts) -> None:
    async with share(value_deserializer=_text, max_poll_records=2) as s:
        parts.fetcher.add(record(0, value=b"POISON"), record(1), record(2), record(3))
        with pytest.raises(RecordDeserializationError, match="released"):
            await s.poll(1.0)
        assert [r.offset for r in await s.poll(1.0)] == [1, 2]  # kept ones first, within max_poll_records
        assert [r.offset for r in await s.poll(1.0)] == [3]
        assert [o for o, kind in parts.fetcher.acks if kind is AckType.RELEASE] == [0]


async def test_a_deserializers_own_cancelled_error_is_a_bad_record_not_a_cancellation(parts: Parts) -> None:
    """A deserializer is plain code that nothing cancels: its CancelledError is its failure."""

    def cancelling(raw: bytes | None) -> str:
        if raw == b"POISON":
            raise asyncio.CancelledError
        return (raw or b"").decode()

    async with share(value_deserializer=cancelling) as s:
        parts.fetcher.add(record(0, value=b"POISON"), record(1))
        with pytest.raises(RecordDeserializationError) as info:
            await s.poll(1.0)
        assert isinstance(info.value.__cause__, asyncio.CancelledError)
        assert [r.offset for r in await s.poll(1.0)] == [1]


@pytest.mark.parametrize("way", ["close", "poll lapse", "revoked"])
async def test_records_kept_behind_a_bad_one_are_released_at_close_forgotten_at_a_lapse_released_when_revoked(
        parts: Parts, way: str) -> None:
    s = share(value_deserializer=_text, share_acknowledgement_mode="explicit")
    await s.start()
    parts.fetcher.add(record(0), record(1, value=b"POISON"), record(2), record(3))
    (good,) = await s.poll(1.0)
    s.acknowledge(good, "accept")
    assert s.metrics().get("records_kept") == 2
    if way == "poll lapse":
        parts.member.state = State.STALE
        parts.member.on_change()  # the member left: the broker releases everything it held
        expected = [(1, AckType.RELEASE), (0, AckType.ACCEPT)]
    elif way == "revoked":
        parts.member.assignment = lambda: set()  # type: ignore[method-assign]
        parts.member.on_change()
        expected = [(1, AckType.RELEASE), (0, AckType.ACCEPT), (2, AckType.RELEASE), (3, AckType.RELEASE)]
    else:
        expected = [(1, AckType.RELEASE), (0, AckType.ACCEPT), (2, AckType.RELEASE), (3, AckType.RELEASE)]
    if way != "close":
        assert s.metrics()["records_kept"] == 0
    await s.close()
    assert parts.fetcher.acks == expected
    assert s.metrics()["records_kept"] == 0


async def test_a_late_decision_on_a_delivery_whose_lock_lapsed_is_refused(parts: Parts) -> None:
    """Issue 39, suspect: task A's lock lapses, the record comes back to this member and task B gets
    it (delivery count 2). A's late acknowledge() must not settle B's delivery."""
    async with share(share_acknowledgement_mode="explicit") as s:
        parts.fetcher.add(record(5))
        (first,) = await s.poll(1.0)  # this task is A
        parts.fetcher.add(record(5, delivery_count=2))  # the lock lapsed; acquired again for this member
        b_holds, b_decides = asyncio.Event(), asyncio.Event()

        async def task_b() -> ShareRecord:
            (again,) = await s.poll(1.0)
            b_holds.set()
            await b_decides.wait()
            s.acknowledge(again, "release")
            return again

        b = asyncio.create_task(task_b())
        await b_holds.wait()
        with pytest.raises(KafkaError, match="no longer this consumer's") as refused:
            s.acknowledge(first, "accept")  # A, late
        assert isinstance(refused.value, errors.InvalidRecordStateError)
        assert refused.value.record is first
        assert not s.holds(first)
        assert s.holds(first._replace(delivery_count=2))  # B's delivery is still undecided...
        b_decides.set()
        assert (await b).delivery_count == 2  # ...and B decides it
        assert parts.fetcher.acks == [(5, AckType.RELEASE)]
        assert s.metrics()["records_held"] == 0


async def test_a_decision_on_a_delivery_acquired_again_but_not_yet_handed_out_is_refused(parts: Parts) -> None:
    async with share(share_acknowledgement_mode="explicit") as s:
        parts.fetcher.add(record(5))
        (first,) = await s.poll(1.0)
        parts.fetcher.delivered.discard(5)  # the fetcher's ledger dropped it: acquired again, still buffered
        with pytest.raises(KafkaError, match="acquired it again") as refused:
            s.acknowledge(first, "accept")
        assert isinstance(refused.value, errors.InvalidRecordStateError)
        assert parts.fetcher.acks == []


async def test_a_fatal_member_error_is_raised_by_poll(parts: Parts) -> None:
    async with share() as s:
        await s.start()
        parts.member.fatal = KafkaError("group authorization failed")
        with pytest.raises(KafkaError, match="authorization"):
            await s.poll(0.5)



@pytest.mark.parametrize("mode", ["implicit", "explicit"])
async def test_a_poll_lapse_ends_the_share_sessions_and_forgets_what_tasks_hold(parts: Parts, mode: str) -> None:
    async with share(share_acknowledgement_mode=mode, request_timeout_ms=7000) as s:
        parts.fetcher.add(record(0), record(1))
        assert len(await s.poll(0.5)) == 2
        parts.member.state = State.STALE  # the member left at its poll deadline
        parts.member.on_change()
        parts.member.on_change()  # said again: one ending at a time
        assert s.metrics()["records_held"] == 0
        await asyncio.sleep(0)  # the ending task's first step
        assert parts.fetcher.ended == [7.0]  # within the request timeout
        parts.member.state = State.JOINING  # the next poll rejoins
        assert await s.poll(0.1) == []  # no held record blocks it, nor is accepted by it
        assert parts.fetcher.acks == []

async def test_a_cancelled_poll_raises_cancelled_error(parts: Parts) -> None:
    async with share() as s:
        task = asyncio.create_task(s.poll(30.0))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


# ------------------------------------------------------------ commit and close

async def test_commit_sends_and_reports_per_partition(parts: Parts) -> None:
    async with share() as s:
        parts.fetcher.add(record(0))
        await s.poll(1.0)
        assert await s.commit() == {TP: None}
        assert parts.fetcher.acks == [(0, AckType.ACCEPT)]  # implicit: accepted by the commit
        got: list[object] = []
        fut = s.commit_async(lambda results, error: got.append((results, error)))
        assert await fut == {TP: None}
        await asyncio.sleep(0)
        assert got == [({TP: None}, None)]
        assert s.metrics()["commits"] == 2


async def test_close_ends_other_tasks_calls_and_stops_everything(parts: Parts) -> None:
    s = share(share_acknowledgement_mode="explicit")
    await s.start()
    parts.fetcher.commit_delay = 60
    waiting = asyncio.create_task(s.poll(30.0))
    committing = asyncio.create_task(s.commit(timeout=30.0))
    await asyncio.sleep(0.05)
    await s.close(5.0)
    with pytest.raises(ConsumerClosedError):
        await waiting
    with pytest.raises(ConsumerClosedError):
        await committing
    assert parts.fetcher.closed
    assert parts.member.closed_with is not None
    assert parts.member.stopped
    assert parts.cluster.closed
    await s.close()  # idempotent
    with pytest.raises(ConsumerClosedError):
        await s.poll(0.1)


async def test_metrics_snapshot(parts: Parts) -> None:
    async with share() as s:
        parts.fetcher.add(record(0))
        await s.poll(1.0)
        m = s.metrics()
    assert m["records_handed_out"] == 1
    assert m["records_held"] == 1
    assert m["acknowledgement_mode"] == "implicit"
    assert m["member"] == {"member_id": "m-1"}
    assert (m["records_acquired"], m["records_lapsed"]) == (1, 0)  # the fetcher's (fake.py's here)


async def test_metrics_count_the_records_handed_out_by_delivery_count(parts: Parts) -> None:
    """The delivery_counts histogram (cumulative buckets 1 to 10; +Inf is the count): records as
    handed out, in any task, whatever is decided later."""
    async with share(share_acknowledgement_mode="explicit") as s:
        parts.fetcher.add(record(0), record(1, delivery_count=2), record(2, delivery_count=2),
                          record(3, delivery_count=5), record(4, delivery_count=12))
        got = await s.poll(1.0, max_records=2)
        got += await asyncio.create_task(s.poll(1.0))
        for r in got:
            s.acknowledge(r, "accept")
        counts = s.metrics()["delivery_counts"]
    assert (counts["count"], counts["sum"]) == (5, 1 + 2 + 2 + 5 + 12)
    assert counts["buckets"] == [[1, 1], [2, 3], [3, 3], [4, 3], [5, 4], [6, 4], [7, 4], [8, 4], [9, 4], [10, 4]]


async def test_the_acquire_mode_and_the_renewal_bound_are_settings() -> None:
    """share_acquire_mode (Java's share.acquire.mode, KIP-1206) and share_lock_renewal_max_ms, by
    keyword or from Java-style properties; a bad value is a ConfigError naming what is allowed."""
    s = ShareConsumer.from_properties({"bootstrap.servers": "127.0.0.1:9", "group.id": "g",
                                       "share.acquire.mode": "RECORD_LIMIT", "share.lock.renewal.max.ms": 0})
    assert (s.config.share_acquire_mode, s.config.share_lock_renewal_max_ms) == ("record_limit", 0)
    assert ShareConsumer(group_id="g").config.share_acquire_mode == "batch_optimized"
    with pytest.raises(errors.ConfigError, match=r"share_acquire_mode.*'batch_optimized', 'record_limit'"):
        ShareConsumer(group_id="g", share_acquire_mode="strict")
    with pytest.raises(errors.ConfigError, match="share_lock_renewal_max_ms"):
        ShareConsumer(group_id="g", share_lock_renewal_max_ms=-1)
