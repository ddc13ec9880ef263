"""Leader hints (KIP-951) on the fetch path, with scripted Fetch v16 answers: a broker refusing a
partition (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER) names its new leader and that broker's
address; the next fetch goes there at once, without a metadata refresh or a backoff. A stale hint
or one naming an unreachable broker is ignored: the partition waits for a refresh, as before."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from aiokafka_lite._net.metadata import BrokerInfo, MetadataCache
from aiokafka_lite.errors import ERROR_CODE_BY_NAME
from aiokafka_lite.protocol.messages import FETCH
from aiokafka_lite.structs import TopicPartition

from ..net.test_metadata_hints import TOPIC_ID, metadata_response
from .test_fetcher import T0, FakeCluster, assigned, batch, make_fetcher, offsets_of, partition, settle

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("record_decoder")]
E = ERROR_CODE_BY_NAME


class HintingCluster(FakeCluster):
    """Leaders, epochs, topic ids and hints from a real MetadataCache."""

    def __init__(self, leader: int, epoch: int, brokers: tuple[int, ...] = (1, 2)) -> None:
        super().__init__({})
        self.metadata = MetadataCache()
        self.metadata.update(metadata_response({0: (leader, epoch)}, brokers), None, 0.0)

    def leader_for(self, tp: TopicPartition) -> int | None:
        return self.metadata.leader_for(tp)

    def leaders_for(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return self.metadata.leaders_for(tps)

    def leader_epoch_for(self, tp: TopicPartition) -> int | None:
        return self.metadata.leader_epoch_for(tp)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self.metadata.topic_id(topic)

    def apply_leader_hint(self, tp: TopicPartition, leader_id: int, leader_epoch: int,
                          endpoints: Mapping[int, Any]) -> bool:
        return self.metadata.apply_leader_hint(tp, leader_id, leader_epoch, endpoints)


class Brokers:
    """Broker 1 refuses T0 naming ``hint`` (leader id, epoch) and ``endpoints``; any other
    broker answers two records from offset 0, then holds the long poll."""

    def __init__(self, hint: tuple[int, int], endpoints: Iterable[int], error: str = "FENCED_LEADER_EPOCH") -> None:
        self.hint, self.endpoints, self.error = hint, list(endpoints), error
        self.asked: list[tuple[int, uuid.UUID, int, int]] = []  # node, topic id, current epoch, offset
        self.hold = asyncio.Event()

    async def __call__(self, node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        [topic] = body["topics"]
        [part] = topic["partitions"]
        self.asked.append((node_id, topic["topic_id"], part["current_leader_epoch"], part["fetch_offset"]))
        if node_id == 1:
            answer = partition(0, None, error=E[self.error], hw=-1)
            answer["current_leader"] = {"leader_id": self.hint[0], "leader_epoch": self.hint[1]}
        elif part["fetch_offset"] == 0:
            answer = partition(0, batch(0, 2), hw=2, lso=2)
        else:
            await self.hold.wait()
            answer = partition(0, b"", hw=2, lso=2)
        return {"error_code": 0, "session_id": 0, "responses": [{"topic_id": TOPIC_ID, "partitions": [answer]}],
                "node_endpoints": [{"node_id": n, "host": "127.0.0.1", "port": 9000 + n, "rack": None}
                                   for n in self.endpoints]}


@pytest.mark.parametrize("error", ["FENCED_LEADER_EPOCH", "NOT_LEADER_OR_FOLLOWER"])
async def test_the_named_leader_is_fetched_from_at_once_without_a_refresh(error: str) -> None:
    cluster = HintingCluster(leader=1, epoch=4, brokers=(1, 2))
    brokers = Brokers(hint=(3, 5), endpoints=[3], error=error)  # broker 3: known only from the answer
    cluster.handlers[FETCH.key] = brokers
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub, retry_backoff=30.0)  # a backoff would outlast the test
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert offsets_of(fetcher.fetched_records(100)[T0]) == [0, 1]
        assert brokers.asked[:2] == [(1, TOPIC_ID, 4, 0), (3, TOPIC_ID, 5, 0)]  # by topic id, the new epoch
        assert {v for _node, v, _body, _t in cluster.fetches()} == {16}
        assert not fetcher.metadata_refresh_needed
        assert cluster.refreshes == 0
        assert cluster.metadata.brokers[3] == BrokerInfo(3, "127.0.0.1", 9003, None)
        assert fetcher.fetch_sources() == {T0: 3}
    finally:
        brokers.hold.set()
        await fetcher.close()


@pytest.mark.parametrize(("hint", "endpoints", "why"), [
    ((2, 4), [2], "stale: not newer than the epoch we know"),
    ((3, 5), [2], "broker 3 is neither in the answer nor known"),
    ((-1, -1), [], "no hint (Fetch below v16)"),
])
async def test_an_unusable_hint_falls_back_to_a_metadata_refresh(
        hint: tuple[int, int], endpoints: list[int], why: str) -> None:
    cluster = HintingCluster(leader=1, epoch=4, brokers=(1, 2))
    brokers = Brokers(hint=hint, endpoints=endpoints)
    cluster.handlers[FETCH.key] = brokers
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert fetcher.fetched_records(100) == {}  # the error's turn: a refresh and a backoff
        assert fetcher.metadata_refresh_needed, why
        assert (cluster.leader_for(T0), cluster.leader_epoch_for(T0)) == (1, 4)
        assert 3 not in cluster.metadata.brokers
        await asyncio.sleep(0.05)  # the partition's retry backoff
        fetcher.send_fetches()
        await settle(fetcher)
        assert [node for node, *_ in brokers.asked] == [1, 1]  # still the old leader: metadata said so
    finally:
        brokers.hold.set()
        await fetcher.close()


async def test_without_a_topic_id_the_fetch_names_topics_and_gets_no_hint() -> None:
    cluster = HintingCluster(leader=1, epoch=4)
    cluster.metadata.update({**metadata_response({0: (1, 4)}), "topics": [
        {**metadata_response({0: (1, 4)})["topics"][0], "topic_id": uuid.UUID(int=0)}]}, None, 0.0)
    brokers = Brokers(hint=(-1, -1), endpoints=[])  # as a 4.3.1 broker answers v12 (see the module doc)

    async def by_name(node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        assert body["topics"][0]["topic"] == "t"
        answer = await brokers(node_id, body)
        answer["responses"][0]["topic"] = "t"
        return answer

    cluster.handlers[FETCH.key] = by_name
    fetcher = make_fetcher(cluster, assigned(T0))
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert {v for _node, v, _body, _t in cluster.fetches()} == {12}
        assert fetcher.fetched_records(100) == {}  # no hint: the old way
        assert fetcher.metadata_refresh_needed
    finally:
        brokers.hold.set()
        await fetcher.close()
