"""process() at its edges (issue 39): a handler's own CancelledError, however run() ends nothing of
it is left on the consumer, a hung handler's cost is bounded, close() from another task."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging

import pytest

from aiokafka_lite.consumer.listener import ConsumerRebalanceListener
from aiokafka_lite.errors import ConsumerClosedError, HandlerCancelledError, HandlerFailedError
from aiokafka_lite.processing import Processor, process
from aiokafka_lite.processing.listener import ProcessingListener
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

from .fake import FakeConsumer, until

FAST = {"poll_timeout": 0.005, "commit_interval": 0.01, "retry_backoff": 0.001, "retry_backoff_max": 0.004}
DEADLINE = 20.0
TP = TopicPartition("t", 0)

pytestmark = pytest.mark.asyncio


async def own_cancelled_error() -> None:
    """What a handler meets when it awaits a future that another task cancelled."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.cancel()
    await future


async def test_a_handlers_own_cancelled_error_is_retried_and_the_key_goes_on() -> None:
    fake = FakeConsumer.with_records(partitions=1, per_partition=20, keys=1)
    attempts: dict[int, int] = {}

    async def handler(record) -> None:
        attempts[record.offset] = attempts.get(record.offset, 0) + 1
        if record.offset == 3 and attempts[3] == 1:
            await own_cancelled_error()

    processor = Processor(fake, handler, concurrency=4, **FAST)
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        await until(lambda: fake.committed_offsets.get(TP, OffsetAndMetadata(-1)).offset == 20)
    processor.stop()
    result = await task
    assert (result.processed, result.retries, result.failed) == (20, 1, 0)
    assert attempts[3] == 2


async def test_a_handlers_own_cancelled_error_every_time_goes_to_the_hook() -> None:
    fake = FakeConsumer.with_records(partitions=1, per_partition=10, keys=1)
    failures: list[tuple[int, BaseException]] = []

    async def handler(record) -> None:
        if record.offset == 2:
            await own_cancelled_error()

    processor = Processor(fake, handler, on_failure=lambda r, e: failures.append((r.offset, e)), max_retries=2,
                          **FAST)
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        await until(lambda: fake.committed_offsets.get(TP, OffsetAndMetadata(-1)).offset == 10)
    processor.stop()
    result = await task
    assert (result.processed, result.failed, result.retries) == (9, 1, 2)
    [(offset, error)] = failures
    assert offset == 2
    assert isinstance(error, HandlerCancelledError)
    assert isinstance(error.__cause__, asyncio.CancelledError)


async def test_without_a_hook_a_handlers_own_cancelled_error_is_raised_as_a_failure() -> None:
    fake = FakeConsumer.with_records(partitions=1, per_partition=10, keys=1)

    async def handler(record) -> None:
        if record.offset == 2:
            await own_cancelled_error()

    with pytest.raises(HandlerFailedError) as caught:
        async with asyncio.timeout(DEADLINE):
            await process(fake, handler, max_retries=1, **FAST)
    assert isinstance(caught.value.__cause__, HandlerCancelledError)
    assert fake.committed_offsets[TP].offset == 2


async def test_a_hooks_own_cancelled_error_is_a_failed_hook() -> None:
    fake = FakeConsumer.with_records(partitions=1, per_partition=5, keys=1)

    async def handler(record) -> None:
        raise ValueError("no")

    async def hook(record, error) -> None:
        await own_cancelled_error()

    with pytest.raises(HandlerFailedError, match="on_failure raised CancelledError"):
        async with asyncio.timeout(DEADLINE):
            await process(fake, handler, on_failure=hook, max_retries=0, **FAST)


@pytest.mark.parametrize("ending", ["cancel", "stop", "failure"])
async def test_however_run_ends_its_listener_is_given_back_and_nothing_more_is_committed(ending: str) -> None:
    fake = FakeConsumer.with_records(partitions=1, per_partition=100, keys=100)
    mine = ConsumerRebalanceListener()
    gate = asyncio.Event()

    async def handler(record) -> None:
        if record.offset >= 20:
            await gate.wait()
        if ending == "failure" and record.offset == 30:
            raise ValueError("fatal")

    processor = Processor(fake, handler, listener=mine, concurrency=50, drain_timeout=0.05, max_retries=0, **FAST)
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        await until(lambda: fake.committed_offsets.get(TP, OffsetAndMetadata(-1)).offset == 20)
    assert isinstance(fake.listener, ProcessingListener)
    if ending == "cancel":
        task.cancel()
    elif ending == "stop":
        processor.stop()
    else:
        gate.set()
    with pytest.raises((asyncio.CancelledError, HandlerFailedError)) if ending != "stop" else contextlib.nullcontext():
        await task
    assert fake.listener is mine
    # The application commits further itself; a later close() (a revocation) moves nothing back.
    fake.committed_offsets[TP] = OffsetAndMetadata(100)
    commits = len(fake.commits)
    await fake.close()
    assert len(fake.commits) == commits
    assert fake.committed_offsets[TP].offset == 100


async def test_a_detached_listener_commits_nothing_when_the_consumer_kept_it() -> None:
    """The consumer closed under it: process()'s listener is not replaced, but does nothing more."""
    fake = FakeConsumer.with_records(partitions=1, per_partition=10, keys=10)
    processor = Processor(fake, lambda r: asyncio.sleep(0), **FAST)
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        await until(lambda: fake.committed_offsets.get(TP, OffsetAndMetadata(-1)).offset == 10)
    listener = fake.listener
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert isinstance(listener, ProcessingListener)
    assert not listener.attached
    commits = len(fake.commits)
    await listener.on_partitions_revoked({TP})
    await listener.on_partitions_lost({TP})
    assert len(fake.commits) == commits


async def test_one_hung_handler_costs_a_slot_not_memory_and_is_named_once(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeConsumer.with_records(partitions=1, per_partition=6000, keys=6000)
    fake.config.max_poll_records = 200
    hang = asyncio.Event()

    async def handler(record) -> None:
        if record.offset == 0:
            await hang.wait()

    caplog.set_level(logging.WARNING, "aiokafka_lite.consumer.process")
    processor = Processor(fake, handler, concurrency=10, max_pending_records=100, stuck_handler_warning=0.05,
                          **FAST)
    task = asyncio.create_task(processor.run())
    most_held = 0

    def progressed() -> bool:
        nonlocal most_held
        most_held = max(most_held, processor.metrics()["held"])
        return processor.metrics()["processed"] >= 5999 and processor.metrics()["oldest_handler_age"] > 0.1

    async with asyncio.timeout(DEADLINE):
        await until(progressed)
    metrics = processor.metrics()
    assert most_held <= 100
    assert metrics["oldest_handler_age"] > 0.1
    committed = fake.committed_offsets[TP]
    assert committed.offset == 0  # the hung record holds the watermark; the rest ride in the metadata

    def stuck() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "has run for" in r.getMessage()]

    # Handlers are checked every stuck_handler_warning (0.05 s) on the loop's own grid: the warning
    # comes within one period after the threshold, so at an age of 0.1 s it may still be due.
    async with asyncio.timeout(1.0):
        await until(lambda: bool(stuck()))
    await asyncio.sleep(0.2)  # several more checks: still named once
    stuck_records = stuck()
    assert len(stuck_records) == 1
    assert "t-0 offset 0" in stuck_records[0].getMessage()
    hang.set()
    async with asyncio.timeout(DEADLINE):
        await until(lambda: fake.committed_offsets[TP].offset == 6000)
    processor.stop()
    await task


async def test_close_from_another_task_returns_after_its_revocation_and_reports_its_commit() -> None:
    fake = FakeConsumer.with_records(partitions=2, per_partition=40, keys=8)
    slow = asyncio.Event()

    async def handler(record) -> None:
        if record.offset >= 20:
            await slow.wait()

    processor = Processor(fake, handler, concurrency=32, drain_timeout=0.2, commit_interval=3600,
                          poll_timeout=0.005)
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        await until(lambda: processor.metrics()["processed"] >= 40)
    closing = asyncio.create_task(fake.close())
    async with asyncio.timeout(DEADLINE):
        result = await task
    assert closing.done()  # run() returned after the close it took part in
    assert result.reason == "closed"
    assert result.committed == {tp: 20 for tp in fake.logs}
    assert processor.metrics()["commits"] == 1


async def test_a_partition_assigned_at_the_bound_adds_nothing_beyond_it() -> None:
    """At max_pending_records every assigned partition is paused, but poll() still asks for one
    record (it must be called), and a partition assigned inside that poll is not paused yet: what it
    hands out beyond the room is given back (a seek), so the bound holds."""
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    fake = FakeConsumer.with_records(partitions=2, per_partition=5, keys=5)
    fake._assigned.discard(b)
    hang = asyncio.Event()
    seen: list[tuple[int, int]] = []

    async def handler(record) -> None:
        seen.append((record.partition, record.offset))
        await hang.wait()

    processor = Processor(fake, handler, concurrency=1, max_pending_records=1, **FAST)
    task = asyncio.create_task(processor.run())
    most = 0

    def held() -> int:
        nonlocal most
        most = max(most, processor.metrics()["held"])
        return most

    async with asyncio.timeout(DEADLINE):
        await until(lambda: held() >= 1)
        fake.queue("assign", {b})
        await until(lambda: b in fake.assignment())
        for _ in range(20):
            await asyncio.sleep(0.01)
            held()
    assert most == 1
    hang.set()
    async with asyncio.timeout(DEADLINE):
        await until(lambda: len(seen) == 10)
    processor.stop()
    await task
    assert sorted(seen) == [(p, o) for p in (0, 1) for o in range(5)]  # each once: nothing lost to the seek
    assert fake.committed_offsets[a].offset == 5
    assert fake.committed_offsets[b].offset == 5


async def test_a_stop_during_a_revocations_drain_ends_run_within_drain_timeout_of_the_stop() -> None:
    """Found by the process() model: the revocation's drain, then stop's own, took twice drain_timeout."""
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    fake = FakeConsumer.with_records(partitions=2, per_partition=1, keys=1)
    started: list[int] = []

    async def handler(record) -> None:
        started.append(record.partition)
        await asyncio.Event().wait()  # hangs until cancelled

    processor = Processor(fake, handler, drain_timeout=0.5, **FAST)
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        await until(lambda: sorted(started) == [0, 1])
        fake.queue("revoke", {a})  # the next poll drains partition 0 for drain_timeout
        await asyncio.sleep(0.1)
        loop = asyncio.get_running_loop()
        stopped_at = loop.time()
        processor.stop()
        await task
    took = loop.time() - stopped_at
    assert took < 0.5 + 0.2, took
    assert b not in fake.committed_offsets or fake.committed_offsets[b].offset == 0


async def test_a_failure_while_the_consumer_closes_is_raised_as_the_failure() -> None:
    """Found by the process() model: a handler failure ends run(), and close() comes while the drain
    waits for another handler; run() raised ConsumerClosedError (resuming what it had paused)."""
    fake = FakeConsumer.with_records(partitions=2, per_partition=1, keys=1)
    slow_started = asyncio.Event()

    async def handler(record) -> None:
        if record.partition == 0:
            await slow_started.wait()
            raise ValueError("fatal")
        slow_started.set()
        await asyncio.sleep(0.3)

    processor = Processor(fake, handler, max_retries=0, drain_timeout=2.0, **FAST)
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        await until(lambda: processor.metrics()["running"] and slow_started.is_set())
        await asyncio.sleep(0.05)  # the failure has ended the loop; the drain waits for partition 1
        closing = asyncio.create_task(fake.close())
        with pytest.raises(HandlerFailedError):
            await task
        await closing


_in_close: contextvars.ContextVar[bool] = contextvars.ContextVar("in_close", default=False)


class RevokingFake(FakeConsumer):
    """Once closed, only close()'s own revocation (its task) may commit, as a consumer may insist;
    a commit's answer takes 50 ms."""

    async def _revoke_on_close(self) -> None:
        _in_close.set(True)
        await super()._revoke_on_close()

    async def commit(self, offsets=None) -> None:
        if self.closed and not _in_close.get():
            raise ConsumerClosedError("the consumer is closed")
        await asyncio.sleep(0.05)  # the broker's answer takes a while
        await super().commit(offsets)


async def test_nothing_is_committed_after_run_ended_by_a_failure_while_close_revokes() -> None:
    """Found by the process() model (seed 1): run() raised a handler's failure while close()'s
    revocation, in close()'s task, was still draining; that revocation then committed."""
    fake = RevokingFake.with_records(partitions=1, per_partition=2, keys=2)
    gate = asyncio.Event()

    async def handler(record) -> None:
        if record.offset == 0:
            await gate.wait()
        else:
            raise ValueError("poison")

    processor = Processor(fake, handler, max_retries=1, drain_timeout=0.3, **{**FAST, "commit_interval": 3600})
    task = asyncio.create_task(processor.run())
    ended_with: list[int] = []
    task.add_done_callback(lambda _: ended_with.append(len(fake.commits)))
    async with asyncio.timeout(DEADLINE):
        await until(lambda: processor.metrics()["retries"] == 1)
        await asyncio.sleep(0.1)  # the second attempt failed: run() is draining on its way out
        closing = asyncio.create_task(fake.close())
        with pytest.raises(HandlerFailedError):
            await task
        await closing
    assert ended_with == [len(fake.commits)]
