"""ShareFetcher against scripted ShareFetch/ShareAcknowledge answers (no broker, no sockets).

Every request and answer goes through the real schema encoder and decoder, so bodies are checked
against the ShareFetch/ShareAcknowledge specs and ``records`` arrive as memoryviews.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest

from aiokafka_lite.errors import ERROR_CODE_BY_NAME, BrokerError, IllegalStateError
from aiokafka_lite.fetch.share.fetcher import ShareFetcher
from aiokafka_lite.fetch.share.ledger import AckType
from aiokafka_lite.protocol.api import Api, decode_request, decode_response, encode_request, encode_response
from aiokafka_lite.protocol.messages import SHARE_ACKNOWLEDGE, SHARE_FETCH
from aiokafka_lite.protocol.records.build import build_control_batch, build_record_batch
from aiokafka_lite.structs import TopicPartition

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("record_decoder")]

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
TID = uuid.UUID(int=7)
E = ERROR_CODE_BY_NAME
NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


def batch(base: int, count: int) -> bytes:
    return build_record_batch([(b"k%d" % (base + i), b"v%d" % (base + i)) for i in range(count)], base_offset=base)


def part(index: int, records: bytes | None = None, acquired: Sequence[tuple[int, int, int]] = (), *,
         error: int = 0, ack_error: int = 0, leader: Mapping[str, int] = NO_LEADER) -> dict[str, Any]:
    return {"partition_index": index, "error_code": error, "error_message": None,
            "acknowledge_error_code": ack_error, "acknowledge_error_message": None, "current_leader": dict(leader),
            "records": records,
            "acquired_records": [{"first_offset": f, "last_offset": la, "delivery_count": d} for f, la, d in acquired]}


def fetch_answer(*parts: dict[str, Any], error: int = 0, lock_ms: int = 30_000,
                 endpoints: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": error, "error_message": None, "acquisition_lock_timeout_ms": lock_ms,
            "responses": [{"topic_id": TID, "partitions": list(parts)}] if parts else [],
            "node_endpoints": list(endpoints)}


def ack_answer(*codes: tuple[int, int], error: int = 0) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": error, "error_message": None, "acquisition_lock_timeout_ms": 30_000,
            "responses": [{"topic_id": TID, "partitions": [
                {"partition_index": p, "error_code": c, "error_message": None, "current_leader": NO_LEADER}
                for p, c in codes]}] if codes else [],
            "node_endpoints": []}


class FakeConnection:
    def __init__(self, cluster: FakeCluster, node_id: int) -> None:
        self.cluster, self.node_id = cluster, node_id

    def version_for(self, api: Api, client_max: int | None = None) -> int:
        return min(api.max_version, client_max or api.max_version, self.cluster.version)

    async def send(self, api: Api, version: int, body: Mapping[str, Any], *, timeout: float | None) -> dict[str, Any]:
        _v, _cid, decoded = decode_request(api, encode_request(api, version, 7, "test", body)[4:])
        self.cluster.requests.append((api.key, self.node_id, decoded))
        self.cluster.timeouts.append((api.key, timeout))
        self.cluster.activity.set()
        queue = self.cluster.answers[api.key]
        if api is SHARE_ACKNOWLEDGE and not queue:
            queue.append(ack_answer())  # unscripted: done at once (e.g. close's epoch -1)
        while not queue:  # a long poll with nothing new: wait like a broker
            await self.cluster.more.wait()
            self.cluster.more.clear()
        answer = queue.pop(0)
        return decode_response(api, version, encode_response(api, version, 7, answer)[4:])


class FakeCluster:
    def __init__(self, leaders: Mapping[TopicPartition, int]) -> None:
        self.leaders = dict(leaders)
        self.version = 2
        self.answers: dict[int, list[dict[str, Any]]] = {SHARE_FETCH.key: [], SHARE_ACKNOWLEDGE.key: []}
        self.requests: list[tuple[int, int, dict[str, Any]]] = []
        self.timeouts: list[tuple[int, float | None]] = []
        self.more = asyncio.Event()
        self.activity = asyncio.Event()  # a request went out, or metadata was refreshed
        self.hints: list[tuple[TopicPartition, int, int]] = []
        self.take_hints = False
        self.refreshes = 0

    def answer(self, api: Api, answer: dict[str, Any]) -> None:
        self.answers[api.key].append(answer)
        self.more.set()

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return TID if topic == "t" else None

    def apply_leader_hint(self, tp: TopicPartition, leader_id: int, leader_epoch: int,
                          endpoints: Mapping[int, Any]) -> bool:
        self.hints.append((tp, leader_id, leader_epoch))
        self.endpoints = dict(endpoints)
        if self.take_hints:
            self.leaders[tp] = leader_id
        return self.take_hints

    def leader_for(self, tp: TopicPartition) -> int | None:
        return self.leaders.get(tp)

    def leaders_for(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return {tp: self.leaders.get(tp) for tp in tps}

    def leader_epoch_for(self, tp: TopicPartition) -> int | None:
        return None

    async def connection(self, node_id: int, timeout: float | None, lane: int = 0) -> FakeConnection:
        return FakeConnection(self, node_id)

    async def refresh_metadata(self, topics: Sequence[str] | None, timeout: float | None) -> None:
        self.refreshes += 1
        self.activity.set()

    def sent(self, api: Api) -> list[dict[str, Any]]:
        return [body for key, _node, body in self.requests if key == api.key]


def fetcher_for(cluster: FakeCluster, **kwargs: Any) -> ShareFetcher:
    return ShareFetcher(cluster, group_id="g", member_id="m-1", max_wait_ms=100, request_timeout=5.0,
                        retry_backoff=0.01, **kwargs)


async def records_of(fetcher: ShareFetcher, max_records: int = 100) -> dict[TopicPartition, list[Any]]:
    await fetcher.wait_for_data(5.0)
    return fetcher.fetched_records(max_records)


async def until_requests(cluster: FakeCluster, api: Api, count: int) -> list[dict[str, Any]]:
    async with asyncio.timeout(5.0):
        while len(cluster.sent(api)) < count:
            cluster.activity.clear()
            await cluster.activity.wait()
    return cluster.sent(api)


def acks_in(body: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    return {p["partition_index"]: p["acknowledgement_batches"] for t in body["topics"] for p in t["partitions"]
            if p["acknowledgement_batches"]}


async def test_opens_a_session_hands_out_acquired_and_piggybacks_accepts() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    # T0's batch holds 0-9 but only 2-5 were acquired; 6 is a marker the broker acquired too.
    cluster.answer(SHARE_FETCH, fetch_answer(
        part(0, batch(0, 6) + build_control_batch(1, base_offset=6, producer_id=3), [(2, 6, 1)]),
        part(1, batch(0, 2), [(0, 1, 2)])))
    fetcher = fetcher_for(cluster)
    try:
        fetcher.assign([T0, T1])
        got = await records_of(fetcher)
        assert {tp: [(r.offset, r.value, r.delivery_count) for r in rs] for tp, rs in got.items()} == {
            T0: [(2, b"v2", 1), (3, b"v3", 1), (4, b"v4", 1), (5, b"v5", 1)], T1: [(0, b"v0", 2), (1, b"v1", 2)]}
        deadline = got[T0][0].acquisition_deadline - asyncio.get_running_loop().time()
        assert 25 < deadline <= 30  # now + acquisition_lock_timeout_ms
        [first] = cluster.sent(SHARE_FETCH)
        assert (first["group_id"], first["member_id"], first["share_session_epoch"]) == ("g", "m-1", 0)
        assert [(t["topic_id"], [p["partition_index"] for p in t["partitions"]]) for t in first["topics"]] == [
            (TID, [0, 1])]
        assert acks_in(first) == {}
        second = (await until_requests(cluster, SHARE_FETCH, 2))[1]  # sent when the buffer drained
        assert second["share_session_epoch"] == 1
        # the gap (the marker at 6) goes at once; the records handed out are the next poll's to accept
        assert acks_in(second) == {0: [{"first_offset": 6, "last_offset": 6, "acknowledge_types": [0]}]}
        assert fetcher.fetched_records(100) == {}  # the next poll accepts them
        cluster.answer(SHARE_FETCH, fetch_answer(part(0)))
        cluster.answer(SHARE_FETCH, fetch_answer(part(0), part(1)))
        third = (await until_requests(cluster, SHARE_FETCH, 3))[2]
        assert third["share_session_epoch"] == 2
        assert acks_in(third) == {0: [{"first_offset": 2, "last_offset": 5, "acknowledge_types": [1]}],
                                  1: [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [1]}]}
        assert third["forgotten_topics_data"] == []
        assert [p["partition_index"] for t in third["topics"] for p in t["partitions"]] == [0, 1]  # acks only
        await until_requests(cluster, SHARE_FETCH, 4)
        assert fetcher.take_acknowledgement_results() == {T0: None, T1: None}
    finally:
        await fetcher.close(1.0)


async def test_explicit_mode_refuses_more_until_each_record_is_decided() -> None:
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 4), [(0, 3, 1)])))
    fetcher = fetcher_for(cluster, explicit=True)
    try:
        fetcher.assign([T0])
        [r0, r1, r2, r3] = (await records_of(fetcher))[T0]
        with pytest.raises(IllegalStateError, match="not acknowledged"):
            fetcher.fetched_records(10)
        fetcher.acknowledge(r0, AckType.ACCEPT)
        fetcher.acknowledge(r1, AckType.RELEASE)
        fetcher.acknowledge(r2, AckType.REJECT)
        with pytest.raises(IllegalStateError, match="not acknowledged"):
            fetcher.fetched_records(10)
        fetcher.acknowledge(r3, AckType.ACCEPT)
        with pytest.raises(IllegalStateError, match="not awaiting"):
            fetcher.acknowledge(r3, AckType.ACCEPT)
        assert fetcher.fetched_records(10) == {}
        # the next fetch (started when the buffer drained) is built when its task runs: the decisions go in it
        second = (await until_requests(cluster, SHARE_FETCH, 2))[1]
        assert acks_in(second) == {0: [{"first_offset": 0, "last_offset": 3, "acknowledge_types": [1, 2, 3, 1]}]}
    finally:
        await fetcher.close(1.0)
    implicit = fetcher_for(cluster)
    with pytest.raises(IllegalStateError, match="explicit"):
        implicit.acknowledge(r0, AckType.ACCEPT)


async def test_explicit_mode_not_strict_hands_out_more_and_leaves_undecided_records_undecided() -> None:
    """The ShareConsumer keeps explicit mode's rule per task (strict=False): handing out more
    neither refuses nor accepts the records handed out before."""
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 3), [(0, 2, 1)])))
    fetcher = fetcher_for(cluster, explicit=True)
    try:
        fetcher.assign([T0])
        await fetcher.wait_for_data(10.0)
        [r0] = fetcher.fetched_records(1, strict=False)[T0]
        [r1, r2] = fetcher.fetched_records(10, strict=False)[T0]
        fetcher.acknowledge(r1, AckType.ACCEPT)
        fetcher.acknowledge(r0, AckType.RELEASE)  # still awaiting its decision: not accepted meanwhile
        fetcher.acknowledge(r2, AckType.REJECT)
        second = (await until_requests(cluster, SHARE_FETCH, 2))[1]
        assert acks_in(second) == {0: [{"first_offset": 0, "last_offset": 2, "acknowledge_types": [2, 1, 3]}]}
    finally:
        await fetcher.close(1.0)


async def test_session_not_found_starts_over_and_keeps_the_decisions() -> None:
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 2), [(0, 1, 1)])))
    fetcher = fetcher_for(cluster)
    try:
        fetcher.assign([T0])
        assert [r.offset for r in (await records_of(fetcher))[T0]] == [0, 1]
        await until_requests(cluster, SHARE_FETCH, 2)
        assert fetcher.fetched_records(10) == {}  # accepts 0-1
        cluster.answer(SHARE_FETCH, fetch_answer())
        cluster.answer(SHARE_FETCH, fetch_answer(error=E["INVALID_SHARE_SESSION_EPOCH"]))
        cluster.answer(SHARE_FETCH, fetch_answer(error=E["SHARE_SESSION_NOT_FOUND"]))
        cluster.answer(SHARE_FETCH, fetch_answer())
        bodies = await until_requests(cluster, SHARE_FETCH, 6)
        assert [b["share_session_epoch"] for b in bodies] == [0, 1, 2, 0, 0, 1]
        accepted = {0: [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [1]}]}
        assert acks_in(bodies[2]) == accepted  # refused whole with the session ...
        assert [acks_in(b) for b in bodies[3:5]] == [{}, {}]  # ... epoch 0 carries none ...
        assert acks_in(bodies[5]) == accepted  # ... so the new session's first acknowledgements do
        assert fetcher.take_acknowledgement_results() == {}
        cluster.answer(SHARE_FETCH, fetch_answer(part(0)))
        await until_requests(cluster, SHARE_FETCH, 7)
        assert fetcher.take_acknowledgement_results() == {T0: None}
        assert fetcher.sessions()[1]["resets"] == 2
    finally:
        await fetcher.close(1.0)


async def test_commit_sends_share_acknowledge_and_reports_per_partition() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 3), [(0, 2, 1)]), part(1, batch(5, 1), [(5, 5, 1)])))
    fetcher = fetcher_for(cluster, explicit=True)
    try:
        fetcher.assign([T0, T1])
        got = await records_of(fetcher)
        await until_requests(cluster, SHARE_FETCH, 2)  # the next fetch, holding its long poll
        for record in got[T0]:
            fetcher.acknowledge(record, AckType.ACCEPT)
        fetcher.acknowledge(got[T1][0], AckType.REJECT)
        cluster.answer(SHARE_ACKNOWLEDGE, ack_answer((0, 0), (1, E["INVALID_RECORD_STATE"])))
        cluster.answer(SHARE_FETCH, fetch_answer())
        results = await fetcher.commit(5.0)
        assert results[T0] is None
        assert isinstance(results[T1], BrokerError)
        assert results[T1].name == "INVALID_RECORD_STATE"
        [ack] = cluster.sent(SHARE_ACKNOWLEDGE)
        assert (ack["share_session_epoch"], ack["is_renew_ack"], acks_in(ack)) == (2, False, {
            0: [{"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]}],
            1: [{"first_offset": 5, "last_offset": 5, "acknowledge_types": [3]}]})
        assert await fetcher.commit(5.0) == {}  # nothing pending
    finally:
        await fetcher.close(1.0)


async def test_close_releases_unhanded_records_and_sends_epoch_minus_one() -> None:
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 5), [(0, 4, 1)])))
    fetcher = fetcher_for(cluster)
    fetcher.assign([T0])
    assert [r.offset for r in (await records_of(fetcher, 2))[T0]] == [0, 1]
    cluster.answer(SHARE_ACKNOWLEDGE, ack_answer((0, 0)))
    assert await fetcher.close(5.0) == {T0: None}
    [last] = cluster.sent(SHARE_ACKNOWLEDGE)
    assert last["share_session_epoch"] == -1
    assert acks_in(last) == {0: [{"first_offset": 0, "last_offset": 4, "acknowledge_types": [1, 1, 2, 2, 2]}]}
    assert fetcher.in_flight() == 0
    assert await fetcher.close(1.0) == {}  # idempotent



async def test_end_sessions_after_a_poll_lapse_sends_the_decisions_and_forgets_the_held_records() -> None:
    """The member left at its poll deadline: epoch -1 carries the decisions taken (not the held
    records: the broker releases them), the held records can no longer be acknowledged, and the
    next fetch opens a new session."""
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 4), [(0, 3, 1)])))
    fetcher = fetcher_for(cluster, explicit=True)
    try:
        fetcher.assign([T0])
        first, held, *_ = (await records_of(fetcher, 4))[T0]
        await until_requests(cluster, SHARE_FETCH, 2)  # the next long poll, in flight
        fetcher.acknowledge(first, AckType.ACCEPT)
        fetcher.assign([])  # what the member's leave does
        cluster.answer(SHARE_ACKNOWLEDGE, ack_answer((0, 0)))
        assert await fetcher.end_sessions(5.0) == {T0: None}
        final = [a for a in cluster.sent(SHARE_ACKNOWLEDGE) if a["share_session_epoch"] == -1]
        assert [acks_in(a) for a in final] == [{0: [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}]
        with pytest.raises(IllegalStateError, match="not awaiting acknowledgement"):
            fetcher.acknowledge(held, AckType.ACCEPT)
        fetcher.assign([T0])  # rejoined
        assert (await until_requests(cluster, SHARE_FETCH, 3))[-1]["share_session_epoch"] == 0
    finally:
        await fetcher.close(1.0)

async def test_assignment_changes_add_and_forget_partitions() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    fetcher = fetcher_for(cluster)
    try:
        fetcher.assign([T0, T1])
        await until_requests(cluster, SHARE_FETCH, 1)
        cluster.answer(SHARE_FETCH, fetch_answer())  # nothing: fetch on
        await until_requests(cluster, SHARE_FETCH, 2)
        fetcher.assign([T0])
        cluster.answer(SHARE_FETCH, fetch_answer())
        third = (await until_requests(cluster, SHARE_FETCH, 3))[2]
        assert third["share_session_epoch"] == 2
        assert third["topics"] == []
        assert third["forgotten_topics_data"] == [{"topic_id": TID, "partitions": [1]}]
    finally:
        await fetcher.close(1.0)


async def test_not_leader_takes_the_named_leader_or_refreshes_metadata() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    cluster.take_hints = True
    endpoint = {"node_id": 2, "host": "h2", "port": 9092, "rack": None}
    cluster.answer(SHARE_FETCH, fetch_answer(
        part(0, error=E["NOT_LEADER_OR_FOLLOWER"], leader={"leader_id": 2, "leader_epoch": 5}),
        part(1, error=E["UNKNOWN_TOPIC_OR_PARTITION"]), endpoints=[endpoint]))
    fetcher = fetcher_for(cluster)
    try:
        fetcher.assign([T0, T1])
        await until_requests(cluster, SHARE_FETCH, 3)
        assert cluster.hints[0] == (T0, 2, 5)
        assert (cluster.endpoints[2].host, cluster.endpoints[2].port) == ("h2", 9092)  # from node_endpoints
        assert {node for key, node, _ in cluster.requests[1:]} == {1, 2}  # T0 went to broker 2 at once
        async with asyncio.timeout(5.0):
            while cluster.refreshes == 0:
                cluster.activity.clear()
                await cluster.activity.wait()
        assert fetcher.sessions()[2]["opened"] == 1
    finally:
        await fetcher.close(1.0)


async def test_other_partition_errors_are_raised_once() -> None:
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, error=E["TOPIC_AUTHORIZATION_FAILED"])))
    fetcher = fetcher_for(cluster)
    try:
        fetcher.assign([T0])
        await fetcher.wait_for_data(5.0)
        with pytest.raises(BrokerError, match="TOPIC_AUTHORIZATION_FAILED"):
            fetcher.fetched_records(10)
        assert fetcher.fetched_records(10) == {}
    finally:
        await fetcher.close(1.0)


async def test_an_empty_answer_at_once_backs_off_instead_of_looping() -> None:
    cluster = FakeCluster({T0: 1})
    for _ in range(50):
        cluster.answers[SHARE_FETCH.key].append(fetch_answer())
    fetcher = ShareFetcher(cluster, group_id="g", member_id="m", max_wait_ms=500, retry_backoff=0.05)
    try:
        fetcher.assign([T0])
        await asyncio.sleep(0.3)
        assert 2 <= len(cluster.sent(SHARE_FETCH)) <= 8  # ~one per 50 ms backoff, not 50 at once
    finally:
        await fetcher.close(1.0)


@pytest.mark.parametrize("version", [1, 2])
async def test_renewals_go_alone_with_is_renew_ack_and_only_to_v2_brokers(version: int) -> None:
    cluster = FakeCluster({T0: 1})
    cluster.version = version
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 2), [(0, 1, 1)])))
    fetcher = fetcher_for(cluster, explicit=True)
    try:
        fetcher.assign([T0])
        first, second = (await records_of(fetcher))[T0]
        await until_requests(cluster, SHARE_FETCH, 2)
        fetcher.acknowledge(first, AckType.RENEW)
        fetcher.acknowledge(second, AckType.ACCEPT)
        cluster.answer(SHARE_ACKNOWLEDGE, ack_answer((0, 0)))
        results = await fetcher.commit(5.0)
        [ack] = cluster.sent(SHARE_ACKNOWLEDGE)
        if version == 2:
            assert results == {T0: None}
            assert ack["is_renew_ack"] is True
            assert acks_in(ack) == {0: [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [4, 1]}]}
        else:
            assert type(results[T0]).__name__ == "UnsupportedVersionError"
            assert acks_in(ack) == {0: [{"first_offset": 1, "last_offset": 1, "acknowledge_types": [1]}]}
        with pytest.raises(IllegalStateError, match="not acknowledged"):
            fetcher.fetched_records(10)  # a renewed record still awaits its decision
        fetcher.acknowledge(first, AckType.ACCEPT)
        assert fetcher.fetched_records(10) == {}
    finally:
        await fetcher.close(1.0)


async def test_a_broker_left_without_partitions_gets_the_decisions_alone() -> None:
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 2), [(0, 1, 1)])))
    fetcher = fetcher_for(cluster)
    try:
        fetcher.assign([T0])
        assert [r.offset for r in (await records_of(fetcher))[T0]] == [0, 1]
        await until_requests(cluster, SHARE_FETCH, 2)  # the next fetch, built before the decisions
        assert fetcher.fetched_records(10) == {}  # accepts 0-1
        cluster.answer(SHARE_FETCH, fetch_answer())  # broker 1's fetch in flight ends empty ...
        fetcher.assign([])  # ... and T0 is no longer ours: broker 1 has nothing to fetch
        [ack] = await until_requests(cluster, SHARE_ACKNOWLEDGE, 1)
        assert ack["share_session_epoch"] > 0
        assert acks_in(ack) == {0: [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [1]}]}
        async with asyncio.timeout(5.0):
            while not (results := fetcher.take_acknowledgement_results()):
                await fetcher.wait_for_data(0.01)
        assert results == {T0: None}
    finally:
        await fetcher.close(1.0)


async def test_every_request_is_bounded_and_close_cancels_the_long_poll() -> None:
    cluster = FakeCluster({T0: 1})
    fetcher = ShareFetcher(cluster, group_id="g", member_id="m", max_wait_ms=400, request_timeout=7.0)
    fetcher.assign([T0])
    await until_requests(cluster, SHARE_FETCH, 1)  # held by the silent fake broker
    assert fetcher.in_flight() == 1
    await fetcher.close(1.0)
    assert fetcher.in_flight() == 0
    # The request timeout plus the long poll, each; the cancelled fetch may have opened the session
    # on the broker, so close() ends it all the same (epoch -1).
    assert cluster.timeouts == [(SHARE_FETCH.key, 7.4), (SHARE_ACKNOWLEDGE.key, 7.4)]
    assert [a["share_session_epoch"] for a in cluster.sent(SHARE_ACKNOWLEDGE)] == [-1]
    assert fetcher.send_fetches() == 0  # closed


async def test_the_next_answer_is_fetched_while_the_last_records_go_out() -> None:
    """With two polls' worth (2 x max_records) or less buffered, the broker is asked again at once, the
    partition staying in the session (forgetting it would release what is buffered); that answer
    is handed out after the current one, and nothing more is asked while it waits."""
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 6), [(0, 5, 1)])))
    fetcher = fetcher_for(cluster, max_records=2)
    try:
        fetcher.assign([T0])
        assert [r.offset for r in (await records_of(fetcher, 1))[T0]] == [0]  # 5 left: more than 4
        assert len(cluster.sent(SHARE_FETCH)) == 1
        assert [r.offset for r in fetcher.fetched_records(1)[T0]] == [1]  # 4 left: ask again now
        cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(6, 3), [(6, 8, 1)])))
        second = (await until_requests(cluster, SHARE_FETCH, 2))[1]
        assert second["forgotten_topics_data"] == []
        assert acks_in(second) == {0: [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}
        for _ in range(500):  # until the second answer is stored (5 s at most)
            if not fetcher.in_flight():
                break
            await asyncio.sleep(0.01)
        assert len(cluster.sent(SHARE_FETCH)) == 2, "a second answer waits: no third request"
        assert [r.offset for r in fetcher.fetched_records(10)[T0]] == [2, 3, 4, 5]
        assert [r.offset for r in fetcher.fetched_records(10)[T0]] == [6, 7, 8]
    finally:
        await fetcher.close(1.0)


async def test_record_counts_acquired_records_and_those_whose_locks_lapsed_while_held() -> None:
    """Every acquired offset counts as acquired (also those given back at once, their partition
    revoked meanwhile); a handed-out record acquired again before its decision went counts as lapsed."""
    cluster = FakeCluster({T0: 1, T1: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 3), [(0, 2, 1)])))
    fetcher = fetcher_for(cluster, explicit=True)
    try:
        fetcher.assign([T0])
        got = (await records_of(fetcher))[T0]
        assert [(r.offset, r.delivery_count) for r in got] == [(0, 1), (1, 1), (2, 1)]
        fetcher.acknowledge(got[0], AckType.ACCEPT)  # 1 and 2 stay undecided past their locks
        await until_requests(cluster, SHARE_FETCH, 2)
        cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(1, 2), [(1, 2, 2)]), part(1, batch(0, 1), [(0, 0, 1)])))
        again = (await records_of(fetcher))[T0]
        assert [(r.offset, r.delivery_count) for r in again] == [(1, 2), (2, 2)]
        assert fetcher.record_counts() == {"records_acquired": 6, "records_lapsed": 2}  # T1's 1, not assigned
    finally:
        await fetcher.close(1.0)
