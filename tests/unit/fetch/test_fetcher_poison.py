"""A deserializer that raises on one record (a poison pill): the records before it are handed out,
then RecordDeserializationError, again and again, until a seek moves past it (KIP-1036).

Scripted bytes through the real Fetch schema, once per record decoder; the same on a real broker
is tests/integration/test_poison_pill.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from aiokafka_lite.errors import KafkaError, RecordDeserializationError
from aiokafka_lite.protocol.messages import FETCH
from aiokafka_lite.protocol.records.build import RecordSpec, build_record_batch
from aiokafka_lite.structs import TimestampType

from .test_fetcher import (
    T0,
    T1,
    FakeCluster,
    ScriptedFetches,
    assigned,
    batch,
    make_fetcher,
    offsets_of,
    partition,
    settle,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("record_decoder")]

TS = 1_700_000_000_000


def records_batch(base_offset: int, values: Sequence[bytes], *, keys: Sequence[bytes] | None = None,
                  epoch: int = 7) -> bytes:
    specs = [RecordSpec(b"k%d" % (base_offset + i) if keys is None else keys[i], v, (("h", b"%d" % i),),
                        TS + base_offset + i) for i, v in enumerate(values)]
    return build_record_batch(specs, base_offset=base_offset, base_timestamp=TS + base_offset,
                              partition_leader_epoch=epoch)


FIVE = [b"v0", b"v1", b"POISON", b"v3", b"v4"]


def refuse_poison(data: bytes | None) -> str:
    if data == b"POISON":
        raise ValueError("not a value we know")
    return (data or b"").decode()


def broker_answering(*parts: tuple[int, bytes]) -> FakeCluster:
    """A broker answering T0/T1 fetches with ``parts`` ((partition, records) each, used once)."""
    cluster = FakeCluster({T0: 1, T1: 1})
    cluster.handlers[FETCH.key] = script = ScriptedFetches()
    for index, data in parts:
        script.add(T1 if index else T0, partition(index, data))
    return cluster


def end_long_polls(cluster: FakeCluster) -> None:
    """Fetches with nothing scripted for them (the fetch ahead of a stuck partition) end empty."""
    script = cluster.handlers[FETCH.key]
    assert isinstance(script, ScriptedFetches)
    script.release.set()


async def test_records_before_a_bad_value_come_first_then_the_error_until_a_seek_past_it() -> None:
    cluster = broker_answering((0, records_batch(0, FIVE)), (0, records_batch(0, FIVE)))
    sub = assigned(T0)
    seen: list[bytes | None] = []

    def deserialize(data: bytes | None) -> str:
        seen.append(data)
        return refuse_poison(data)

    fetcher = make_fetcher(cluster, sub, value_deserializer=deserialize)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        records = fetcher.fetched_records(100)
        assert [(r.offset, r.value) for r in records[T0]] == [(0, "v0"), (1, "v1")]
        assert sub.state(T0).position == 2
        assert sub.state(T0).leader_epoch == 7
        errors = []
        for _ in range(3):  # the same error every time; the position stays on the record
            with pytest.raises(RecordDeserializationError) as info:
                fetcher.fetched_records(100)
            errors.append(info.value)
            assert sub.state(T0).position == 2
            assert fetcher.has_buffered()  # a poll() raises at once, without waiting
        err = errors[0]
        assert all(e is err for e in errors)
        assert len(seen) == 3  # v0, v1, POISON: each deserialized once, nothing after the bad one
        assert isinstance(err, KafkaError)
        assert (err.topic_partition, err.offset, err.origin) == (T0, 2, "value")
        assert (err.key, err.value, err.timestamp) == (b"k2", b"POISON", TS + 2)
        assert err.timestamp_type == TimestampType.CREATE_TIME
        assert list(err.headers) == [("h", b"2")]
        assert err.leader_epoch == 7
        assert isinstance(err.__cause__, ValueError)
        assert str(err) == ("cannot deserialize the value of the record at offset 2 of t-0 (ValueError: not a "
                            "value we know); seek to offset 3 to skip it")
        sub.seek(T0, err.offset + 1)
        end_long_polls(cluster)
        assert fetcher.fetched_records(100) == {}  # the data from before the seek is dropped
        fetcher.send_fetches()
        await settle(fetcher)
        assert [(r.offset, r.value) for r in fetcher.fetched_records(100)[T0]] == [(3, "v3"), (4, "v4")]
        assert sub.state(T0).position == 5
    finally:
        await fetcher.close()


async def test_a_bad_key_counts_against_max_records_like_any_record() -> None:
    keys = [b"a", b"b", b"\xff", b"d"]
    cluster = broker_answering((0, records_batch(0, [b"0", b"1"], keys=keys[:2]) +
                                records_batch(2, [b"2", b"3"], keys=keys[2:])))
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub, key_deserializer=bytes.decode)  # b"\xff" is no UTF-8
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert [r.key for r in fetcher.fetched_records(1)[T0]] == ["a"]
        assert sub.state(T0).position == 1
        assert [r.key for r in fetcher.fetched_records(5)[T0]] == ["b"]  # stops before the bad one
        assert sub.state(T0).position == 2
        with pytest.raises(RecordDeserializationError, match="the key of the record at offset 2 of t-0") as info:
            fetcher.fetched_records(5)
        err = info.value
        assert (err.offset, err.origin, err.key, err.value) == (2, "key", b"\xff", b"2")
        assert isinstance(err.__cause__, UnicodeDecodeError)
        assert sub.state(T0).position == 2
    finally:
        await fetcher.close()


async def test_a_bad_first_record_raises_at_once_and_the_position_stays() -> None:
    cluster = broker_answering((0, records_batch(5, [b"POISON", b"v6"])))
    sub = assigned(T0, position=5)
    fetcher = make_fetcher(cluster, sub, value_deserializer=refuse_poison)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        for _ in range(2):
            with pytest.raises(RecordDeserializationError) as info:
                fetcher.fetched_records(100)
            assert (info.value.offset, sub.state(T0).position) == (5, 5)
    finally:
        await fetcher.close()


async def test_the_first_failing_record_is_reported_whichever_deserializer_failed() -> None:
    # The value of offset 1 fails, the key of offset 3 too: offset 1 is the one reported.
    cluster = broker_answering((0, records_batch(0, [b"v0", b"POISON", b"v2", b"v3"],
                                               keys=[b"a", b"b", b"c", b"\xff"])))
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub, key_deserializer=bytes.decode, value_deserializer=refuse_poison)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert offsets_of(fetcher.fetched_records(100)[T0]) == [0]
        with pytest.raises(RecordDeserializationError) as info:
            fetcher.fetched_records(100)
        assert (info.value.offset, info.value.origin) == (1, "value")
    finally:
        await fetcher.close()


async def test_other_partitions_wait_behind_the_error_and_arrive_exactly_once_after_the_seek() -> None:
    # As in Java: the failing partition is next in line, so every call raises until the seek.
    cluster = broker_answering((0, records_batch(0, FIVE)), (1, batch(0, 4)), (0, records_batch(0, FIVE)))
    sub = assigned(T0, T1)
    fetcher = make_fetcher(cluster, sub, value_deserializer=refuse_poison)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        got: dict[int, list[int]] = {0: [], 1: []}
        raised = 0
        for _ in range(6):
            try:
                turn = fetcher.fetched_records(3)
            except RecordDeserializationError:
                raised += 1
                continue
            for tp, records in turn.items():
                got[tp.partition] += offsets_of(records)
        assert raised >= 4
        assert got[0] == [0, 1]
        assert sub.state(T0).position == 2
        sub.seek(T0, 3)
        end_long_polls(cluster)
        for _ in range(10):
            fetcher.send_fetches()
            await settle(fetcher)
            for tp, records in fetcher.fetched_records(3).items():
                got[tp.partition] += offsets_of(records)
            if len(got[0]) == 4 and len(got[1]) == 4:
                break
        assert got == {0: [0, 1, 3, 4], 1: [0, 1, 2, 3]}
        assert (sub.state(T0).position, sub.state(T1).position) == (5, 4)
    finally:
        await fetcher.close()


async def test_a_deserializers_own_cancelled_error_is_a_poison_record_not_a_cancellation() -> None:
    """Issue 39: a deserializer is plain code that nothing cancels; a CancelledError out of it must
    not reach the poll() caller as if that caller had been cancelled."""
    import asyncio

    cluster = broker_answering((0, records_batch(0, FIVE)))
    sub = assigned(T0)

    def deserialize(data: bytes | None) -> str:
        if data == b"POISON":
            raise asyncio.CancelledError
        return (data or b"").decode()

    fetcher = make_fetcher(cluster, sub, value_deserializer=deserialize)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert [r.offset for r in fetcher.fetched_records(100)[T0]] == [0, 1]
        with pytest.raises(RecordDeserializationError) as info:
            fetcher.fetched_records(100)
        assert info.value.offset == 2
        assert isinstance(info.value.__cause__, RuntimeError)
        assert isinstance(info.value.__cause__.__cause__, asyncio.CancelledError)
    finally:
        end_long_polls(cluster)
        await fetcher.close()
