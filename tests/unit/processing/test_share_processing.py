"""process_share() on a scripted share source: outcomes to acknowledgements, redelivery as the
retry, the retry count and the hook, cancellation releasing, how it ends."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from aiokafka_lite.errors import (
    ConsumerClosedError,
    HandlerFailedError,
    IllegalStateError,
    InvalidArgumentError,
    KafkaError,
)
from aiokafka_lite.fetch.share.ledger import AckType
from aiokafka_lite.fetch.share.records import ShareRecord
from aiokafka_lite.processing import ShareProcessor, process_share

from ..share.fake import record

pytestmark = pytest.mark.asyncio


class FakeShare:
    """Hands out queued records one poll at a time; a released record comes back with its delivery
    count one higher (as the broker does)."""

    def __init__(self, *records: ShareRecord, explicit: bool = True) -> None:
        self.explicit = explicit
        self.queue = list(records)
        self.acks: list[tuple[int, int, AckType]] = []  # offset, delivery count, type
        self.closed = False
        self.arrived = asyncio.Event()
        self.renewing_now: set[int] = set()  # offsets inside a renewing() block now
        self.renewed: list[int] = []  # offsets that entered one

    @contextlib.contextmanager
    def renewing(self, r: ShareRecord) -> Iterator[ShareRecord]:
        self.renewing_now.add(r.offset)
        self.renewed.append(r.offset)
        try:
            yield r
        finally:
            self.renewing_now.discard(r.offset)

    async def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ShareRecord]:
        if self.closed:
            raise ConsumerClosedError("closed")
        if not self.queue:
            await asyncio.sleep(min(timeout, 0.005))
            return []
        return [self.queue.pop(0)]

    def acknowledge(self, r: ShareRecord, type: AckType | str = "accept") -> None:
        assert isinstance(type, AckType)
        if self.closed:
            raise ConsumerClosedError("closed")  # as the ShareConsumer: the broker released it at close
        assert r.offset not in self.renewing_now, "decided while its lock is still kept"
        self.acks.append((r.offset, r.delivery_count, type))
        if type is AckType.RELEASE:
            self.queue.append(r._replace(delivery_count=r.delivery_count + 1))
        self.arrived.set()


async def until(condition: Any, seconds: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        assert loop.time() < deadline, "not within the deadline"
        await asyncio.sleep(0.002)


async def test_return_accepts_and_handlers_run_concurrently() -> None:
    share = FakeShare(*(record(i) for i in range(40)))
    proc = ShareProcessor(share, lambda r: asyncio.sleep(0.01), concurrency=8, poll_timeout=0.01)
    task = asyncio.create_task(proc.run())
    await until(lambda: proc.accepted == 40)
    proc.stop()
    result = await task
    assert result.reason == "stopped"
    assert result.accepted == 40
    assert sorted(o for o, _, t in share.acks if t is AckType.ACCEPT) == list(range(40))
    assert proc.metrics()["peak_in_progress"] > 2


async def test_failure_releases_then_rejects_past_max_retries_and_calls_the_hook() -> None:
    share = FakeShare(record(0))
    failed: list[tuple[int, int, str]] = []

    async def hook(r: ShareRecord, error: Exception) -> None:
        failed.append((r.offset, r.delivery_count, str(error)))

    async def handler(r: ShareRecord) -> None:
        raise ValueError("boom")

    proc = ShareProcessor(share, handler, on_failure=hook, concurrency=2, max_retries=2, poll_timeout=0.01)
    task = asyncio.create_task(proc.run())
    await until(lambda: failed)
    proc.stop()
    await task
    assert share.acks == [(0, 1, AckType.RELEASE), (0, 2, AckType.RELEASE), (0, 3, AckType.REJECT)]
    assert failed == [(0, 3, "boom")]


async def test_without_a_hook_the_poison_record_is_rejected_and_run_raises() -> None:
    share = FakeShare(record(5, delivery_count=4))

    async def handler(r: ShareRecord) -> None:
        raise ValueError("poison")

    with pytest.raises(HandlerFailedError, match="offset 5") as caught:
        async with asyncio.timeout(20):
            await process_share(share, handler, concurrency=3, max_retries=3, poll_timeout=0.01)
    assert isinstance(caught.value.__cause__, ValueError)
    assert share.acks == [(5, 4, AckType.REJECT)]


async def test_max_retries_none_leaves_it_to_the_broker() -> None:
    share = FakeShare(record(0, delivery_count=50))
    calls = 0

    async def handler(r: ShareRecord) -> None:
        nonlocal calls
        calls += 1
        raise ValueError("again")

    proc = ShareProcessor(share, handler, max_retries=None, concurrency=1, poll_timeout=0.01)
    task = asyncio.create_task(proc.run())
    await until(lambda: calls >= 3)
    proc.stop()
    await task
    assert {t for _, _, t in share.acks} == {AckType.RELEASE}


async def test_stop_past_drain_timeout_cancels_handlers_which_release_their_records() -> None:
    share = FakeShare(record(0), record(1))
    started = asyncio.Event()

    async def handler(r: ShareRecord) -> None:
        started.set()
        await asyncio.sleep(60)

    stop = asyncio.Event()
    task = asyncio.create_task(process_share(share, handler, concurrency=2, drain_timeout=0.05,
                                             poll_timeout=0.01, stop=stop))
    await started.wait()
    await until(lambda: len(share.queue) == 0)
    stop.set()
    result = await asyncio.wait_for(task, 20)
    assert result.reason == "stopped"
    assert sorted((o, t) for o, _, t in share.acks) == [(0, AckType.RELEASE), (1, AckType.RELEASE)]


async def test_cancelling_run_releases_and_reraises() -> None:
    share = FakeShare(record(0))
    started = asyncio.Event()

    async def handler(r: ShareRecord) -> None:
        started.set()
        await asyncio.sleep(60)

    task = asyncio.create_task(process_share(share, handler, concurrency=1, poll_timeout=0.01))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert share.acks == [(0, 1, AckType.RELEASE)]


async def test_a_closed_consumer_ends_run_with_reason_closed() -> None:
    share = FakeShare()
    task = asyncio.create_task(process_share(share, lambda r: asyncio.sleep(0), poll_timeout=0.01))
    await asyncio.sleep(0.02)
    share.closed = True
    result = await asyncio.wait_for(task, 20)
    assert result.reason == "closed"


async def test_misuse_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="explicit"):
        ShareProcessor(FakeShare(explicit=False), lambda r: asyncio.sleep(0))
    with pytest.raises(InvalidArgumentError, match="did you mean 'concurrency'"):
        ShareProcessor(FakeShare(), lambda r: asyncio.sleep(0), concurency=3)
    with pytest.raises(InvalidArgumentError, match="max_retries"):
        ShareProcessor(FakeShare(), lambda r: asyncio.sleep(0), max_retries=-1)


# ------------------------------------------------------------ issue 39: the ways out

async def _cancelled_elsewhere() -> None:
    """What a handler meets when it awaits a future another task cancels: its own CancelledError,
    though its task was not cancelled."""
    fut = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(fut.cancel)
    await fut


async def test_a_handlers_own_cancelled_error_is_a_failure_and_the_pool_goes_on() -> None:
    """Issue 39, defect 3: 200 records, one handler's own CancelledError. Before the fix, run()
    returned reason="stopped" after about 10 records, though nobody called stop()."""
    share = FakeShare(*(record(i) for i in range(200)))

    async def handler(r: ShareRecord) -> None:
        await asyncio.sleep(0.001)
        if r.offset == 10 and r.delivery_count == 1:
            await _cancelled_elsewhere()

    proc = ShareProcessor(share, handler, concurrency=8, poll_timeout=0.01)
    task = asyncio.create_task(proc.run())
    await until(lambda: proc.accepted == 200 or task.done())
    assert not task.done(), f"run() ended by itself after {proc.accepted} records: {task.result()}"
    proc.stop()
    result = await asyncio.wait_for(task, 20)
    assert (result.reason, result.accepted, result.released, result.rejected) == ("stopped", 200, 1, 0)
    assert [(d, t) for o, d, t in share.acks if o == 10] == [(1, AckType.RELEASE), (2, AckType.ACCEPT)]


async def test_a_handlers_own_cancelled_error_past_max_retries_goes_to_on_failure() -> None:
    share = FakeShare(record(0, delivery_count=3), record(1))
    failed: list[tuple[int, BaseException]] = []

    async def handler(r: ShareRecord) -> None:
        if r.offset == 0:
            await _cancelled_elsewhere()

    proc = ShareProcessor(share, handler, concurrency=1, max_retries=2, poll_timeout=0.01,
                          on_failure=lambda r, e: failed.append((r.offset, e)))
    task = asyncio.create_task(proc.run())
    await until(lambda: proc.accepted == 1 or task.done())
    assert not task.done(), f"run() ended by itself: {task.result()}"
    proc.stop()
    await asyncio.wait_for(task, 20)
    assert share.acks == [(0, 3, AckType.REJECT), (1, 1, AckType.ACCEPT)]
    [(offset, error)] = failed
    assert offset == 0
    assert type(error).__name__ == "HandlerCancelledError"
    assert isinstance(error.__cause__, asyncio.CancelledError)


async def test_on_failure_raising_its_own_cancelled_error_makes_run_raise_handler_failed_error() -> None:
    share = FakeShare(record(0, delivery_count=9))

    async def handler(r: ShareRecord) -> None:
        raise ValueError("poison")

    async def hook(r: ShareRecord, error: Exception) -> None:
        await _cancelled_elsewhere()  # a dead-letter producer's send, cancelled by its own close

    with pytest.raises(KafkaError, match="on_failure") as caught:
        async with asyncio.timeout(20):
            await process_share(share, handler, on_failure=hook, concurrency=2, poll_timeout=0.01)
    assert isinstance(caught.value, HandlerFailedError)
    assert isinstance(caught.value.__cause__.__cause__, asyncio.CancelledError)  # type: ignore[union-attr]
    assert share.acks == [(0, 9, AckType.REJECT)]


async def test_a_worker_cancelled_by_someone_else_is_not_a_silent_stop() -> None:
    share = FakeShare(record(0))

    async def handler(r: ShareRecord) -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # not process_share()'s doing
        await asyncio.sleep(1)

    with pytest.raises(IllegalStateError, match="cancelled by something other than process_share"):
        async with asyncio.timeout(20):
            await process_share(share, handler, concurrency=2, poll_timeout=0.01)
    assert share.acks == [(0, 1, AckType.RELEASE)]


async def test_a_share_processor_runs_once_and_metrics_say_whether_it_runs() -> None:
    """Issue 39, suspect: `_running` was never reset, so a second run() said "already running"."""
    proc = ShareProcessor(FakeShare(record(0)), lambda r: asyncio.sleep(0), poll_timeout=0.01)
    assert proc.metrics().get("running") is False
    task = asyncio.create_task(proc.run())
    await until(lambda: proc.accepted == 1)
    assert proc.metrics().get("running") is True
    proc.stop()
    await asyncio.wait_for(task, 20)
    assert proc.metrics().get("running") is False
    with pytest.raises(IllegalStateError, match="a ShareProcessor runs once: build a new one"):
        await proc.run()


async def _hung(started: asyncio.Event, ended: list[float]) -> None:
    started.set()
    try:
        await asyncio.sleep(60)  # an HTTP call without a timeout
    finally:
        ended.append(asyncio.get_running_loop().time())


@pytest.mark.parametrize("concurrency", [1, 4])
async def test_a_closed_consumer_cancels_running_handlers_at_once(concurrency: int) -> None:
    """Issue 39, suspect: close() with drain_timeout 3 s. Before the fix, handlers ran on for the whole
    drain_timeout after the close (or, every worker busy, until they returned by themselves)."""
    share = FakeShare(record(0))
    started, ended = asyncio.Event(), list[float]()
    proc = ShareProcessor(share, lambda r: _hung(started, ended), concurrency=concurrency, drain_timeout=3.0,
                          poll_timeout=0.05)
    task = asyncio.create_task(proc.run())
    await started.wait()
    loop = asyncio.get_running_loop()
    closed_at = loop.time()
    share.closed = True  # share.close() from elsewhere
    done, _ = await asyncio.wait([task], timeout=1.0)
    returned_after = loop.time() - closed_at
    print(f"\nconcurrency {concurrency}: run() returned {returned_after * 1000:.0f} ms after the close; "
          f"the handler ran on {(ended[0] - closed_at) * 1000 if ended else float('nan'):.0f} ms")
    assert done, "run() still running 1 s after the consumer was closed"
    assert task.result().reason == "closed"
    assert ended
    assert ended[0] - closed_at < 0.5
    assert share.acks == []  # its record could no longer be acknowledged: the broker released it at close


async def test_a_close_during_the_drain_cuts_it_short() -> None:
    share = FakeShare(record(0))
    started, ended = asyncio.Event(), list[float]()
    proc = ShareProcessor(share, lambda r: _hung(started, ended), concurrency=2, drain_timeout=5.0,
                          poll_timeout=0.05)
    task = asyncio.create_task(proc.run())
    await started.wait()
    proc.stop()
    await asyncio.sleep(0.2)  # draining: the handler may finish until drain_timeout
    assert not task.done()
    share.closed = True
    result = await asyncio.wait_for(task, 1.0)
    assert (result.reason, len(ended)) == ("closed", 1)


async def test_each_handler_runs_with_its_records_lock_kept_and_the_decision_comes_after() -> None:
    """The handler runs inside the source's renewing() block (the ShareConsumer renews the lock
    meanwhile, KIP-1222); the block has ended when the record is decided, whatever the outcome."""
    share = FakeShare(record(0), record(1), record(2))
    inside: list[bool] = []

    async def handler(r: ShareRecord) -> None:
        inside.append(r.offset in share.renewing_now)
        await asyncio.sleep(0.01)
        if r.offset == 1 and r.delivery_count == 1:
            raise ValueError("fails once")

    proc = ShareProcessor(share, handler, max_retries=3, concurrency=2)
    run = asyncio.create_task(proc.run())
    await until(lambda: proc.accepted == 3)
    proc.stop()
    await run
    assert inside == [True] * 4
    assert sorted(share.renewed) == [0, 1, 1, 2]
    assert share.renewing_now == set()
