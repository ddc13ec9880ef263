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

from .test_fetcher import FakeCluster, ScriptedFetches, assigned, batch, make_fetcher, offsets_of, partition, settle

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


async def test_one_connection_per_broker_by_default() -> None:
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
    finally:
        script.release.set()
        await fetcher.close()
