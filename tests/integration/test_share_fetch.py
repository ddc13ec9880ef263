"""The share fetch path (fetch/share/fetcher.py) against Apache Kafka 4.3.1: ShareFetch in share
sessions, acquired records handed out with their delivery counts, acknowledgements piggybacked on the
next fetch or flushed with ShareAcknowledge, redelivery after a release or a lapsed lock, and close
ending the session. Membership is driven here with raw ShareGroupHeartbeat requests (the membership
package is built apart); what each test saw is printed (-s).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from aiokafka_lite._net.cluster import Cluster
from aiokafka_lite._net.connection import Connection
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite.errors import ERROR_CODE_BY_NAME, IllegalStateError
from aiokafka_lite.fetch.share.fetcher import ShareFetcher
from aiokafka_lite.fetch.share.ledger import AckType
from aiokafka_lite.fetch.share.records import ShareRecord
from aiokafka_lite.protocol import FIND_COORDINATOR, SHARE_FETCH, SHARE_GROUP_HEARTBEAT
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce, set_group_config

pytestmark = pytest.mark.asyncio
DEADLINE = 30.0  # seconds for anything the broker does in the background (coordinator, assignment)
LOCK_MS = 15000  # long enough that a loaded machine never lets a lock lapse by accident
OPTIONS = ConnectionOptions(request_timeout=30.0, retry_backoff=0.05)
# A fresh broker's group coordinator: loading, or not yet known (answers to retry, not failures).
NOT_READY = frozenset({ERROR_CODE_BY_NAME[name] for name in (
    "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR")})


def _address(broker: Any) -> tuple[str, int]:
    host, _, port = broker.bootstrap_servers.split(",")[0].rpartition(":")
    return host, int(port)


class Member:
    """A share group member's membership, by hand: join, heartbeat in the background, leave."""

    def __init__(self, conn: Connection, group: str, topic: str) -> None:
        self.conn, self.group, self.topic = conn, group, topic
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.assigned: list[int] = []
        self._task: asyncio.Task[None] | None = None
        self.heard = asyncio.Event()  # set by each heartbeat answer

    async def _heartbeat(self, topics: list[str] | None = None, retriable: frozenset[int] = frozenset()
                         ) -> dict[str, Any]:
        body = {"group_id": self.group, "member_id": self.member_id, "member_epoch": self.epoch,
                "subscribed_topic_names": topics}
        answer = await self.conn.send(SHARE_GROUP_HEARTBEAT, self.conn.version_for(SHARE_GROUP_HEARTBEAT), body,
                                      timeout=10.0)
        if answer["error_code"] in retriable:
            return answer
        assert answer["error_code"] == 0, answer
        self.epoch = answer["member_epoch"]
        if answer["assignment"] is not None:
            self.assigned = [p for t in answer["assignment"]["topic_partitions"] for p in t["partitions"]]
        self.heard.set()
        return answer

    async def join(self) -> None:
        async with asyncio.timeout(DEADLINE):
            while True:
                found = await self.conn.send(FIND_COORDINATOR, self.conn.version_for(FIND_COORDINATOR),
                                             {"key_type": 0, "coordinator_keys": [self.group]}, timeout=10.0)
                if found["coordinators"][0]["error_code"] == 0:
                    break
                await asyncio.sleep(0.2)
            while True:
                joined = await self._heartbeat([self.topic], retriable=NOT_READY)
                if not joined["error_code"]:
                    break
                await asyncio.sleep(0.2)  # the group coordinator of a fresh broker is still loading
            while not self.assigned:
                await asyncio.sleep(0.2)
                await self._heartbeat()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(0.5)  # the fixture's group.share.heartbeat.interval.ms
            await self._heartbeat()

    async def leave(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.epoch = -1
        with contextlib.suppress(Exception):
            await self._heartbeat()


@pytest_asyncio.fixture
async def conn(apache_kafka_broker) -> AsyncIterator[Connection]:
    host, port = _address(apache_kafka_broker)
    connection = await Connection.open(host, port, ConnectionOptions(), timeout=10.0)
    try:
        yield connection
    finally:
        await connection.close()


@pytest_asyncio.fixture
async def cluster(apache_kafka_broker) -> AsyncIterator[Cluster]:
    c = Cluster(OPTIONS, [_address(apache_kafka_broker)])
    try:
        yield c
    finally:
        await c.close()


async def _setup(broker: Any, cluster: Cluster, values: list[bytes],
                 lock_ms: int = LOCK_MS) -> tuple[str, str, TopicPartition]:
    topic, group = f"share-fetch-{uuid.uuid4().hex[:8]}", f"share-fetch-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic)
    produce(broker, topic, [(None, v) for v in values])
    set_group_config(broker, group, {"share.auto.offset.reset": "earliest",
                                     "share.record.lock.duration.ms": str(lock_ms)})
    await cluster.refresh_metadata([topic], timeout=10.0)
    return topic, group, TopicPartition(topic, 0)


async def _joined(conn: Connection, cluster: Cluster, group: str, topic: str, explicit: bool,
                  **kwargs: Any) -> tuple[Member, ShareFetcher]:
    member = Member(conn, group, topic)
    await member.join()
    assert member.assigned == [0]
    fetcher = ShareFetcher(cluster, group_id=group, member_id=member.member_id, explicit=explicit,
                           request_timeout=10.0, **kwargs)
    fetcher.assign([TopicPartition(topic, 0)])
    return member, fetcher


async def _poll(fetcher: ShareFetcher, timeout: float = DEADLINE) -> list[ShareRecord]:
    """The next records handed out, within ``timeout`` (empty if none came)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (left := deadline - loop.time()) > 0:
        await fetcher.wait_for_data(left)
        got = fetcher.fetched_records(500)
        if got:
            return [r for records in got.values() for r in records]
    return []


async def _results(fetcher: ShareFetcher, tp: TopicPartition) -> dict[TopicPartition, Any]:
    """The piggybacked acknowledgements' results, once they came."""
    async with asyncio.timeout(DEADLINE):
        while True:
            results = fetcher.take_acknowledgement_results()
            if tp in results:
                return results
            await fetcher.wait_for_data(0.1)
            assert fetcher.fetched_records(500) == {}


async def test_accepted_records_piggybacked_are_not_delivered_again(apache_kafka_broker, conn, cluster):
    values = [f"value-{i}".encode() for i in range(5)]
    topic, group, tp = await _setup(apache_kafka_broker, cluster, values)
    member, fetcher = await _joined(conn, cluster, group, topic, explicit=False)
    try:
        records = await _poll(fetcher)
        assert [(r.offset, r.value, r.delivery_count) for r in records] == [(i, v, 1) for i, v in enumerate(values)]
        left = records[0].acquisition_deadline - asyncio.get_running_loop().time()
        assert 0 < left <= LOCK_MS / 1000
        results = await _results(fetcher, tp)  # the next poll accepted them, with the next fetch
        assert results == {tp: None}
        again = await _poll(fetcher, 2.0)
        print(f"\nfetched {len(records)} (delivery count 1, lock {left:.1f} s left); accepted with the "
              f"next ShareFetch: {results}; then {len(again)} more in 2 s; sessions {fetcher.sessions()}")
        assert again == []
    finally:
        await fetcher.close(10.0)
        await member.leave()


async def test_released_record_comes_back_with_delivery_count_2(apache_kafka_broker, conn, cluster):
    values = [b"a", b"b", b"c"]
    topic, group, tp = await _setup(apache_kafka_broker, cluster, values)
    member, fetcher = await _joined(conn, cluster, group, topic, explicit=True)
    try:
        first = await _poll(fetcher)
        assert [(r.offset, r.value, r.delivery_count) for r in first] == [(0, b"a", 1), (1, b"b", 1), (2, b"c", 1)]
        fetcher.acknowledge(first[0], AckType.ACCEPT)
        fetcher.acknowledge(first[1], AckType.RELEASE)
        fetcher.acknowledge(first[2], AckType.ACCEPT)
        loop = asyncio.get_running_loop()
        began = loop.time()
        second = await _poll(fetcher)
        print(f"\nreleased offset 1; it came back after {loop.time() - began:.2f} s as "
              f"{[(r.offset, r.value, r.delivery_count) for r in second]}")
        assert [(r.offset, r.value, r.delivery_count) for r in second] == [(1, b"b", 2)]
        fetcher.acknowledge(second[0], AckType.ACCEPT)
        assert await fetcher.commit(10.0) == {tp: None}
    finally:
        await fetcher.close(10.0)
        await member.leave()


async def test_rejected_record_never_comes_back(apache_kafka_broker, conn, cluster):
    topic, group, tp = await _setup(apache_kafka_broker, cluster, [b"poison", b"fine"])
    member, fetcher = await _joined(conn, cluster, group, topic, explicit=True)
    try:
        first = await _poll(fetcher)
        assert [(r.offset, r.value, r.delivery_count) for r in first] == [(0, b"poison", 1), (1, b"fine", 1)]
        fetcher.acknowledge(first[0], AckType.REJECT)
        fetcher.acknowledge(first[1], AckType.ACCEPT)
        results = await fetcher.commit(10.0)  # an explicit flush: ShareAcknowledge alone
        assert results == {tp: None}
        later = await _poll(fetcher, 3.0)
        print(f"\nrejected offset 0, accepted 1, flushed with ShareAcknowledge: {results}; "
              f"{len(later)} records in the next 3 s")
        assert later == []
    finally:
        await fetcher.close(10.0)
        await member.leave()


@pytest.mark.parametrize("mode", ["batch_optimized", "record_limit"])
async def test_record_limit_acquires_at_most_max_records(apache_kafka_broker, conn, cluster, mode):
    """KIP-1206: 20 records produced together, max_records 3. Batch-optimized, the broker acquires
    the whole batch in one fetch; record_limit (share_acquire_mode 1), at most 3 per fetch."""
    topic, group, _ = await _setup(apache_kafka_broker, cluster, [b"%d" % i for i in range(20)])
    member, fetcher = await _joined(conn, cluster, group, topic, explicit=True, max_records=3, acquire_mode=mode)
    try:
        answers = []
        while sum(answers) < 20:
            got = await _poll(fetcher)  # one answer a call: fetched_records(500) takes the whole of it
            assert got, f"only {sum(answers)} of 20 records came"
            answers.append(len(got))
            for record in got:
                fetcher.acknowledge(record, AckType.ACCEPT)
        print(f"\n{mode}: records acquired per fetch {answers}")
        if mode == "record_limit":
            assert max(answers) <= 3
        else:
            assert max(answers) > 3
    finally:
        await fetcher.close(10.0)
        await member.leave()


async def test_renewing_keeps_the_lock_past_its_duration(apache_kafka_broker, conn, cluster):
    topic, group, tp = await _setup(apache_kafka_broker, cluster, [b"long job"], lock_ms=2000)
    member, fetcher = await _joined(conn, cluster, group, topic, explicit=True)
    try:
        loop = asyncio.get_running_loop()
        [record] = await _poll(fetcher)
        acquired = loop.time()
        assert (record.offset, record.value, record.delivery_count) == (0, b"long job", 1)
        renewals = []
        while loop.time() - acquired < 4.5:  # more than two lock durations
            fetcher.acknowledge(record, AckType.RENEW)
            renewals.append(await fetcher.commit(10.0))  # ShareAcknowledge v2, is_renew_ack
            await asyncio.sleep(0.4)
        held = loop.time() - acquired
        assert not fetcher.has_buffered()  # the lock never lapsed: our own fetches did not get it again
        fetcher.acknowledge(record, AckType.ACCEPT)
        accepted = await fetcher.commit(10.0)
        later = await _poll(fetcher, 2.5)
        print(f"\n2 s lock renewed {len(renewals)} times over {held:.1f} s: {set(map(str, renewals))}; "
              f"then accepted: {accepted}; {len(later)} records in the next 2.5 s")
        assert renewals == [{tp: None}] * len(renewals)
        assert accepted == {tp: None}
        assert later == []
    finally:
        await fetcher.close(10.0)
        await member.leave()


def _raw_fetch_body(group: str, member_id: str, epoch: int, topics: list[dict[str, Any]],
                    max_wait_ms: int = 0) -> dict[str, Any]:
    return {"group_id": group, "member_id": member_id, "share_session_epoch": epoch, "max_wait_ms": max_wait_ms,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10, "share_acquire_mode": 0,
            "is_renew_ack": False, "topics": topics, "forgotten_topics_data": []}


async def test_a_lapsed_lock_brings_the_record_back(apache_kafka_broker, conn, cluster):
    topic, group, tp = await _setup(apache_kafka_broker, cluster, [b"slow"], lock_ms=1000)
    # Member A acquires the record with a raw ShareFetch and never acknowledges it; member B, our
    # fetcher, gets it once A's 1 s lock lapses. (More members than partitions: both get partition 0.)
    a, b = Member(conn, group, topic), Member(conn, group, topic)
    await a.join()
    await b.join()
    fetcher = ShareFetcher(cluster, group_id=group, member_id=b.member_id, request_timeout=10.0)
    try:
        async with asyncio.timeout(DEADLINE):
            while a.assigned != [0] or b.assigned != [0]:
                a.heard.clear()
                await a.heard.wait()
        loop = asyncio.get_running_loop()
        topics = [{"topic_id": cluster.topic_id(topic), "partitions": [
            {"partition_index": 0, "acknowledgement_batches": []}]}]
        async with asyncio.timeout(DEADLINE):
            epoch = 0
            while True:  # until A has it (the share partition is set up on first use)
                answer = await conn.send(SHARE_FETCH, conn.version_for(SHARE_FETCH),
                                         _raw_fetch_body(group, a.member_id, epoch, topics, 500), timeout=10.0)
                epoch += 1
                [part] = answer["responses"][0]["partitions"] if answer["responses"] else [None]
                if part is not None and part["acquired_records"]:
                    break
        acquired = loop.time()
        assert part["acquired_records"] == [{"first_offset": 0, "last_offset": 0, "delivery_count": 1}]
        fetcher.assign([tp])  # B starts fetching only now
        [record] = await _poll(fetcher)
        came_back = loop.time() - acquired
        print(f"\n1 s lock: A acquired offset 0 (delivery count 1) and did nothing; B got it after "
              f"{came_back:.2f} s with delivery count {record.delivery_count}, lock "
              f"{record.acquisition_deadline - loop.time():.2f} s left")
        assert (record.offset, record.value, record.delivery_count) == (0, b"slow", 2)
        assert came_back >= 0.9
        assert record.acquisition_deadline - loop.time() <= 1.0
        results = await _results(fetcher, tp)
        assert results == {tp: None}
    finally:
        await fetcher.close(10.0)
        await b.leave()
        await a.leave()


async def test_a_lapsed_lock_hands_the_record_to_the_same_member_again(apache_kafka_broker, conn, cluster):
    topic, group, tp = await _setup(apache_kafka_broker, cluster, [b"forgotten"], lock_ms=1000)
    member, fetcher = await _joined(conn, cluster, group, topic, explicit=True)
    try:
        loop = asyncio.get_running_loop()
        [first] = await _poll(fetcher)
        acquired = loop.time()
        assert (first.offset, first.delivery_count) == (0, 1)
        # Never decided: once its lock lapses, our own fetch in flight acquires it again; the stale
        # delivery then awaits no decision, so explicit mode hands out the new one.
        [second] = await _poll(fetcher)
        came_back = loop.time() - acquired
        print(f"\n1 s lock, one member: offset 0 came back after {came_back:.2f} s with delivery count "
              f"{second.delivery_count}")
        assert (second.offset, second.value, second.delivery_count) == (0, b"forgotten", 2)
        assert came_back >= 0.9
        with pytest.raises(IllegalStateError):  # the new delivery awaits its decision
            fetcher.fetched_records(1)
        fetcher.acknowledge(second, AckType.ACCEPT)
        assert await fetcher.commit(10.0) == {tp: None}
    finally:
        await fetcher.close(10.0)
        await member.leave()


async def test_close_ends_the_share_session(apache_kafka_broker, conn, cluster):
    values = [f"v{i}".encode() for i in range(6)]
    topic, group, tp = await _setup(apache_kafka_broker, cluster, values)
    member, fetcher = await _joined(conn, cluster, group, topic, explicit=False, max_records=6)
    try:
        await fetcher.wait_for_data(DEADLINE)
        handed = fetcher.fetched_records(2)[tp]  # 2 handed out; 4 acquired, never handed out
        assert [(r.offset, r.delivery_count) for r in handed] == [(0, 1), (1, 1)]
        epoch = fetcher.sessions()[next(iter(fetcher.sessions()))]["epoch"]
        closed = await fetcher.close(10.0)  # epoch -1: accepts 0-1, releases 2-5
        assert closed == {tp: None}
        # The session is gone: a request at the epoch it would have had next is refused.
        answer = await conn.send(SHARE_FETCH, conn.version_for(SHARE_FETCH),
                                 _raw_fetch_body(group, member.member_id, epoch, []), timeout=10.0)
        assert answer["error_code"] == 122, answer  # SHARE_SESSION_NOT_FOUND
        # The released ones are at once available again (the lock was 15 s), one delivery later.
        again = ShareFetcher(cluster, group_id=group, member_id=member.member_id, request_timeout=10.0)
        again.assign([tp])
        loop = asyncio.get_running_loop()
        began = loop.time()
        records = await _poll(again)
        took = loop.time() - began
        await again.close(10.0)
        print(f"\nclose sent epoch -1 after epoch {epoch - 1}: {closed}; the session then answered "
              f"{answer['error_code']}; a new session got {[(r.offset, r.delivery_count) for r in records]} "
              f"after {took:.2f} s")
        assert [(r.offset, r.value, r.delivery_count) for r in records] == [(i, values[i], 2) for i in range(2, 6)]
        assert took < LOCK_MS / 1000
    finally:
        await member.leave()
