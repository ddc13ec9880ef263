"""A scripted consumer for process()'s unit tests: partitions as lists of records, rebalances queued
by the test and played at the next poll() (as a real consumer runs its listener inside poll()),
commits recorded in order, every poll() time-stamped (the poll gap is what KIP-62 watches)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite.consumer.listener import ConsumerRebalanceListener, call_listener
from aiokafka_lite.errors import ConsumerClosedError, IllegalStateError
from aiokafka_lite.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition


@dataclass
class FakeConfig:
    group_id: str | None = "g"
    enable_auto_commit: bool = False
    auto_commit_interval: float = 5.0
    max_poll_records: int = 500


def record(topic: str, partition: int, offset: int, key: Any) -> ConsumerRecord:
    return ConsumerRecord(topic, partition, offset, 0, 0, key, f"v{offset}".encode(), [])


@dataclass
class FakeConsumer:
    logs: dict[TopicPartition, list[ConsumerRecord]]
    config: FakeConfig = field(default_factory=FakeConfig)
    committed_offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    commits: list[dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=list)
    poll_times: list[float] = field(default_factory=list)
    listener: ConsumerRebalanceListener | None = None
    topics: list[str] = field(default_factory=list)
    closed: bool = False
    _assigned: set[TopicPartition] = field(default_factory=set)
    _paused: set[TopicPartition] = field(default_factory=set)
    _positions: dict[TopicPartition, int] = field(default_factory=dict)
    _events: list[tuple[str, set[TopicPartition]]] = field(default_factory=list)
    _closing: asyncio.Future[None] | None = None

    @classmethod
    def with_records(cls, partitions: int, per_partition: int, keys: int, topic: str = "t",
                     **kwargs: Any) -> FakeConsumer:
        logs = {TopicPartition(topic, p): [record(topic, p, o, f"k{(o * 7 + p) % keys}") for o in range(per_partition)]
                for p in range(partitions)}
        fake = cls(logs, **kwargs)
        fake.topics = [topic]
        fake.assign_now(set(logs))
        return fake

    # ------------------------------------------------------------ the script

    def assign_now(self, tps: set[TopicPartition]) -> None:
        for tp in tps:
            self._assigned.add(tp)
            committed = self.committed_offsets.get(tp)
            self._positions[tp] = committed.offset if committed is not None else 0

    def queue(self, event: str, tps: set[TopicPartition]) -> None:
        """"revoke", "lose" or "assign" at the next poll()."""
        self._events.append((event, set(tps)))

    async def close(self, timeout: float | None = None) -> None:
        """As Consumer.close(): closed at once for other callers, then the listener's revocation; a
        second call waits for the first."""
        if self._closing is None:
            self.closed = True
            self._closing = asyncio.ensure_future(self._revoke_on_close())
        await asyncio.shield(self._closing)

    async def _revoke_on_close(self) -> None:
        if self.listener is not None and self._assigned:
            await call_listener(self.listener.on_partitions_revoked, set(self._assigned), "on_partitions_revoked")
        self._assigned.clear()

    def end_offsets(self) -> dict[TopicPartition, int]:
        return {tp: len(log) for tp, log in self.logs.items()}

    # ------------------------------------------------------------ the interface

    async def poll(self, timeout: float = 1.0, max_records: int | None = None) -> Sequence[ConsumerRecord]:
        self._check_open()
        self.poll_times.append(asyncio.get_running_loop().time())
        await self._play_events()
        limit = max_records if max_records is not None else self.config.max_poll_records
        out: list[ConsumerRecord] = []
        for tp in sorted(self._assigned - self._paused):
            log, at = self.logs[tp], self._positions[tp]
            taken = log[at:at + limit - len(out)]
            out.extend(taken)
            self._positions[tp] = at + len(taken)
        if not out:
            await asyncio.sleep(timeout)
        else:
            await asyncio.sleep(0)
        self._check_open()
        return out

    async def _play_events(self) -> None:
        while self._events:
            event, tps = self._events.pop(0)
            if event == "assign":
                self.assign_now(tps)
                if self.listener is not None:
                    await call_listener(self.listener.on_partitions_assigned, tps, "on_partitions_assigned")
                continue
            self._paused -= tps
            if self.listener is not None:
                listener = self.listener
                callback = listener.on_partitions_revoked if event == "revoke" else listener.on_partitions_lost
                await call_listener(callback, tps, event)
            self._assigned -= tps

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._check_assigned([tp])
        self._positions[tp] = offset

    def pause(self, *tps: TopicPartition) -> None:
        self._check_assigned(tps)
        self._paused |= set(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self._check_assigned(tps)
        self._paused -= set(tps)

    def paused(self) -> set[TopicPartition]:
        self._check_open()
        return set(self._paused)

    def assignment(self) -> set[TopicPartition]:
        self._check_open()
        return set(self._assigned)

    def subscription(self) -> set[str]:
        return set(self.topics)

    def subscribe(self, topics: Iterable[str] = (), *, pattern: str | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        self.topics = list(topics)
        self.listener = listener

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None) -> None:
        assert offsets is not None, "process() always names its offsets"
        await asyncio.sleep(0)
        self.commits.append(dict(offsets))
        self.committed_offsets.update(offsets)

    async def committed(self, tps: Iterable[TopicPartition]) -> Mapping[TopicPartition, OffsetAndMetadata | None]:
        return {tp: self.committed_offsets.get(tp) for tp in tps}

    def _check_open(self) -> None:
        if self.closed:
            raise ConsumerClosedError("the consumer is closed")

    def _check_assigned(self, tps: Iterable[TopicPartition]) -> None:
        self._check_open()
        for tp in tps:
            if tp not in self._assigned:
                raise IllegalStateError(f"{tp} is not assigned")


async def until(condition: Callable[[], object], timeout: float = 20.0, interval: float = 0.002) -> None:
    """Wait until ``condition()`` holds; fail after ``timeout`` seconds (generous: a loaded machine
    slows the loop, never the logic)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, f"not within {timeout} s"
        await asyncio.sleep(interval)
