"""``fetch_connections_per_broker``: a broker's partitions split between that many connections
(lanes), each with its own request in flight and its own fetch session (KIP-227).

Scripted bytes through the real Fetch schema, once per record decoder; the same on Apache Kafka is
tests/integration/test_fetch_sessions.py.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from aiokafka_lite.protocol.messages import FETCH
from aiokafka_lite.structs import TopicPartition

from .test_fetcher import (
    FakeCluster,
    ScriptedFetches,
    assigned,
    batch,
    fetch_response,
    make_fetcher,
    offsets_of,
    partition,
    settle,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("record_decoder")]

TPS = [TopicPartition("t", p) for p in range(4)]


def fetched_partitions(body: dict[str, Any]) -> set[TopicPartition]:
    return {TopicPartition(t["topic"], p["partition"]) for t in body["topics"] for p in t["partitions"]}


class GrantingSessions:
    """``script``'s answers, each full fetch granted a new session id (as Apache Kafka does)."""

    def __init__(self, script: ScriptedFetches) -> None:
        self.script = script
        self.ids = itertools.count(100)

    async def __call__(self, node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        session_id = body["session_id"] or next(self.ids)
        return {**await self.script(node_id, body), "session_id": session_id}


async def test_a_brokers_partitions_split_evenly_between_its_connections_each_with_a_session() -> None:
    cluster = FakeCluster(dict.fromkeys(TPS, 1))
    script = ScriptedFetches()
    for i, tp in enumerate(TPS):
        script.add(tp, partition(tp.partition, batch(0, 3 + i)))
        script.add(tp, partition(tp.partition, batch(3 + i, 2)))
    cluster.handlers[FETCH.key] = GrantingSessions(script)
    fetcher = make_fetcher(cluster, assigned(*TPS), fetch_connections_per_broker=2)
    try:
        assert fetcher.send_fetches() == 2  # one per connection to broker 1
        assert fetcher.in_flight() == 2
        got: dict[TopicPartition, list[int]] = {tp: [] for tp in TPS}
        for _ in range(6):
            if sum(map(len, got.values())) == 5 + 6 + 7 + 8:
                break
            await settle(fetcher)
            for tp, records in fetcher.fetched_records(100).items():
                got[tp].extend(offsets_of(records))
            fetcher.send_fetches()
        assert got == {tp: list(range(5 + i)) for i, tp in enumerate(TPS)}  # each record once, in order
        by_lane: dict[tuple[int, int], set[TopicPartition]] = {}
        for lane, (_n, _v, body, _t) in zip(cluster.lanes, cluster.fetches(), strict=True):
            by_lane.setdefault(lane, set()).update(fetched_partitions(body))
        assert set(by_lane) == {(1, 0), (1, 1)}
        assert by_lane[(1, 0)].isdisjoint(by_lane[(1, 1)])  # a partition keeps its connection
        assert by_lane[(1, 0)] | by_lane[(1, 1)] == set(TPS)
        assert len(by_lane[(1, 0)]) == len(by_lane[(1, 1)]) == 2
        (node,) = fetcher.sessions().values()
        lanes = node["connections"]
        assert set(lanes) == {0, 1}
        assert lanes[0]["session_id"] != lanes[1]["session_id"]
        assert all(lane["session_id"] and lane["partitions"] == 2 for lane in lanes.values())
        assert node["session_id"] == lanes[0]["session_id"]
        assert node["lanes"] == 2
    finally:
        script.release.set()
        await fetcher.close()


async def test_each_broker_splits_its_own_partitions() -> None:
    # Leaders alternate between two brokers, as Kafka places them: a split by partition number
    # alone would put each broker's partitions (0, 2 on one; 1, 3 on the other) on one connection.
    cluster = FakeCluster({tp: 1 + tp.partition % 2 for tp in TPS})
    script = ScriptedFetches()
    cluster.handlers[FETCH.key] = script
    fetcher = make_fetcher(cluster, assigned(*TPS), fetch_connections_per_broker=2)
    try:
        assert fetcher.send_fetches() == 4
        for _ in range(10):
            await asyncio.sleep(0)
        lanes = {lane: fetched_partitions(body) for lane, (_n, _v, body, _t)
                 in zip(cluster.lanes, cluster.fetches(), strict=True)}
        assert {lane: len(tps) for lane, tps in lanes.items()} == {(1, 0): 1, (1, 1): 1, (2, 0): 1, (2, 1): 1}
    finally:
        script.release.set()
        await fetcher.close()


async def test_one_connection_per_broker_by_default_while_not_busy() -> None:
    cluster = FakeCluster(dict.fromkeys(TPS, 1))
    script = ScriptedFetches()
    cluster.handlers[FETCH.key] = GrantingSessions(script)
    fetcher = make_fetcher(cluster, assigned(*TPS))
    try:
        assert fetcher.send_fetches() == 1
        for _ in range(10):
            await asyncio.sleep(0)
        [(_n, _v, body, _t)] = cluster.fetches()
        assert cluster.lanes == [(1, 0)]
        assert fetched_partitions(body) == set(TPS)
        assert "connections" not in fetcher.sessions().get(1, {})
        assert fetcher.sessions()[1]["lanes"] == 1
    finally:
        script.release.set()
        await fetcher.close()


# ---------------------------------------------------------------- "auto": a second lane while busy


class SessionBroker:
    """One broker with a backlog per partition (batches of 5 records) and real fetch sessions:
    each connection's session holds what its requests sent minus what they forgot, and every
    answer carries data for what the session holds, as a broker's does; with nothing to send it
    holds the long poll. It records each request's connection and whole set of partitions, and
    any partition asked on two connections at once; a session's closing request (epoch -1 with its
    id) apart, in ``ended``."""

    def __init__(self, cluster: FakeCluster, batches: dict[TopicPartition, int]) -> None:
        self.cluster = cluster
        self.ends = {tp: 5 * n for tp, n in batches.items()}
        self.held: dict[tuple[int, int], dict[TopicPartition, int]] = {}
        self.ids = itertools.count(100)
        self.in_flight: dict[tuple[int, int], set[TopicPartition]] = {}
        self.overlaps: list[tuple[tuple[int, int], set[TopicPartition]]] = []
        self.asked: list[tuple[tuple[int, int], frozenset[TopicPartition]]] = []
        self.ended: list[tuple[tuple[int, int], int]] = []

    def _apply(self, lane: tuple[int, int], body: dict[str, Any]) -> dict[TopicPartition, int]:
        sent = {TopicPartition(t["topic"], p["partition"]): p["fetch_offset"]
                for t in body["topics"] for p in t["partitions"]}
        if body["session_epoch"] in (0, -1):
            self.held[lane] = sent
        else:
            held = self.held[lane]
            for t in body["forgotten_topics_data"]:
                for p in t["partitions"]:
                    held.pop(TopicPartition(t["topic"], p), None)
            held.update(sent)
        return self.held[lane]

    async def __call__(self, node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        lane = self.cluster.lanes[-1]  # this request's: appended just before the handler runs
        if body["session_epoch"] == -1 and body["session_id"]:
            assert not body["topics"]
            assert body["max_wait_ms"] == 0
            self.held.pop(lane, None)
            self.ended.append((lane, body["session_id"]))
            return {**fetch_response({}), "session_id": 0}
        held = self._apply(lane, body)
        covered = set(held)
        for other, tps in self.in_flight.items():
            if tps & covered:
                self.overlaps.append((other, tps & covered))
        self.in_flight[lane] = covered
        self.asked.append((lane, frozenset(covered)))
        try:
            parts: dict[str, list[dict[str, Any]]] = {}
            for tp, offset in held.items():
                if offset < self.ends[tp]:
                    parts.setdefault(tp.topic, []).append(partition(tp.partition, batch(offset, 5)))
            if not parts:
                await asyncio.sleep(body["max_wait_ms"] / 1000)  # the long poll runs out
            session_id = body["session_id"] or next(self.ids)
            return {**fetch_response(parts), "session_id": session_id}
        finally:
            del self.in_flight[lane]


async def read_all(fetcher: Any, want: int, rounds: int = 200) -> dict[TopicPartition, list[int]]:
    got: dict[TopicPartition, list[int]] = {}
    for _ in range(rounds):
        if sum(map(len, got.values())) >= want:
            break
        fetcher.send_fetches()
        await settle(fetcher)
        for tp, records in fetcher.fetched_records(1000).items():
            got.setdefault(tp, []).extend(offsets_of(records))
    return got


async def test_auto_opens_a_second_lane_while_answers_are_busy_and_closes_it_after() -> None:
    from aiokafka_lite.fetch.lane_policy import OPEN_AFTER_BUSY, LanePolicy

    cluster = FakeCluster(dict.fromkeys(TPS, 1))
    broker = SessionBroker(cluster, dict.fromkeys(TPS, 12))
    cluster.handlers[FETCH.key] = broker
    # 100 bytes a partition: each answer's 5-record batches fill more than half of what it could carry.
    fetcher = make_fetcher(cluster, assigned(*TPS), max_partition_fetch_bytes=100,
                           lane_policy=LanePolicy("auto", close_after=3, close_after_seconds=0.0))
    try:
        got = await read_all(fetcher, 4 * 60)
        assert got == {tp: list(range(60)) for tp in TPS}  # each record once, in order
        lanes = [lane for lane, _tps in broker.asked]
        assert lanes[:OPEN_AFTER_BUSY] == [(1, 0)] * OPEN_AFTER_BUSY  # one lane until the third busy answer
        assert (1, 1) in lanes
        first_on_two = lanes.index((1, 1))
        # From then on each lane has its own half, in its session too (the moved ones forgotten).
        for lane, tps in broker.asked[first_on_two:]:
            assert tps <= ({TPS[0], TPS[2]} if lane == (1, 0) else {TPS[1], TPS[3]}), (lane, tps)
        assert fetcher.sessions()[1]["lanes"] == 2
        assert not broker.overlaps
        # Drained: the long polls run out, calm answers: back to one lane, which fetches everything.
        for _ in range(100):
            if fetcher.sessions()[1]["lanes"] == 1:
                break
            fetcher.send_fetches()
            await asyncio.sleep(0.05)
        assert fetcher.sessions()[1]["lanes"] == 1
        asked_at_close = len(broker.asked)
        for _ in range(6):
            fetcher.send_fetches()
            await asyncio.sleep(0.05)
        later = broker.asked[asked_at_close:]
        assert later
        assert all(lane == (1, 0) for lane, _tps in later[1:])  # lane 1 stops (its last poll may end)
        assert later[-1] == ((1, 0), frozenset(TPS))
        assert not broker.overlaps  # never one partition on two connections at once
        # Lane 1's session was closed on the broker once its last fetch was answered, and only it.
        connections = fetcher.sessions()[1]["connections"]
        assert set(connections) == {0, 1}
        assert connections[1]["session_id"] == 0
        assert connections[0]["session_id"] != 0
        assert [lane for lane, _id in broker.ended] == [(1, 1)]
    finally:
        await fetcher.close()


async def test_a_partition_moved_back_is_forgotten_by_its_old_lane_when_it_fetches_again() -> None:
    from aiokafka_lite.fetch.lane_policy import LanePolicy

    cluster = FakeCluster(dict.fromkeys(TPS, 1))
    broker = SessionBroker(cluster, dict.fromkeys(TPS, 12))
    cluster.handlers[FETCH.key] = broker
    policy = LanePolicy("auto", close_after=3, close_after_seconds=0.0)
    fetcher = make_fetcher(cluster, assigned(*TPS), max_partition_fetch_bytes=100, lane_policy=policy)
    try:
        await read_all(fetcher, 4 * 60)
        for _ in range(100):  # drained: back to one lane
            if policy.lanes(1) == 1:
                break
            fetcher.send_fetches()
            await asyncio.sleep(0.05)
        assert policy.lanes(1) == 1
        # New data everywhere: busy again, the second lane opens again (its old session was closed
        # when it retired: a new one) with its old half and the new offsets; lane 0 forgets that half.
        broker.ends = dict.fromkeys(TPS, 120)
        start = len(broker.asked)
        got = await read_all(fetcher, 4 * 60)
        assert got == {tp: list(range(60, 120)) for tp in TPS}
        again = broker.asked[start:]
        assert any(lane == (1, 1) for lane, _tps in again)
        first = next(i for i, (lane, _tps) in enumerate(again) if lane == (1, 1))
        for lane, tps in again[first:]:
            assert tps <= ({TPS[0], TPS[2]} if lane == (1, 0) else {TPS[1], TPS[3]}), (lane, tps)
        assert not broker.overlaps
    finally:
        await fetcher.close()


async def test_auto_stays_at_one_lane_for_a_consumer_that_keeps_up() -> None:
    cluster = FakeCluster(dict.fromkeys(TPS, 1))
    script = ScriptedFetches()
    for tp in TPS:  # a few small batches: far below half of 1 MiB a partition
        for base in range(0, 30, 3):
            script.add(tp, partition(tp.partition, batch(base, 3)))
    cluster.handlers[FETCH.key] = GrantingSessions(script)
    fetcher = make_fetcher(cluster, assigned(*TPS))
    try:
        got = await read_all(fetcher, 4 * 30)
        assert got == {tp: list(range(30)) for tp in TPS}
        assert set(cluster.lanes) == {(1, 0)}
        assert fetcher.sessions()[1]["lanes"] == 1
        assert "connections" not in fetcher.sessions()[1]
    finally:
        script.release.set()
        await fetcher.close()


async def test_the_planner_spreads_only_the_brokers_the_policy_gives_two_lanes() -> None:
    from aiokafka_lite.fetch.lane_policy import OPEN_AFTER_BUSY, LanePolicy
    from aiokafka_lite.fetch.requests import FetchPlanner

    leaders = {tp: 1 + tp.partition % 2 for tp in TPS} | {TopicPartition("t", 4): 1, TopicPartition("t", 5): 2}
    policy = LanePolicy("auto")
    planner = FetchPlanner(FakeCluster(leaders), assigned(*leaders), 0.1, policy)
    assert set(planner.plan(0.0, {}, (), (), {})) == {(1, 0), (2, 0)}
    for _ in range(OPEN_AFTER_BUSY):
        policy.observe(1, busy=True, now=0.0)
    plans = planner.plan(0.0, {}, (), (), {})
    assert {lane: sorted(tp.partition for tp in tps) for lane, tps in plans.items()} == {
        (1, 0): [0, 4], (1, 1): [2], (2, 0): [1, 3, 5]}
    # A partition with a fetch in flight on its old lane is planned on no lane.
    busy = {TopicPartition("t", 2)}
    plans = planner.plan(0.0, {}, (busy,), (), {})
    assert all(not (tps.keys() & busy) for tps in plans.values())
    # A lane with its own request in flight gets nothing; the other lanes go on.
    plans = planner.plan(0.0, {}, (), {(1, 1)}, {})
    assert set(plans) == {(1, 0), (2, 0)}
