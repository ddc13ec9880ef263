"""Fetcher and OffsetLookup against a scripted fake cluster (no broker, no sockets).

Every request and response goes through the real schema encoder/decoder, so request bodies are
checked against the Fetch/ListOffsets specs and ``records`` arrive as memoryviews, as from a socket.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import pytest

from aiokafka_lite.errors import (
    ERROR_CODE_BY_NAME,
    BrokerError,
    CorruptRecordError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from aiokafka_lite.fetch.fetcher import Fetcher
from aiokafka_lite.fetch.offset_lookup import OffsetLookup
from aiokafka_lite.fetch.requests import NAMES_FETCH_VERSION
from aiokafka_lite.protocol.api import Api, decode_request, decode_response, encode_request, encode_response
from aiokafka_lite.protocol.compression import Codec
from aiokafka_lite.protocol.messages import FETCH, LIST_OFFSETS
from aiokafka_lite.protocol.records.build import RecordSpec, build_control_batch, build_record_batch
from aiokafka_lite.protocol.records.decode import fetch_continuation
from aiokafka_lite.structs import ConsumerRecord, TopicPartition
from aiokafka_lite.subscription import ResetStrategy, SubscriptionState

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("record_decoder")]

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)
E = ERROR_CODE_BY_NAME

Handler = Callable[[int, dict[str, Any]], Awaitable[dict[str, Any]]]


class FakeConnection:
    def __init__(self, cluster: FakeCluster, node_id: int, lane: int = 0) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.lane = lane

    @property
    def closed(self) -> bool:
        return False

    def version_for(self, api: Api, client_max: int | None = None) -> int:
        top = api.max_version if client_max is None else min(api.max_version, client_max)
        return min(top, self.cluster.broker_max.get(api.key, api.max_version))

    async def send(self, api: Api, version: int, body: Mapping[str, Any], *,
                   timeout: float | None) -> dict[str, Any]:
        # Round-trip through the wire format: checks our body against the schema.
        _v, _cid, decoded = decode_request(api, encode_request(api, version, 7, "test", body)[4:])
        self.cluster.requests.append((api.key, self.node_id, version, decoded, timeout))
        self.cluster.lanes.append((self.node_id, self.lane))
        handler = self.cluster.handlers[api.key]
        response = await handler(self.node_id, decoded)
        return decode_response(api, version, encode_response(api, version, 7, response)[4:])


class FakeCluster:
    def __init__(self, leaders: Mapping[TopicPartition, int]) -> None:
        self.leaders = dict(leaders)
        self.leader_epochs: dict[TopicPartition, int] = {}
        self.handlers: dict[int, Handler] = {}
        self.requests: list[tuple[int, int, int, dict[str, Any], float | None]] = []
        self.lanes: list[tuple[int, int]] = []  # per request: (node id, which connection to it)
        self.broker_max: dict[int, int] = {}
        self.refreshes = 0
        self.on_refresh: Callable[[], None] | None = None
        self.connect_error: Exception | None = None
        self.topic_ids: dict[str, uuid.UUID] = {}  # none known: Fetch names topics (v12)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self.topic_ids.get(topic)

    def apply_leader_hint(self, tp: TopicPartition, leader_id: int, leader_epoch: int,
                          endpoints: Mapping[int, Any]) -> bool:
        return False  # test_fetcher_hints.py's cluster takes hints

    def leader_for(self, tp: TopicPartition) -> int | None:
        return self.leaders.get(tp)

    def leaders_for(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return {tp: self.leaders.get(tp) for tp in tps}

    def leader_epoch_for(self, tp: TopicPartition) -> int | None:
        return self.leader_epochs.get(tp)

    async def connection(self, node_id: int, timeout: float | None, lane: int = 0) -> FakeConnection:
        if self.connect_error is not None:
            raise self.connect_error
        return FakeConnection(self, node_id, lane)

    async def refresh_metadata(self, topics: Sequence[str] | None,
                               timeout: float | None) -> None:
        self.refreshes += 1
        if self.on_refresh is not None:
            self.on_refresh()

    def fetches(self) -> list[tuple[int, int, dict[str, Any], float | None]]:
        return [(node, v, body, t) for key, node, v, body, t in self.requests if key == FETCH.key]


def batch(base_offset: int, count: int, *, codec: int = Codec.NONE, prefix: bytes = b"v") -> bytes:
    specs = [RecordSpec(b"k%d" % (base_offset + i), prefix + b"%d" % (base_offset + i),
                        (("h", b"x"),), 1_700_000_000_000 + base_offset + i)
             for i in range(count)]
    return build_record_batch(specs, base_offset=base_offset, codec=codec,
                              base_timestamp=1_700_000_000_000 + base_offset)


def partition(index: int, records: bytes | None = b"", *, error: int = 0, hw: int = 100,
              lso: int = 100, log_start: int = 0) -> dict[str, Any]:
    return {"partition_index": index, "error_code": error, "high_watermark": hw,
            "last_stable_offset": lso, "log_start_offset": log_start, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": records}


def fetch_response(parts: Mapping[str, Iterable[dict[str, Any]]]) -> dict[str, Any]:
    return {"error_code": 0, "session_id": 0,
            "responses": [{"topic": topic, "partitions": list(ps)} for topic, ps in parts.items()]}


class ScriptedFetches:
    """Answers each Fetch with the next scripted data per partition; then holds the long poll."""

    def __init__(self) -> None:
        self.data: dict[TopicPartition, list[dict[str, Any]]] = {}
        self.release = asyncio.Event()

    def add(self, tp: TopicPartition, part: dict[str, Any]) -> None:
        self.data.setdefault(tp, []).append(part)

    async def __call__(self, node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        parts: dict[str, list[dict[str, Any]]] = {}
        for topic in body["topics"]:
            for p in topic["partitions"]:
                queue = self.data.get(TopicPartition(topic["topic"], p["partition"]))
                answer = _first_answer(queue or [], p["fetch_offset"])
                if answer is not None:
                    parts.setdefault(topic["topic"], []).append(answer)
        if not parts:
            await self.release.wait()  # a long poll with nothing new: wait like a broker
        return fetch_response(parts)


def _first_answer(queue: list[dict[str, Any]], offset: int) -> dict[str, Any] | None:
    """Like a broker: scripted data answers a fetch at an offset inside it; errors answer any."""
    for i, part in enumerate(queue):
        records = part.get("records")
        end = fetch_continuation(records) if records else None
        if end is None or int.from_bytes(records[:8], "big") <= offset < end[0]:
            return queue.pop(i)
    return None


def assigned(*tps: TopicPartition, position: int = 0,
             reset: ResetStrategy = ResetStrategy.EARLIEST) -> SubscriptionState:
    sub = SubscriptionState(default_reset=reset)
    sub.assign_manually(tps)
    for tp in tps:
        sub.seek(tp, position)
    return sub


def make_fetcher(cluster: FakeCluster, sub: SubscriptionState, **kwargs: Any) -> Fetcher:
    kwargs.setdefault("retry_backoff", 0.01)
    return Fetcher(cluster, sub, fetch_max_wait_ms=100, request_timeout=5.0, **kwargs)


async def settle(fetcher: Fetcher) -> None:
    await fetcher.wait_for_data(2.0)
    for _ in range(5):  # let the completing task run its bookkeeping
        await asyncio.sleep(0)


def offsets_of(records: list[ConsumerRecord]) -> list[int]:
    return [r.offset for r in records]


# ---------------------------------------------------------------------- fetching

async def test_fetch_request_and_positions_advance() -> None:
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, batch(0, 5) + batch(5, 5), hw=10, lso=10, log_start=0))
    cluster.handlers[FETCH.key] = script
    cluster.broker_max[FETCH.key] = 16
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub, client_rack="rack-a")
    try:
        assert fetcher.send_fetches() == 1
        assert fetcher.send_fetches() == 0  # one fetch per broker at a time
        await settle(fetcher)
        node, version, body, timeout = cluster.fetches()[0]
        assert (node, version) == (1, NAMES_FETCH_VERSION)  # no topic ids known
        assert timeout == pytest.approx(5.1)  # request timeout + max wait
        # A full fetch that asks for a session (KIP-227): id 0, epoch 0.
        assert (body["max_wait_ms"], body["session_id"], body["session_epoch"]) == (100, 0, 0)
        assert body["rack_id"] == "rack-a"
        [p] = body["topics"][0]["partitions"]
        assert (p["partition"], p["fetch_offset"], p["partition_max_bytes"]) == (0, 0, 1_048_576)
        assert fetcher.buffered_bytes() > 0
        records = fetcher.fetched_records(100)
        assert offsets_of(records[T0]) == list(range(10))
        first = records[T0][0]
        assert (first.key, first.value, list(first.headers)) == (b"k0", b"v0", [("h", b"x")])
        assert first.timestamp == 1_700_000_000_000
        state = sub.state(T0)
        assert (state.position, state.high_watermark, state.last_stable_offset) == (10, 10, 10)
        assert not fetcher.has_buffered()
        assert fetcher.buffered_bytes() == 0
        # While its data waits to be handed out, the partition is already fetched ahead from
        # where that data ends, so the consumer never waits a whole round trip.
        await asyncio.sleep(0.01)
        assert fetcher.in_flight() == 1
        assert fetcher.send_fetches() == 0  # still one fetch per broker
        assert cluster.fetches()[-1][2]["topics"][0]["partitions"][0]["fetch_offset"] == 10
    finally:
        await fetcher.close()


async def test_records_below_the_position_are_skipped_and_compression_decoded() -> None:
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, batch(0, 6, codec=Codec.ZSTD) + batch(6, 4, codec=Codec.LZ4)))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0, position=3)  # a compressed batch is returned whole, from offset 0
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert offsets_of(fetcher.fetched_records(100)[T0]) == list(range(3, 10))
        assert sub.state(T0).position == 10
    finally:
        await fetcher.close()


async def test_control_batch_and_compaction_gap_advance_the_position() -> None:
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    compacted = build_record_batch([RecordSpec(b"a", b"1", offset_delta=0)], base_offset=0,
                                   last_offset_delta=4)  # offsets 1..4 compacted away
    control = build_control_batch(1, base_offset=5, producer_id=7)
    script.add(T0, partition(0, compacted + control))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert offsets_of(fetcher.fetched_records(100)[T0]) == [0]
        assert sub.state(T0).position == 6  # past the gap and the commit marker
    finally:
        await fetcher.close()


async def test_max_records_and_round_robin_between_partitions() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, batch(0, 10)))
    script.add(T1, partition(1, batch(0, 10)))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0, T1)
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        turns = [fetcher.fetched_records(4) for _ in range(5)]
        assert [{tp: offsets_of(rs) for tp, rs in t.items()} for t in turns] == [
            {T0: [0, 1, 2, 3]},
            {T1: [0, 1, 2, 3]},
            {T0: [4, 5, 6, 7]},
            {T1: [4, 5, 6, 7]},
            {T0: [8, 9], T1: [8, 9]},
        ]
        assert (sub.state(T0).position, sub.state(T1).position) == (10, 10)
    finally:
        await fetcher.close()


async def test_data_fetched_before_a_seek_is_dropped() -> None:
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, batch(0, 10)))
    script.add(T0, partition(0, batch(3, 7)))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        sub.seek(T0, 3)
        assert fetcher.fetched_records(100) == {}
        assert not fetcher.has_buffered()
        script.release.set()  # the fetch ahead (from offset 10) ends its long poll empty-handed
        await settle(fetcher)  # ... and the next fetch starts from the new position by itself
        offsets = [body["topics"][0]["partitions"][0]["fetch_offset"] for _n, _v, body, _t in cluster.fetches()]
        assert offsets[:2] == [0, 10]
        assert 3 in offsets[2:]
        assert offsets_of(fetcher.fetched_records(100)[T0]) == list(range(3, 10))
    finally:
        await fetcher.close()


async def test_data_of_a_revoked_or_reassigned_partition_is_dropped() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, batch(0, 5)))
    script.add(T1, partition(1, batch(0, 5)))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0, T1)
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        sub.set_assignment([T1])  # T0 revoked; T1 kept: its data still counts (cooperative)
        sub.set_assignment([T0, T1])  # T0 assigned again: a new incarnation, the old data is stale
        got = fetcher.fetched_records(100)
        assert list(got) == [T1]
        assert offsets_of(got[T1]) == list(range(5))
        assert sub.state(T0).position is None
        assert fetcher.buffered_bytes() == 0
    finally:
        await fetcher.close()


async def test_data_of_a_partition_being_revoked_is_not_handed_out() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, batch(0, 5)))
    script.add(T1, partition(1, batch(0, 5)))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0, T1)
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        sub.set_pending_revocation([T0])  # its on_partitions_revoked runs: nothing more of it
        got = fetcher.fetched_records(100)
        assert list(got) == [T1]
        assert sub.state(T0).position == 0
        assert T0 not in sub.fetchable()
    finally:
        await fetcher.close()


async def test_paused_partition_is_not_fetched_and_its_buffer_waits_for_resume() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, batch(0, 3)))
    script.add(T1, partition(1, batch(0, 3)))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0, T1)
    sub.pause([T1])
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        _node, _v, body, _t = cluster.fetches()[0]
        assert [p["partition"] for p in body["topics"][0]["partitions"]] == [0]
        assert set(fetcher.fetched_records(100)) == {T0}
        # Buffered data of a partition paused after its fetch is kept but not handed out.
        sub.resume([T1])
        script.release.set()  # T0's fetch ahead ends its long poll; then T1 is fetched too
        await asyncio.sleep(0.05)
        sub.pause([T1])
        assert fetcher.fetched_records(100) == {}
        assert not fetcher.has_buffered()
        await fetcher.wait_for_data(0.05)  # paused data does not count: this waits
        sub.resume([T1])
        assert offsets_of(fetcher.fetched_records(100)[T1]) == [0, 1, 2]
    finally:
        await fetcher.close()


async def test_deserializers_are_applied() -> None:
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, batch(0, 2)))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub, key_deserializer=lambda k: k.decode() if k else None,
                           value_deserializer=lambda v: len(v or b""))
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        [r0, r1] = fetcher.fetched_records(10)[T0]
        assert (r0.key, r0.value, r1.key, r1.value, r1.offset) == ("k0", 2, "k1", 2, 1)
        assert isinstance(r0, ConsumerRecord)
    finally:
        await fetcher.close()


# ---------------------------------------------------------------------- errors

async def test_offset_out_of_range_requests_a_reset() -> None:
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, None, error=E["OFFSET_OUT_OF_RANGE"]))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0, position=500, reset=ResetStrategy.EARLIEST)
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert fetcher.fetched_records(100) == {}
        assert sub.state(T0).reset_to is ResetStrategy.EARLIEST
        assert sub.state(T0).position is None
        assert sub.fetchable() == []
    finally:
        await fetcher.close()


async def test_offset_out_of_range_without_reset_policy_raises() -> None:
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, None, error=E["OFFSET_OUT_OF_RANGE"]))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0, position=500, reset=ResetStrategy.NONE)
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        with pytest.raises(OffsetOutOfRangeError, match=r"fetch offset 500 .* t-0"):
            fetcher.fetched_records(100)
        assert sub.state(T0).position == 500
    finally:
        await fetcher.close()


@pytest.mark.parametrize("name", ["NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION",
                                  "FENCED_LEADER_EPOCH", "KAFKA_STORAGE_ERROR"])
async def test_leader_errors_flag_a_metadata_refresh(name: str) -> None:
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, None, error=E[name]))
    script.add(T0, partition(0, batch(0, 2)))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert fetcher.fetched_records(100) == {}
        assert fetcher.metadata_refresh_needed
        assert sub.state(T0).position == 0
        cluster.leaders[T0] = 2  # the refreshed metadata names a new leader
        await asyncio.sleep(0.02)  # the partition's retry backoff
        fetcher.send_fetches()
        await settle(fetcher)
        assert cluster.fetches()[-1][0] == 2
        assert offsets_of(fetcher.fetched_records(100)[T0]) == [0, 1]
    finally:
        await fetcher.close()


async def test_unknown_leader_flags_a_metadata_refresh() -> None:
    cluster = FakeCluster({})
    cluster.handlers[FETCH.key] = ScriptedFetches()
    fetcher = make_fetcher(cluster, assigned(T0))
    try:
        assert fetcher.send_fetches() == 0
        assert fetcher.metadata_refresh_needed
    finally:
        await fetcher.close()


async def test_authorization_failure_raises_broker_error() -> None:
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, None, error=E["TOPIC_AUTHORIZATION_FAILED"]))
    cluster.handlers[FETCH.key] = script
    fetcher = make_fetcher(cluster, assigned(T0))
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        with pytest.raises(BrokerError, match="TOPIC_AUTHORIZATION_FAILED") as info:
            fetcher.fetched_records(100)
        assert info.value.code == E["TOPIC_AUTHORIZATION_FAILED"]
    finally:
        await fetcher.close()


async def test_corrupt_batch_raises_after_the_good_records_and_does_not_advance() -> None:
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    bad = bytearray(batch(3, 3))
    bad[-1] ^= 0xFF  # breaks the CRC
    script.add(T0, partition(0, batch(0, 3) + bytes(bad)))
    script.add(T0, partition(0, bytes(bad)))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert offsets_of(fetcher.fetched_records(100)[T0]) == [0, 1, 2]
        with pytest.raises(CorruptRecordError, match="partition 0, batch base offset 3"):
            fetcher.fetched_records(100)
        assert sub.state(T0).position == 3
        script.release.set()  # the fetch ahead (past the corrupt batch) ends empty; the data
        await settle(fetcher)  # fetched from position 3 again meets the same corruption
        with pytest.raises(CorruptRecordError):
            fetcher.fetched_records(100)
        assert sub.state(T0).position == 3
    finally:
        await fetcher.close()


async def test_broker_reported_corruption_raises() -> None:
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, None, error=E["CORRUPT_MESSAGE"]))
    cluster.handlers[FETCH.key] = script
    fetcher = make_fetcher(cluster, assigned(T0, position=42))
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        with pytest.raises(CorruptRecordError, match="batch base offset 42") as info:
            fetcher.fetched_records(100)
        assert (info.value.topic, info.value.partition, info.value.offset) == ("t", 0, 42)
    finally:
        await fetcher.close()


async def test_error_met_after_other_partitions_records_is_raised_on_the_next_call() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, batch(0, 2)))
    script.add(T1, partition(1, None, error=E["TOPIC_AUTHORIZATION_FAILED"]))
    cluster.handlers[FETCH.key] = script
    fetcher = make_fetcher(cluster, assigned(T0, T1))
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert offsets_of(fetcher.fetched_records(100)[T0]) == [0, 1]
        with pytest.raises(BrokerError):
            fetcher.fetched_records(100)
        assert fetcher.fetched_records(100) == {}  # raised once only
    finally:
        await fetcher.close()


async def test_connection_error_is_retried_without_reaching_the_caller() -> None:
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, batch(0, 2)))
    cluster.handlers[FETCH.key] = script
    cluster.connect_error = KafkaConnectionError("node 1 went away")
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await fetcher.wait_for_data(2.0)
        assert fetcher.metadata_refresh_needed
        assert fetcher.fetched_records(100) == {}  # network trouble is retried, as Java's poll does
        cluster.connect_error = None
        assert fetcher.send_fetches() == 0 or fetcher.in_flight() == 1  # backoff, or its timer fired
        await settle(fetcher)  # the retry timer restarts the fetch after the backoff
        assert offsets_of(fetcher.fetched_records(100)[T0]) == [0, 1]
    finally:
        await fetcher.close()


async def test_wait_for_data_returns_on_timeout_without_raising() -> None:
    cluster = FakeCluster({T0: 1})
    cluster.handlers[FETCH.key] = ScriptedFetches()  # nothing to fetch: long polls hang
    fetcher = make_fetcher(cluster, assigned(T0))
    try:
        fetcher.send_fetches()
        loop = asyncio.get_running_loop()
        began = loop.time()
        await fetcher.wait_for_data(0.05)
        assert 0.04 <= loop.time() - began < 1.0
        assert fetcher.in_flight() == 1
    finally:
        await fetcher.close()


async def test_close_cancels_in_flight_fetches_and_is_idempotent() -> None:
    cluster = FakeCluster({T0: 1, T1: 2})
    started = asyncio.Event()

    async def hang(node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    cluster.handlers[FETCH.key] = hang
    fetcher = make_fetcher(cluster, assigned(T0, T1))
    assert fetcher.send_fetches() == 2
    tasks = list(fetcher._in_flight.values())
    await started.wait()
    await fetcher.close()
    assert all(t.cancelled() for t in tasks)
    assert fetcher.in_flight() == 0
    await fetcher.close()
    assert fetcher.send_fetches() == 0
    assert fetcher.fetched_records(100) == {}  # cancellation by close() is not stored as an error


async def test_close_propagates_the_callers_cancellation() -> None:
    cluster = FakeCluster({T0: 1})

    async def slow_to_die(node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.shield(asyncio.sleep(0.2))
        raise AssertionError("unreachable")

    cluster.handlers[FETCH.key] = slow_to_die
    fetcher = make_fetcher(cluster, assigned(T0))
    fetcher.send_fetches()
    await asyncio.sleep(0.01)
    closer = asyncio.create_task(fetcher.close())
    await asyncio.sleep(0.01)
    closer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closer
    await fetcher.close()  # a second close waits for the task properly
    assert fetcher.in_flight() == 0


# ---------------------------------------------------------------------- offsets

def list_offsets_handler(answers: dict[TopicPartition, list[tuple[int, int, int]]]) -> Handler:
    """Per partition, a queue of (error_code, offset, timestamp) answers."""

    async def handle(node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        topics = []
        for topic in body["topics"]:
            parts = []
            for p in topic["partitions"]:
                code, offset, ts = answers[TopicPartition(topic["name"], p["partition_index"])].pop(0)
                parts.append({"partition_index": p["partition_index"], "error_code": code,
                              "timestamp": ts, "offset": offset, "leader_epoch": -1})
            topics.append({"name": topic["name"], "partitions": parts})
        return {"topics": topics}

    return handle


async def test_list_offsets_sends_one_request_per_leader() -> None:
    cluster = FakeCluster({T0: 1, T1: 2, T2: 1})
    cluster.handlers[LIST_OFFSETS.key] = list_offsets_handler(
        {T0: [(0, 10, -1)], T1: [(0, 20, -1)], T2: [(0, 30, -1)]})
    lookup = OffsetLookup(cluster, isolation_level=1, retry_backoff=0.01)
    assert await lookup.end_offsets([T0, T1, T2], 5.0) == {T0: 10, T1: 20, T2: 30}
    sent = sorted((node, body["replica_id"], body["isolation_level"],
                   sorted(p["partition_index"] for p in body["topics"][0]["partitions"]),
                   {p["timestamp"] for p in body["topics"][0]["partitions"]})
                  for _key, node, _v, body, _t in cluster.requests)
    assert sent == [(1, -1, 1, [0, 2], {-1}), (2, -1, 1, [1], {-1})]


async def test_list_offsets_retries_retriable_errors_after_a_refresh() -> None:
    cluster = FakeCluster({T0: 1})
    cluster.handlers[LIST_OFFSETS.key] = list_offsets_handler(
        {T0: [(E["NOT_LEADER_OR_FOLLOWER"], -1, -1), (E["OFFSET_NOT_AVAILABLE"], -1, -1), (0, 0, -1)]})
    cluster.on_refresh = lambda: cluster.leaders.update({T0: 3})
    lookup = OffsetLookup(cluster, retry_backoff=0.01)
    assert await lookup.beginning_offsets([T0], 5.0) == {T0: 0}
    assert cluster.refreshes == 2
    assert [node for _k, node, *_ in cluster.requests] == [1, 3, 3]
    assert cluster.requests[0][3]["topics"][0]["partitions"][0]["timestamp"] == -2


async def test_list_offsets_times_out_with_kafka_timeout_error() -> None:
    cluster = FakeCluster({T0: 1})
    cluster.handlers[LIST_OFFSETS.key] = list_offsets_handler(
        {T0: [(E["LEADER_NOT_AVAILABLE"], -1, -1)] * 1000})
    lookup = OffsetLookup(cluster, retry_backoff=0.01)
    with pytest.raises(KafkaTimeoutError, match="t-0"):
        await lookup.end_offsets([T0], 0.1)


async def test_list_offsets_fatal_error_raises_broker_error() -> None:
    cluster = FakeCluster({T0: 1})
    cluster.handlers[LIST_OFFSETS.key] = list_offsets_handler(
        {T0: [(E["TOPIC_AUTHORIZATION_FAILED"], -1, -1)]})
    with pytest.raises(BrokerError, match="TOPIC_AUTHORIZATION_FAILED"):
        await OffsetLookup(cluster).end_offsets([T0], 1.0)


async def test_offsets_for_times_gives_none_when_no_record_is_that_late() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    cluster.handlers[LIST_OFFSETS.key] = list_offsets_handler(
        {T0: [(0, 7, 1_700_000_000_007)], T1: [(0, -1, -1)]})
    found = await OffsetLookup(cluster).offsets_for_times({T0: 1_700_000_000_005, T1: 1_800_000_000_000}, 1.0)
    assert found == {T0: (7, 1_700_000_000_007), T1: None}
    with pytest.raises(ValueError, match="timestamps >= 0"):
        await OffsetLookup(cluster).offsets_for_times({T0: -1}, 1.0)


async def test_reset_positions_resolves_pending_resets() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    cluster.handlers[LIST_OFFSETS.key] = list_offsets_handler({T0: [(0, 5, -1)], T1: [(0, 50, -1)]})
    sub = assigned(T0, T1)
    sub.request_reset(T0, ResetStrategy.EARLIEST)
    sub.request_reset(T1, ResetStrategy.LATEST)
    await OffsetLookup(cluster).reset_positions(sub, 1.0)
    assert (sub.state(T0).position, sub.state(T1).position) == (5, 50)
    assert sub.needing_reset() == []
    stamps = {p["partition_index"]: p["timestamp"] for p in cluster.requests[0][3]["topics"][0]["partitions"]}
    assert stamps == {0: -2, 1: -1}


async def test_reset_positions_with_policy_none_raises_naming_partitions() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    sub = assigned(T0, T1, reset=ResetStrategy.NONE)
    sub.request_reset(T1)
    with pytest.raises(NoOffsetForPartitionError, match="t-1"):
        await OffsetLookup(cluster).reset_positions(sub, 1.0)
    assert cluster.requests == []


async def test_a_fetch_that_brought_nothing_starts_the_next_by_itself() -> None:
    cluster = FakeCluster({T0: 1})
    answers = [partition(0, b"", hw=7, lso=7, log_start=2), partition(0, batch(0, 3))]

    async def respond(node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        if not answers:
            await asyncio.Event().wait()
        if len(answers) == 2:
            await asyncio.sleep(0.06)  # the broker holds the long poll (max_wait_ms=100) ...
        return fetch_response({"t": [answers.pop(0)]})  # ... then answers with nothing new

    cluster.handlers[FETCH.key] = respond
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub, retry_backoff=5.0)  # a backoff would fail the test
    try:
        assert fetcher.send_fetches() == 1
        await settle(fetcher)
        offsets = [body["topics"][0]["partitions"][0]["fetch_offset"] for _n, _v, body, _t in cluster.fetches()]
        assert offsets[:2] == [0, 0]  # the second fetch started by itself, without a backoff
        assert offsets[2:] in ([], [3])  # then, maybe already, the fetch ahead
        state = sub.state(T0)
        assert (state.high_watermark, state.last_stable_offset, state.log_start_offset) == (7, 7, 2)
        assert offsets_of(fetcher.fetched_records(100)[T0]) == [0, 1, 2]
    finally:
        await fetcher.close()


async def test_preferred_read_replica_is_used_and_dropped_when_it_fails() -> None:
    cluster = FakeCluster({T0: 1})
    redirect = partition(0, b"")
    redirect["preferred_read_replica"] = 2
    answers = {1: [redirect, partition(0, batch(0, 1))],
               2: [partition(0, None, error=E["OFFSET_OUT_OF_RANGE"])]}

    async def respond(node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        if not answers[node_id]:
            await asyncio.Event().wait()
        return fetch_response({"t": [answers[node_id].pop(0)]})

    cluster.handlers[FETCH.key] = respond
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub, client_rack="r1")
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert [node for node, *_ in cluster.fetches()] == [1, 2]
        # A follower that cannot serve the offset sends us back to the leader, without a reset.
        assert fetcher.fetched_records(100) == {}
        assert sub.state(T0).reset_to is None
        fetcher.send_fetches()
        await settle(fetcher)
        assert [node for node, *_ in cluster.fetches()][:3] == [1, 2, 1]
        assert offsets_of(fetcher.fetched_records(100)[T0]) == [0]
    finally:
        await fetcher.close()


async def test_an_empty_answer_that_came_at_once_is_followed_after_a_backoff() -> None:
    cluster = FakeCluster({T0: 1})
    answers = [partition(0, b""), partition(0, batch(0, 1))]

    async def respond(node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        if not answers:
            await asyncio.Event().wait()
        return fetch_response({"t": [answers.pop(0)]})  # no long poll: a busy loop if chained

    cluster.handlers[FETCH.key] = respond
    fetcher = make_fetcher(cluster, assigned(T0), retry_backoff=0.2)
    try:
        fetcher.send_fetches()
        await asyncio.sleep(0.1)
        assert len(cluster.fetches()) == 1
        assert fetcher.send_fetches() == 0  # the broker is backed off
        await fetcher.wait_for_data(2.0)
        assert len(cluster.fetches()) == 2
        assert offsets_of(fetcher.fetched_records(10)[T0]) == [0]
    finally:
        await fetcher.close()


async def test_fetch_ahead_continues_the_buffered_data_and_buffers_at_most_two_fetches() -> None:
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, batch(0, 5)))
    script.add(T0, partition(0, batch(5, 5)))
    script.add(T0, partition(0, batch(10, 5)))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        for _ in range(20):  # the fetch ahead (from offset 5) completes by itself
            await asyncio.sleep(0.01)
        offsets = [body["topics"][0]["partitions"][0]["fetch_offset"] for _n, _v, body, _t in cluster.fetches()]
        assert offsets == [0, 5]  # two fetches buffered: no third until one is handed out
        assert fetcher.in_flight() == 0
        assert offsets_of(fetcher.fetched_records(3)[T0]) == [0, 1, 2]
        assert offsets_of(fetcher.fetched_records(100)[T0]) == [3, 4]
        assert fetcher.send_fetches() == 1  # as poll() does: the first is used up, fetch ahead again
        for _ in range(5):
            await asyncio.sleep(0)  # let the fetch task reach the broker
        assert cluster.fetches()[-1][2]["topics"][0]["partitions"][0]["fetch_offset"] == 10
        assert offsets_of(fetcher.fetched_records(100)[T0]) == list(range(5, 10))
        await settle(fetcher)
        assert offsets_of(fetcher.fetched_records(100)[T0]) == list(range(10, 15))
        assert sub.state(T0).position == 15
    finally:
        await fetcher.close()


# ---------------------------------------------------------------------- fetch sessions (KIP-227)

async def test_a_session_error_is_no_error_to_the_caller_and_a_full_fetch_follows() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    script = ScriptedFetches()
    script.add(T0, partition(0, batch(0, 3)))
    answers = iter([{"error_code": 70, "session_id": 0, "responses": []}])  # FETCH_SESSION_ID_NOT_FOUND

    async def granting(node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        scripted = next(answers, None)
        if scripted is not None:
            return scripted
        return {**await script(node_id, body), "session_id": 5}

    cluster.handlers[FETCH.key] = granting
    fetcher = make_fetcher(cluster, assigned(T0, T1))
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        records = fetcher.fetched_records(100)  # no error raised: the session error was handled
        assert offsets_of(records[T0]) == [0, 1, 2]
        (_n, _v, first, _t), (_n2, _v2, second, _t2) = cluster.fetches()[:2]
        assert (first["session_id"], first["session_epoch"]) == (0, 0)
        assert (second["session_id"], second["session_epoch"]) == (0, 0)  # full again, nothing to close
        assert fetcher.sessions()[1]["session_id"] == 5
        fetcher.send_fetches()  # T0 moved to 3, T1 did not: only T0 is named
        for _ in range(5):
            await asyncio.sleep(0)
        third = cluster.fetches()[2][2]
        assert (third["session_id"], third["session_epoch"]) == (5, 1)
        assert [(t["topic"], [p["partition"] for p in t["partitions"]]) for t in third["topics"]] == [("t", [0])]
        assert third["forgotten_topics_data"] == []
    finally:
        script.release.set()
        await fetcher.close()

