"""close() against calls in flight (issue #29, defects 1, 2, 5 and 6).

A close() in one task ends the calls that other tasks have in flight with ConsumerClosedError (or
their own result, where they completed), and `async for` ends normally: CancelledError reaches a
caller only when that caller's own task was cancelled. A commit_async callback is never told that
a commit which did not complete succeeded. A cancelled close() closes by force, then re-raises. A
start attempt that nobody waits for gives up after default_api_timeout_ms.
"""

from __future__ import annotations

import asyncio
import gc
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aiokafka_lite import Consumer, ShareConsumer, TopicPartition
from aiokafka_lite.errors import ConsumerClosedError, KafkaError, KafkaTimeoutError
from aiokafka_lite.testing.helpers import create_topic, produce

from ..tcp_proxy import silent_server
from ._consumers import poll_until

pytestmark = pytest.mark.asyncio

CallOf = Callable[[Consumer, TopicPartition], Awaitable[Any]]


async def _drain(consumer: Consumer) -> None:
    async for _ in consumer:
        pass


IN_FLIGHT_WHILE_STARTING: dict[str, CallOf] = {
    "poll": lambda c, tp: c.poll(timeout=30),
    "commit": lambda c, tp: c.commit({tp: 1}, timeout=30),
    "position": lambda c, tp: c.position(tp, timeout=30),
    "committed": lambda c, tp: c.committed([tp], timeout=30),
    "end_offsets": lambda c, tp: c.end_offsets([tp], timeout=30),
    "start": lambda c, tp: c.start(timeout=30),
    "async for": lambda c, tp: _drain(c),
}


def _aiokafka_tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if t.get_name().startswith("aiokafka-lite") and not t.done()}


async def test_close_ends_calls_waiting_for_the_start_with_consumer_closed():
    """Defect 1: the calls wait on the start attempt (bootstrap not answering); close() from
    another task must not hand them its cancellation of that attempt."""
    async with silent_server() as address:
        consumer = Consumer(bootstrap_servers=address, group_id="g-closing")
        tp = TopicPartition("t", 0)
        consumer.assign([tp])
        calls = {name: asyncio.create_task(call(consumer, tp)) for name, call in IN_FLIGHT_WHILE_STARTING.items()}
        await asyncio.sleep(0.3)  # every call is waiting for the start attempt now
        assert not any(task.done() for task in calls.values())
        began = time.monotonic()
        await consumer.close(timeout=1)
        await asyncio.wait(calls.values(), timeout=5)
        assert time.monotonic() - began < 5
        outcomes = {name: _outcome(task) for name, task in calls.items()}
        assert outcomes == {**{name: "ConsumerClosedError" for name in calls}, "async for": "returned"}
        assert not _aiokafka_tasks()


def _outcome(task: asyncio.Task[Any]) -> str:
    if not task.done():
        return "still running"
    if task.cancelled():
        return "CancelledError"
    error = task.exception()
    return "returned" if error is None else type(error).__name__


async def test_close_in_a_task_group_does_not_tear_down_the_siblings():
    """Defect 1 as FastAPI's lifespan meets it: one task polls, another closes. The poller ends
    normally, so the TaskGroup is not cancelled and the sibling's result stands."""
    async with silent_server() as address:
        consumer = Consumer("t", bootstrap_servers=address, group_id="g-taskgroup")

        async def sibling() -> str:
            await asyncio.sleep(0.5)
            return "done"

        async def closer() -> None:
            await asyncio.sleep(0.2)
            await consumer.close(timeout=1)

        async with asyncio.TaskGroup() as group:
            group.create_task(_drain(consumer))
            group.create_task(closer())
            other = group.create_task(sibling())
        assert other.result() == "done"


async def test_close_in_an_anyio_task_group_ends_the_iteration_not_the_group():
    """The same in an anyio task group: had the poller seen a CancelledError it did not ask for,
    anyio would take it for the group's own cancellation and the sibling would never finish."""
    import anyio

    async with silent_server() as address:
        consumer = Consumer("t", bootstrap_servers=address, group_id="g-anyio")
        finished: list[str] = []

        async def iterate() -> None:
            await _drain(consumer)
            finished.append("iteration")

        async def sibling() -> None:
            await anyio.sleep(0.5)
            finished.append("sibling")

        async def closer() -> None:
            await anyio.sleep(0.2)
            await consumer.close(timeout=1)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(iterate)
                group.start_soon(sibling)
                group.start_soon(closer)
        assert sorted(finished) == ["iteration", "sibling"]


async def test_commit_in_flight_during_close_by_force(tansu_broker, unique_topic, unique_group):
    """Defect 1, started consumer: a commit() in flight during close(timeout=0) ends with its own
    result or ConsumerClosedError; never CancelledError. Tried at several points of its flight."""
    create_topic(tansu_broker, unique_topic, partitions=1)
    produce(tansu_broker, unique_topic, [{"value": f"v{i}"} for i in range(5)])
    tp = TopicPartition(unique_topic, 0)
    outcomes = set()
    for yields in range(0, 12):
        # assign(): commits go to the group from outside, with no join to wait for.
        consumer = Consumer(bootstrap_servers=tansu_broker.bootstrap_servers,
                            group_id=f"{unique_group}-{yields}", auto_offset_reset="earliest",
                            enable_auto_commit=False)
        consumer.assign([tp])
        await consumer.start()
        await poll_until(consumer, lambda got: len(got) >= 1, timeout=30)
        commits = [asyncio.create_task(consumer.commit({tp: 1 + n})) for n in range(3)]
        for _ in range(yields):
            await asyncio.sleep(0)
        await consumer.close(timeout=0)
        await asyncio.wait(commits, timeout=5)
        for commit in commits:
            outcomes.add(_outcome(commit))
    assert outcomes <= {"returned", "ConsumerClosedError"}, outcomes
    assert "ConsumerClosedError" in outcomes  # the test did catch commits in flight


async def test_commit_async_callback_is_never_told_a_stopped_commit_succeeded(
        tansu_broker, unique_topic, unique_group):
    """Defect 2: a callback told None (success) means the broker has that offset."""
    create_topic(tansu_broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    told: list[tuple[int, BaseException | None]] = []
    for yields in range(0, 12):
        group = f"{unique_group}-{yields}"
        consumer = Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=group,
                            enable_auto_commit=False)
        consumer.assign([tp])
        await consumer.start()
        future = consumer.commit_async({tp: 7}, callback=lambda offsets, error, n=yields: told.append((n, error)))
        for _ in range(yields):
            await asyncio.sleep(0)
        await consumer.close(timeout=0)
        await asyncio.wait({future}, timeout=5)
        assert not future.cancelled()  # the caller's future fails, it is not cancelled
        async with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=group) as reader:
            committed = (await reader.committed([tp]))[tp]
        error = told[-1][1]
        # One way only: a commit stopped after its request was sent may still have been stored.
        if error is None:
            assert committed is not None, yields
            assert committed.offset == 7, (yields, committed)
        else:
            assert isinstance(error, KafkaError)
            assert future.exception() is error
    errors = {type(error).__name__ for _, error in told}
    assert "ConsumerClosedError" in errors  # some commits were stopped by the close


async def test_cancelling_the_commit_async_future_reports_no_success(tansu_broker, unique_topic, unique_group):
    create_topic(tansu_broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    told: list[BaseException | None] = []
    async with Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=unique_group,
                        enable_auto_commit=False) as consumer:
        consumer.assign([tp])
        future = consumer.commit_async({tp: 3}, callback=lambda offsets, error: told.append(error))
        future.cancel()
        await asyncio.sleep(0.5)
        assert len(told) == 1
        assert isinstance(told[0], KafkaError)
        assert (await consumer.committed([tp]))[tp] is None  # cancelled before it was sent


async def test_a_cancelled_close_closes_by_force_then_reraises(tansu_broker, unique_topic, unique_group):
    """Defect 5: close() cancelled mid-way (here while a slow listener revokes) closes by force,
    leaves nothing running, and its caller sees CancelledError."""
    create_topic(tansu_broker, unique_topic, partitions=1)
    produce(tansu_broker, unique_topic, [{"value": "v"}])
    revoking = asyncio.Event()

    class SlowRevoke:
        async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
            revoking.set()
            await asyncio.sleep(30)

        def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
            pass

        def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
            pass

    consumer = Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=unique_group,
                        auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500)
    consumer.subscribe([unique_topic], listener=SlowRevoke())  # type: ignore[arg-type]
    await consumer.start()
    await poll_until(consumer, lambda got: len(got) >= 1, timeout=30)
    close = asyncio.create_task(consumer.close(timeout=60))
    await asyncio.wait_for(revoking.wait(), 10)
    began = time.monotonic()
    close.cancel()
    with pytest.raises(asyncio.CancelledError):
        await close
    assert time.monotonic() - began < 5
    assert not _aiokafka_tasks()
    with pytest.raises(ConsumerClosedError):
        await consumer.poll(0)
    await consumer.close()  # idempotent: returns at once


async def test_cancel_and_await_lets_the_callers_cancellation_through():
    """Defect 5 at its root: stopping a task whose clean-up takes a while must not swallow a
    cancellation of the task doing the stopping."""
    from aiokafka_lite.group.tasks import cancel_and_await

    async def slow_to_stop() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            await asyncio.sleep(0.5)  # clean-up that outlives the first cancel

    owned = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    stopper = asyncio.create_task(cancel_and_await([owned]))
    await asyncio.sleep(0.1)
    stopper.cancel()
    await asyncio.wait({stopper}, timeout=2)
    assert stopper.cancelled()


@pytest.mark.parametrize("facade", ["Consumer", "ShareConsumer"])
async def test_a_start_attempt_nobody_waits_for_gives_up(facade: str):
    """Defect 6: after start() timed out, the attempt goes on for the next call, but not for ever:
    with nobody waiting it stops after default_api_timeout_ms and closes its connections."""
    accepted: list[asyncio.StreamReader] = []
    async with silent_server(accepted) as address:
        kind = Consumer if facade == "Consumer" else ShareConsumer
        consumer = kind(bootstrap_servers=address, group_id="g-idle", default_api_timeout_ms=1000)
        with pytest.raises(KafkaTimeoutError):
            await consumer.start(timeout=0.2)
        assert _aiokafka_tasks()  # the attempt goes on, for the next call to pick up
        await asyncio.sleep(1.6)
        assert not _aiokafka_tasks()
        assert accepted
        for reader in accepted:
            await asyncio.wait_for(reader.read(), 2)  # returns at EOF: the client closed it
        # The next call starts a fresh attempt, bounded by its own timeout.
        with pytest.raises(KafkaTimeoutError):
            await consumer.start(timeout=0.2)
        await consumer.close(timeout=0)


async def test_an_attempt_being_waited_for_is_not_given_up():
    async with silent_server() as address:
        consumer = Consumer(bootstrap_servers=address, group_id="g-waited", default_api_timeout_ms=300)
        with pytest.raises(KafkaTimeoutError):
            await consumer.start(timeout=1.0)  # three idle limits, all spent waiting
        await consumer.close(timeout=0)


async def test_a_consumer_dropped_without_close_says_so():
    async with silent_server() as address:
        consumer = Consumer(bootstrap_servers=address, group_id="g-dropped", default_api_timeout_ms=200)
        with pytest.raises(KafkaTimeoutError):
            await consumer.start(timeout=0.1)
        await asyncio.sleep(0.6)  # the attempt gave up: nothing holds the consumer any more
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            del consumer
            gc.collect()
        assert [str(w.message) for w in caught if w.category is ResourceWarning] == [
            "unclosed Consumer (group 'g-dropped'): call close() or use 'async with'"]
