"""The fault-test harness: a group of consumers processes every record of a topic, committing
after each batch, while a fault is injected; it checks that no offset is skipped, that the group
commits up to the end of every partition, and that no call overran its bound.

``FaultRun`` holds the figures (records seen, duplicates, typed errors raised, the longest call)
so tests can assert on them and the report can print them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.errors import KafkaError

POLL_TIMEOUT = 0.2
COMMIT_TIMEOUT = 5.0
# A call may take its own timeout plus one request's worth of slack; beyond that it hangs.
CALL_LIMIT = 12.0

Fault = Callable[[], Coroutine[Any, Any, None]]


@dataclass
class FaultRun:
    expected: set[tuple[int, int]]
    seen: collections.Counter[tuple[int, int]] = field(default_factory=collections.Counter)
    errors: list[KafkaError] = field(default_factory=list)
    longest_call: float = 0.0
    fault_done: bool = False

    @property
    def lost(self) -> int:
        return len(self.expected - set(self.seen))

    @property
    def duplicates(self) -> int:
        return sum(n - 1 for n in self.seen.values())

    def summary(self) -> str:
        kinds = collections.Counter(f"{type(e).__name__}: {str(e)[:150]}" for e in self.errors)
        return (f"records {len(self.expected)}, lost {self.lost}, duplicates {self.duplicates}, "
                f"longest call {self.longest_call:.2f} s, errors raised {dict(kinds)}")


async def _bounded(run: FaultRun, call: Awaitable[Any]) -> Any:
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        async with asyncio.timeout(CALL_LIMIT):
            return await call
    except TimeoutError as exc:
        if isinstance(exc, KafkaError):
            raise
        raise AssertionError(f"a consumer call hung for more than {CALL_LIMIT} s") from exc
    finally:
        run.longest_call = max(run.longest_call, loop.time() - began)


async def _member(consumer: Consumer, run: FaultRun, stop: asyncio.Event) -> None:
    uncommitted = False  # records handed out since the last commit that succeeded
    while not stop.is_set():
        try:
            batch = await _bounded(run, consumer.poll(timeout=POLL_TIMEOUT))
        except KafkaError as exc:  # typed errors are allowed; polling goes on
            run.errors.append(exc)
            await asyncio.sleep(0.05)  # a poll that fails at once must not starve the loop
            continue
        for record in batch:
            run.seen[(record.partition, record.offset)] += 1
        if batch or uncommitted:
            # A commit that failed is made again after the next poll, batch or not, as an
            # application does: after a rebalance (CommitFailedError) the records come again, but
            # after a commit that ran out of time (KafkaTimeoutError: on a half-open connection a
            # commit can wait out two request timeouts, see test_faults_proxy) nothing else would
            # commit the last batch.
            try:
                await _bounded(run, consumer.commit(timeout=COMMIT_TIMEOUT))
                uncommitted = False
            except KafkaError as exc:
                run.errors.append(exc)
                uncommitted = True


async def _committed_to_end(consumer: Consumer, run: FaultRun, ends: dict[int, int], topic: str) -> bool:
    tps = [TopicPartition(topic, p) for p in ends]
    try:
        committed = await _bounded(run, consumer.committed(tps, timeout=COMMIT_TIMEOUT))
    except KafkaError as exc:
        run.errors.append(exc)
        return False
    return all(committed[tp] is not None and committed[tp].offset == ends[tp.partition]
               for tp in tps)


async def consume_through_fault(consumers: list[Consumer], topic: str, ends: dict[int, int],
                                fault: Fault, *, inject_after: int, timeout: float = 60.0) -> FaultRun:
    """Run ``consumers`` as one group until every offset below ``ends`` was seen and committed;
    ``fault`` runs (as its own task) once ``inject_after`` records were seen."""
    run = FaultRun({(p, o) for p, end in ends.items() for o in range(end)})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with contextlib.AsyncExitStack() as stack:
        for consumer in consumers:
            await stack.enter_async_context(consumer)
        members = [asyncio.create_task(_member(c, run, stop)) for c in consumers]
        fault_task: asyncio.Task[None] | None = None
        try:
            while True:
                for task in members:
                    if task.done():
                        task.result()  # a member died: surface why
                if fault_task is None and sum(run.seen.values()) >= inject_after:
                    fault_task = asyncio.create_task(fault())
                if (fault_task is not None and fault_task.done() and not run.lost
                        and await _committed_to_end(consumers[0], run, ends, topic)):
                    fault_task.result()
                    run.fault_done = True
                    break
                if loop.time() > deadline:
                    raise AssertionError(f"not recovered within {timeout} s: {run.summary()}")
                await asyncio.sleep(0.25)
        finally:
            stop.set()
            await asyncio.wait(members)
            if fault_task is not None and not fault_task.done():
                fault_task.cancel()
                await asyncio.wait([fault_task])
        for task in members:
            task.result()
    return run
