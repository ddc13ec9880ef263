"""A scripted share fetcher, member and cluster for the ShareConsumer's local logic (no broker)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from aiokafka_lite.errors import IllegalStateError, UnsupportedVersionError
from aiokafka_lite.fetch.share.ledger import AckType
from aiokafka_lite.fetch.share.records import ShareRecord
from aiokafka_lite.group.share.state import State
from aiokafka_lite.structs import TopicPartition

TP = TopicPartition("jobs", 0)


def record(offset: int, delivery_count: int = 1, partition: int = 0, value: bytes = b"v") -> ShareRecord:
    return ShareRecord("jobs", partition, offset, 0, 0, b"k", value, [], None, delivery_count, 0.0)


def offsets_answer(lag: dict[TopicPartition, int], errors: dict[TopicPartition, int] | None = None
                   ) -> dict[str, Any]:
    """A DescribeShareGroupOffsets v1 answer: each partition's start offset 0 and ``lag``, or its error."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, n in {**lag, **(errors or {})}.items():
        code = (errors or {}).get(tp, 0)
        topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "start_offset": -1 if code else 0,
                                                "leader_epoch": 0, "lag": -1 if code else n, "error_code": code,
                                                "error_message": None})
    named = [{"topic_name": t, "topic_id": uuid.UUID(int=1), "partitions": ps} for t, ps in topics.items()]
    return {"throttle_time_ms": 0,
            "groups": [{"group_id": "workers", "error_code": 0, "error_message": None, "topics": named}]}


class Coordinator:
    """What the lag refresher (share/lag.py) uses of Cluster: a coordinator answering
    DescribeShareGroupOffsets at ``version`` (None: not at all) with ``lag``, or raising ``error``."""

    def __init__(self) -> None:
        self.version: int | None = 1
        self.lag: dict[TopicPartition, int] = {TP: 0}
        self.partition_errors: dict[TopicPartition, int] = {}
        self.error: BaseException | None = None
        self.hang = False  # the broker never answers
        self.asked: list[float] = []  # loop times of the requests sent

    def coordinator(self, group_id: str) -> int | None:
        return 1

    async def find_coordinator(self, group_id: str, timeout: float | None = None) -> int:
        return 1

    async def connection(self, node_id: int, timeout: float | None = None) -> Coordinator:
        return self

    def version_for(self, api: Any, client_max: int | None = None) -> int:
        if self.version is None:
            raise UnsupportedVersionError("the broker does not support DescribeShareGroupOffsets (API key 90)")
        return self.version

    async def send(self, node_id: int, api: Any, body: dict[str, Any], *, timeout: float | None = None,
                   max_version: int | None = None) -> dict[str, Any]:
        assert body == {"groups": [{"group_id": "workers", "topics": None}]}
        self.asked.append(asyncio.get_running_loop().time())
        if self.hang:
            await asyncio.Event().wait()
        if self.error is not None:
            raise self.error
        return offsets_answer(self.lag, self.partition_errors)


class FakeCluster(Coordinator):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    async def bootstrap(self, timeout: float | None) -> None:
        await asyncio.sleep(0)

    async def close(self) -> None:
        self.closed = True


class FakeMember:
    def __init__(self, on_change: Any) -> None:
        self.member_id = "m-1"
        self.topics: frozenset[str] = frozenset()
        self.polls = 0
        self.fatal: BaseException | None = None
        self.closed_with: float | None = None
        self.stopped = False
        self.on_change = on_change
        self.state = State.STABLE

    def subscribe(self, topics: Any) -> None:
        self.topics = frozenset(topics)

    def before_poll(self) -> None:
        self.polls += 1
        if self.fatal is not None:
            raise self.fatal

    def assignment(self) -> set[TopicPartition]:
        return {TP} if self.topics else set()

    def metrics(self) -> dict[str, Any]:
        return {"member_id": self.member_id}

    async def close(self, timeout: float | None) -> None:
        self.closed_with = timeout

    async def stop(self) -> None:
        self.stopped = True


class FakeFetcher:
    """Hands out what ``add()`` queued; records acknowledgements (strict as ShareFetcher's ledger)."""

    def __init__(self) -> None:
        self.queue: list[ShareRecord] = []
        self.delivered: set[int] = set()
        self.acks: list[tuple[int, AckType]] = []
        self.ready = asyncio.Event()
        self.assigned: set[TopicPartition] = set()
        self.closed = False
        self.commit_delay = 0.0
        self.ended: list[float | None] = []
        self.locked: list[int] = []  # offsets whose locks are kept now (renewing())

    def add(self, *records: ShareRecord) -> None:
        self.queue.extend(records)
        self.ready.set()

    def assign(self, tps: Any) -> None:
        self.assigned = set(tps)

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)

    def send_fetches(self) -> int:
        return 0

    def take_acknowledgement_results(self) -> dict[TopicPartition, Any]:
        return {}

    def fetched_records(self, max_records: int, *, strict: bool = True) -> dict[TopicPartition, list[ShareRecord]]:
        assert strict is False  # the facade keeps the rule per task
        out, self.queue = self.queue[:max_records], self.queue[max_records:]
        if not self.queue:
            self.ready.clear()
        self.delivered.update(r.offset for r in out)
        return {TP: out} if out else {}

    def acknowledge(self, rec: ShareRecord, kind: AckType) -> None:
        if rec.offset not in self.delivered:
            raise IllegalStateError(f"offset {rec.offset} is not awaiting acknowledgement")
        if kind is not AckType.RENEW:
            self.delivered.discard(rec.offset)
        self.acks.append((rec.offset, kind))

    def acknowledge_all(self, records: list[ShareRecord], kind: AckType) -> int:
        waiting = [rec for rec in records if rec.offset in self.delivered]
        for rec in waiting:
            self.acknowledge(rec, kind)
        return len(waiting)

    async def wait_for_data(self, timeout: float | None) -> None:
        if self.closed:
            return
        try:
            async with asyncio.timeout(timeout):
                await self.ready.wait()
        except TimeoutError:
            return

    async def commit(self, timeout: float | None) -> dict[TopicPartition, Any]:
        await asyncio.sleep(self.commit_delay)
        return {TP: None}

    async def end_sessions(self, timeout: float | None) -> dict[TopicPartition, Any]:
        self.ended.append(timeout)
        self.delivered.clear()  # the broker released them: no longer ours to acknowledge
        return {TP: None}

    async def close(self, timeout: float | None = None) -> dict[TopicPartition, Any]:
        self.closed = True
        self.ready.set()
        return {}

    def sessions(self) -> dict[int, Any]:
        return {}

    def in_flight(self) -> int:
        return 0

    def keep_locked(self, rec: ShareRecord) -> None:
        self.locked.append(rec.offset)

    def release_lock(self, rec: ShareRecord) -> None:
        self.locked.remove(rec.offset)

    def renewal_metrics(self) -> dict[str, int]:
        return {"watched": len(self.locked)}

    def record_counts(self) -> dict[str, int]:
        return {"records_acquired": len(self.delivered) + len(self.queue), "records_lapsed": 0}


class Parts:
    cluster: FakeCluster
    member: FakeMember
    fetcher: FakeFetcher
