"""A poison pill on a real broker (Tansu, and Apache Kafka as the reference): a deserializer raises
on one record; the records before it are delivered, then RecordDeserializationError from every poll
until the application seeks past it; commits never go past it; other partitions lose nothing.
Scripted-byte cases: tests/unit/fetch/test_fetcher_poison.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from aiokafka_lite import Consumer, ConsumerRecord, TopicPartition
from aiokafka_lite.errors import RecordDeserializationError
from aiokafka_lite.protocol.native import DecoderName
from aiokafka_lite.testing.helpers import create_topic, produce
from tests.decoders import decoder_in_use

from ._consumers import poll_until

pytestmark = pytest.mark.asyncio

FIVE = ["v0", "v1", "POISON", "v3", "v4"]


@pytest.fixture(params=[pytest.param(kind, marks=pytest.mark.broker(kind), id=kind) for kind in ("tansu", "kafka4")])
def broker(request: pytest.FixtureRequest) -> Any:
    """Tansu (fast to start), and Apache Kafka 4.x, the reference."""
    return request.getfixturevalue({"tansu": "tansu_broker", "kafka4": "apache_kafka_broker"}[request.param])


@pytest.fixture(params=["native", "python"])
def decoder(request: pytest.FixtureRequest) -> Iterator[DecoderName]:
    with decoder_in_use(request.param) as name:
        yield name


def refuse_poison(data: bytes | None) -> str:
    if data == b"POISON":
        raise ValueError("poison")
    return (data or b"").decode()


def settings(broker: Any, group: str, **extra: Any) -> dict[str, Any]:
    return dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                enable_auto_commit=False, **extra)


async def errors_from_polls(consumer: Consumer, polls: int) -> list[RecordDeserializationError]:
    """The error each of ``polls`` polls raises (each must raise)."""
    errors = []
    for _ in range(polls):
        with pytest.raises(RecordDeserializationError) as info:
            await consumer.poll(timeout=10)
        errors.append(info.value)
    return errors


async def check_stuck_then_skip(consumer: Consumer, tp: TopicPartition, origin: str) -> RecordDeserializationError:
    """v0, v1, then the error (again and again) on offset 2; commit stops there; a seek goes past."""
    got = await poll_until(consumer, lambda got: len(got) >= 2, timeout=30)
    assert [(r.offset, r.key if origin == "key" else r.value) for r in got] == [(0, "v0"), (1, "v1")]
    first, *again = await errors_from_polls(consumer, 3)
    assert (first.topic_partition, first.offset, first.origin) == (tp, 2, origin)
    assert (first.key if origin == "key" else first.value) == b"POISON"
    assert isinstance(first.__cause__, ValueError)
    assert all((e.offset, e.origin) == (2, origin) for e in again)
    assert await consumer.position(tp) == 2
    await consumer.commit()
    assert (await consumer.committed([tp]))[tp].offset == 2  # type: ignore[union-attr]
    consumer.seek(tp, first.offset + 1)
    rest = await poll_until(consumer, lambda got: len(got) >= 2, timeout=30)
    assert [(r.offset, r.key if origin == "key" else r.value) for r in rest] == [(3, "v3"), (4, "v4")]
    assert await consumer.position(tp) == 5
    return first


async def test_a_value_that_fails_to_deserialize_is_reported_until_skipped(
        broker: Any, unique_topic: str, unique_group: str, decoder: str) -> None:
    create_topic(broker, unique_topic)
    produce(broker, unique_topic, [(f"k{i}", v) for i, v in enumerate(FIVE)], enable_idempotence=True)
    tp = TopicPartition(unique_topic, 0)
    async with Consumer(**settings(broker, unique_group, value_deserializer=refuse_poison)) as consumer:
        consumer.assign([tp])
        err = await check_stuck_then_skip(consumer, tp, "value")
        assert consumer.metrics()["record_decoder"] == decoder
    assert (err.key, err.timestamp_type) == (b"k2", 0)
    assert err.timestamp > 0
    assert f"value of the record at offset 2 of {unique_topic}-0 (ValueError: poison)" in str(err)


async def test_a_key_that_fails_to_deserialize_is_reported_until_skipped(
        broker: Any, unique_topic: str, unique_group: str) -> None:
    create_topic(broker, unique_topic)
    produce(broker, unique_topic, [(v, f"value-{i}") for i, v in enumerate(FIVE)], enable_idempotence=True)
    tp = TopicPartition(unique_topic, 0)
    async with Consumer(**settings(broker, unique_group, key_deserializer=refuse_poison)) as consumer:
        consumer.assign([tp])
        err = await check_stuck_then_skip(consumer, tp, "key")
    assert err.value == b"value-2"


async def test_the_other_partitions_records_all_arrive_exactly_once(
        broker: Any, unique_topic: str, unique_group: str) -> None:
    create_topic(broker, unique_topic, partitions=2)
    produce(broker, unique_topic, [{"value": v, "partition": 0} for v in FIVE] +
            [{"value": f"w{i}", "partition": 1} for i in range(50)], enable_idempotence=True)
    tps = [TopicPartition(unique_topic, p) for p in (0, 1)]
    got: list[ConsumerRecord] = []
    skipped = []
    async with Consumer(**settings(broker, unique_group, value_deserializer=refuse_poison,
                                   max_poll_records=7)) as consumer:
        consumer.assign(tps)
        for _ in range(200):
            try:
                got.extend(await consumer.poll(timeout=2))
            except RecordDeserializationError as err:  # the dead-letter recipe: note it, seek past
                skipped.append((err.topic_partition, err.offset))
                consumer.seek(err.topic_partition, err.offset + 1)
            if len(got) >= 54:
                break
        assert not await consumer.poll(timeout=0.5)  # nothing more, nothing twice
    assert skipped == [(tps[0], 2)]
    assert [r.value for r in got if r.partition == 0] == ["v0", "v1", "v3", "v4"]
    assert [r.value for r in got if r.partition == 1] == [f"w{i}" for i in range(50)]


async def test_async_for_raises_it_out_of_the_loop_after_the_records_before_it(
        tansu_broker: Any, unique_topic: str, unique_group: str) -> None:
    create_topic(tansu_broker, unique_topic)
    produce(tansu_broker, unique_topic, [(None, v) for v in FIVE], enable_idempotence=True)
    tp = TopicPartition(unique_topic, 0)
    values: list[str] = []
    async with Consumer(**settings(tansu_broker, unique_group, value_deserializer=refuse_poison)) as consumer:
        consumer.assign([tp])

        async def iterate() -> None:
            async for record in consumer:
                values.append(record.value)

        with pytest.raises(RecordDeserializationError) as info:
            await iterate()
        assert (values, info.value.offset) == (["v0", "v1"], 2)
        consumer.seek(tp, info.value.offset + 1)
        async for record in consumer:  # iterating again goes on after the seek
            values.append(record.value)
            if len(values) == 4:
                break
    assert values == ["v0", "v1", "v3", "v4"]
