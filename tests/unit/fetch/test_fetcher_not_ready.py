"""A deserializer that must do I/O before it can decode a record (DeserializerNotReadyError, as a
schema registry deserializer meeting a new schema id): the records before it are handed out, the
record is not a poison record, the hand-out stops until its prepare(), and after it the record and
those behind it come exactly once (fetched again from the record, once the fetch ahead of the
dropped data is answered).

Scripted bytes through the real Fetch schema, once per record decoder; through a consumer's poll()
on a real broker and a real registry: tests/integration/test_schema_registry_poll.py.
"""

from __future__ import annotations

import pytest

from aiokafka_lite.errors import DeserializerNotReadyError, RecordDeserializationError

from .test_fetcher import T0, T1, assigned, make_fetcher, offsets_of, settle
from .test_fetcher_poison import broker_answering, end_long_polls, records_batch

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("record_decoder")]


class NeedsSchema(DeserializerNotReadyError):
    def __init__(self, deserializer: SchemaLike, schema: bytes) -> None:
        super().__init__(f"schema {schema!r} not prepared")
        self.deserializer, self.schema = deserializer, schema

    async def prepare(self, timeout: float) -> None:
        self.deserializer.prepared.add(self.schema)


class SchemaLike:
    """Values are b"<schema>:<text>"; a schema is known only once prepared."""

    def __init__(self, *prepared: bytes) -> None:
        self.prepared = set(prepared)
        self.seen: list[bytes | None] = []

    def __call__(self, data: bytes | None) -> str:
        self.seen.append(data)
        schema, _, text = (data or b"").partition(b":")
        if schema not in self.prepared:
            raise NeedsSchema(self, schema)
        return text.decode()


VALUES = [b"A:v0", b"A:v1", b"B:v2", b"B:v3", b"A:v4"]


async def test_records_before_an_unprepared_schema_come_first_then_the_rest_after_prepare_exactly_once() -> None:
    # The second answer is the refetch from the record that was not ready.
    cluster = broker_answering((0, records_batch(0, VALUES)), (0, records_batch(2, VALUES[2:])))
    sub = assigned(T0)
    deserializer = SchemaLike(b"A")
    fetcher = make_fetcher(cluster, sub, value_deserializer=deserializer)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        first = fetcher.fetched_records(100)
        assert [(r.offset, r.value) for r in first[T0]] == [(0, "v0"), (1, "v1")]
        assert sub.state(T0).position == 2  # on the record that was not ready: nothing skipped
        assert fetcher.not_ready_pending()
        not_ready = fetcher.take_not_ready()
        assert isinstance(not_ready, NeedsSchema)
        assert not_ready.schema == b"B"
        assert fetcher.take_not_ready() is None  # once
        assert not fetcher.not_ready_pending()
        assert not fetcher.has_buffered()  # its data was dropped: it is fetched again from offset 2
        await not_ready.prepare(1.0)
        end_long_polls(cluster)  # the fetch ahead of the dropped data (a broker's ends by fetch_max_wait_ms)
        fetcher.send_fetches()
        await settle(fetcher)
        rest = fetcher.fetched_records(100)
        assert [(r.offset, r.value) for r in rest[T0]] == [(2, "v2"), (3, "v3"), (4, "v4")]
        assert sub.state(T0).position == 5
        assert fetcher.take_not_ready() is None
    finally:
        await fetcher.close()


async def test_an_unprepared_first_record_hands_out_nothing_and_raises_nothing() -> None:
    cluster = broker_answering((0, records_batch(5, [b"B:v5", b"B:v6"])), (0, records_batch(5, [b"B:v5", b"B:v6"])))
    sub = assigned(T0, position=5)
    deserializer = SchemaLike()
    fetcher = make_fetcher(cluster, sub, value_deserializer=deserializer)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert fetcher.fetched_records(100) == {}
        assert fetcher.next_offsets() == {}  # the position did not move
        assert sub.state(T0).position == 5
        not_ready = fetcher.take_not_ready()
        assert not_ready is not None
        await not_ready.prepare(1.0)
        end_long_polls(cluster)  # the fetch ahead of the dropped data (a broker's ends by fetch_max_wait_ms)
        fetcher.send_fetches()
        await settle(fetcher)
        assert [r.value for r in fetcher.fetched_records(100)[T0]] == ["v5", "v6"]
    finally:
        await fetcher.close()


async def test_other_partitions_wait_for_the_preparation_then_lose_nothing() -> None:
    # Partition 1's records need the same schema: the hand-out stops at partition 0's first, so
    # partition 1's data is kept (not dropped and fetched again) and comes after the prepare().
    cluster = broker_answering((0, records_batch(0, [b"B:p0"])), (1, records_batch(0, [b"B:q0", b"B:q1"])),
                               (0, records_batch(0, [b"B:p0"])))
    sub = assigned(T0, T1)
    deserializer = SchemaLike()
    fetcher = make_fetcher(cluster, sub, value_deserializer=deserializer)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert fetcher.fetched_records(100) == {}
        not_ready = fetcher.take_not_ready()
        assert not_ready is not None
        tried = list(deserializer.seen)
        assert len(tried) == 1  # one partition tried, the other not touched
        await not_ready.prepare(1.0)
        got: dict[int, list[int]] = {0: [], 1: []}
        end_long_polls(cluster)
        for _ in range(10):
            fetcher.send_fetches()
            await settle(fetcher)
            for tp, records in fetcher.fetched_records(100).items():
                got[tp.partition] += offsets_of(records)
            if len(got[0]) == 1 and len(got[1]) == 2:
                break
        assert got == {0: [0], 1: [0, 1]}
        assert (sub.state(T0).position, sub.state(T1).position) == (1, 2)
        assert fetcher.take_not_ready() is None
    finally:
        await fetcher.close()


async def test_a_record_the_deserializer_then_refuses_is_a_poison_record() -> None:
    """prepare() found the value undecodable (as a schema id the registry does not know): the
    deserializer raises on the record when called again, and that is the poison-pill contract."""
    cluster = broker_answering((0, records_batch(0, [b"A:v0", b"X:v1", b"A:v2"])),
                               (0, records_batch(1, [b"X:v1", b"A:v2"])))
    sub = assigned(T0)
    deserializer = SchemaLike(b"A")

    class Unknown(NeedsSchema):
        async def prepare(self, timeout: float) -> None:
            pass  # stays unprepared: the next call raises a plain error

    def deserialize(data: bytes | None) -> str:
        if data == b"X:v1" and b"X" in deserializer.prepared:
            raise LookupError("schema X is not in the registry")
        try:
            return deserializer(data)
        except NeedsSchema as exc:
            deserializer.prepared.add(b"X")  # prepare() ran: it found X unknown
            raise Unknown(deserializer, exc.schema) from None

    fetcher = make_fetcher(cluster, sub, value_deserializer=deserialize)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert [r.value for r in fetcher.fetched_records(100)[T0]] == ["v0"]
        not_ready = fetcher.take_not_ready()
        assert not_ready is not None
        await not_ready.prepare(1.0)
        end_long_polls(cluster)  # the fetch ahead of the dropped data (a broker's ends by fetch_max_wait_ms)
        fetcher.send_fetches()
        await settle(fetcher)
        with pytest.raises(RecordDeserializationError) as info:
            fetcher.fetched_records(100)
        assert (info.value.offset, info.value.value) == (1, b"X:v1")
        assert isinstance(info.value.__cause__, LookupError)
        assert sub.state(T0).position == 1
    finally:
        await fetcher.close()
