"""Registry-framed values through poll(), on Apache Kafka and a real registry (Apicurio, the
``schema_registry`` fixture): records written by confluent-kafka's own AvroSerializer are read by a
Consumer and a ShareConsumer whose deserializers are ours, with no prepare() by the application:
poll() awaits each new schema's lookup within its own timeout, once per id. A registry that is
down is a clear error within the poll's timeout with nothing skipped; a slow one is an empty
poll(); an unknown id and a corrupt payload are poison records (issue 29's contract).
Scripted-byte cases: tests/unit/fetch/test_fetcher_not_ready.py.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from aiokafka_lite import Consumer, ShareConsumer, TopicPartition
from aiokafka_lite.errors import InvalidArgumentError, RecordDeserializationError
from aiokafka_lite.protocol.native import DecoderName
from aiokafka_lite.schema_registry import (
    AvroDeserializer,
    RegisteredSchema,
    SchemaDeserializationError,
    SchemaNotFoundError,
    SchemaRegistryClient,
    SchemaRegistryUnavailableError,
)
from aiokafka_lite.schema_registry.wire import frame
from aiokafka_lite.share import ShareRecord
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.schema_registry import confluent_client_config
from tests.decoders import decoder_in_use

from ._consumers import poll_until
from .test_schema_registry_peers import V1, V2, confluent, contexts
from .test_share_consumer import prepare as prepare_share_group
from .test_share_consumer import settings as share_settings

pytestmark = [pytest.mark.asyncio, pytest.mark.broker("kafka4")]

KEY = {"type": "record", "name": "OrderKey", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]}


def consumer_settings(broker: Any, group: str, **more: Any) -> dict[str, Any]:
    return dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                enable_auto_commit=False, **more)


def count_lookups(client: SchemaRegistryClient) -> Counter[int]:
    """Counts the schema lookups the deserializers make (by id), cache hits included."""
    counts: Counter[int] = Counter()
    look_up: Callable[..., Awaitable[RegisteredSchema]] = client.get_schema

    async def counted(schema_id: int, **kwargs: Any) -> RegisteredSchema:
        counts[schema_id] += 1
        return await look_up(schema_id, **kwargs)

    client.get_schema = counted  # type: ignore[method-assign]
    return counts


def avro_records(registry_url: str, topic: str, count: int, partitions: int) -> tuple[list[dict[str, Any]],
                                                                                       list[dict[str, Any]]]:
    """``count`` records framed by confluent-kafka's AvroSerializer (keys one schema, values v1 and
    v2 in turn), as produce() takes them; and the values a v2 reader expects."""
    registry = confluent("avro")
    peer = registry.SchemaRegistryClient(confluent_client_config(registry_url))
    try:
        peer.set_compatibility(f"{topic}-value", "BACKWARD")
        conf = {"auto.register.schemas": True}
        write_key = registry.avro.AvroSerializer(peer, json.dumps(KEY), conf=conf)
        write_v1 = registry.avro.AvroSerializer(peer, json.dumps(V1), conf=conf)
        write_v2 = registry.avro.AvroSerializer(peer, json.dumps(V2), conf=conf)
        on = contexts(topic)
        records, expected = [], []
        for i in range(count):
            value = {"id": i, "note": f"n{i}"} if i % 2 == 0 else {"id": i, "note": None, "qty": i}
            write = write_v1 if i % 2 == 0 else write_v2
            records.append({"key": write_key({"id": i}, on["key"]), "value": write(value, on["value"]),
                            "partition": i % partitions})
            expected.append({"qty": 1, **value})  # the v2 reader's default for v1 values
        return records, expected
    finally:
        peer.close()


async def test_poll_decodes_avro_keys_and_values_looking_each_schema_up_once(
        apache_kafka_broker: Any, schema_registry: Any, unique_topic: str, unique_group: str) -> None:
    records, expected = await asyncio.to_thread(avro_records, schema_registry.url, unique_topic, 60, 3)
    create_topic(apache_kafka_broker, unique_topic, partitions=3)
    produce(apache_kafka_broker, unique_topic, records)
    async with SchemaRegistryClient(schema_registry.url) as client:
        lookups = count_lookups(client)
        async with Consumer(unique_topic, **consumer_settings(
                apache_kafka_broker, unique_group, key_deserializer=AvroDeserializer(client),
                value_deserializer=AvroDeserializer(client, reader_schema=V2))) as consumer:
            got = await poll_until(consumer, lambda got: len(got) >= 60, timeout=60)
            assert len(await consumer.poll(timeout=0.5)) == 0  # nothing twice
        requests = client.metrics()["requests"]
    # A poll() whose time ends during a lookup leaves it to the next poll(), which asks the
    # deserializer again (a cache hit then): calls may repeat, HTTP requests do not.
    print(f"\nschema lookups by id: {dict(lookups)}; HTTP requests {requests}")
    assert sorted((r.key["id"], r.value["id"]) for r in got) == [(i, i) for i in range(60)]
    assert sorted((r.value for r in got), key=lambda v: v["id"]) == expected
    assert len(lookups) == 3  # the key's schema, value v1, value v2
    assert requests == 3, "one registry request per schema id"


async def test_an_unknown_id_and_a_corrupt_payload_are_poison_records(
        apache_kafka_broker: Any, schema_registry: Any, unique_topic: str, unique_group: str) -> None:
    records, _ = await asyncio.to_thread(avro_records, schema_registry.url, unique_topic, 4, 1)
    good = [r["value"] for r in records]
    v1_id = int.from_bytes(good[0][1:5], "big")
    values = [good[0], good[1], frame(987654321, good[2][5:]), good[2], frame(v1_id, b"\xff\xff"), good[3]]
    create_topic(apache_kafka_broker, unique_topic, partitions=1)
    produce(apache_kafka_broker, unique_topic, [{"value": v} for v in values], enable_idempotence=True)
    tp = TopicPartition(unique_topic, 0)
    async with SchemaRegistryClient(schema_registry.url) as client, Consumer(unique_topic, **consumer_settings(
            apache_kafka_broker, unique_group, value_deserializer=AvroDeserializer(client))) as consumer:
        got = await poll_until(consumer, lambda got: len(got) >= 2, timeout=60)
        assert [r.value["id"] for r in got] == [0, 1]
        for _ in range(2):  # every poll() raises it until the application seeks past it
            with pytest.raises(RecordDeserializationError) as unknown:
                await consumer.poll(timeout=10)
            assert (unknown.value.offset, unknown.value.origin) == (2, "value")
            assert isinstance(unknown.value.__cause__, SchemaNotFoundError)
            assert "schema id 987654321" in str(unknown.value)
        assert await consumer.position(tp) == 2
        consumer.seek(tp, 3)
        assert [r.value["id"] for r in await poll_until(consumer, lambda got: len(got) >= 1, timeout=60)] == [2]
        with pytest.raises(RecordDeserializationError) as corrupt:
            await consumer.poll(timeout=10)
        assert corrupt.value.offset == 4
        assert isinstance(corrupt.value.__cause__, SchemaDeserializationError)
        consumer.seek(tp, 5)
        assert [r.value["id"] for r in await poll_until(consumer, lambda got: len(got) >= 1, timeout=60)] == [3]


@contextmanager
def silent_server() -> Iterator[str]:
    """A registry address that accepts connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


async def test_a_registry_down_is_a_clear_error_within_the_poll_timeout_and_skips_nothing(
        apache_kafka_broker: Any, schema_registry: Any, unique_topic: str, unique_group: str) -> None:
    records, _ = await asyncio.to_thread(avro_records, schema_registry.url, unique_topic, 3, 1)
    create_topic(apache_kafka_broker, unique_topic, partitions=1)
    produce(apache_kafka_broker, unique_topic, records, enable_idempotence=True)
    tp = TopicPartition(unique_topic, 0)
    async with SchemaRegistryClient(closed_port(), request_timeout_ms=1000) as down, Consumer(
            unique_topic, **consumer_settings(apache_kafka_broker, unique_group,
                                              value_deserializer=AvroDeserializer(down))) as consumer:
        for _ in range(2):  # the first poll() to meet the record, and the one after
            async with asyncio.timeout(60):
                while True:
                    began = time.monotonic()
                    try:
                        assert len(await consumer.poll(timeout=3)) == 0
                    except SchemaRegistryUnavailableError as exc:
                        took, error = time.monotonic() - began, exc
                        break
            assert "127.0.0.1" in str(error)
            assert took < 3.5, f"the error came {took:.2f} s into a poll(timeout=3)"
            assert await consumer.position(tp) == 0, "nothing skipped"
    print(f"\nthe down registry's error came {took:.2f} s into a poll(timeout=3)")
    assert took < 3.5
    with silent_server() as address:
        async with SchemaRegistryClient(address, request_timeout_ms=30000) as slow, Consumer(
                unique_topic, **consumer_settings(apache_kafka_broker, unique_group,
                                                  value_deserializer=AvroDeserializer(slow))) as consumer:
            await consumer.poll(timeout=5)  # joins; the lookup starts when the record comes
            for _ in range(3):  # a slow registry: empty polls, each within its timeout, no error
                began = time.monotonic()
                assert len(await consumer.poll(timeout=1)) == 0
                assert time.monotonic() - began < 1.5
            assert await consumer.position(tp) == 0
    async with SchemaRegistryClient(schema_registry.url) as up, Consumer(unique_topic, **consumer_settings(
            apache_kafka_broker, unique_group, value_deserializer=AvroDeserializer(up))) as consumer:
        got = await poll_until(consumer, lambda got: len(got) >= 3, timeout=60)
        assert [r.value["id"] for r in got] == [0, 1, 2]


async def test_a_share_consumer_decodes_avro_values_and_loses_none_to_the_lookup(
        apache_kafka_broker: Any, schema_registry: Any, unique_topic: str, unique_group: str) -> None:
    records, expected = await asyncio.to_thread(avro_records, schema_registry.url, unique_topic, 40, 2)
    prepare_share_group(apache_kafka_broker, unique_topic, unique_group, [], partitions=2)
    produce(apache_kafka_broker, unique_topic, records)
    async with SchemaRegistryClient(schema_registry.url) as client:
        lookups = count_lookups(client)
        async with ShareConsumer(unique_topic, **share_settings(
                apache_kafka_broker, unique_group, value_deserializer=AvroDeserializer(client, reader_schema=V2),
                share_acknowledgement_mode="explicit")) as share:
            got: list[ShareRecord] = []
            async with asyncio.timeout(60):
                while len(got) < 40:
                    for record in await share.poll(0.5):
                        share.acknowledge(record, "accept")
                        got.append(record)
            await share.commit(timeout=10)
            metrics = share.metrics()
        requests = client.metrics()["requests"]
    assert sorted((r.value for r in got), key=lambda v: v["id"]) == expected
    assert {r.delivery_count for r in got} == {1}, "no record was released for want of its schema"
    assert (metrics["released"], metrics.get("records_kept")) == (0, 0)
    assert len(lookups) == 2
    assert requests == 2, "one registry request per schema id"


@pytest.mark.parametrize("decoder", ["native", "python"])
async def test_poll_arrow_gives_avro_values_as_a_typed_struct_column(
        apache_kafka_broker: Any, schema_registry: Any, unique_topic: str, unique_group: str, decoder: DecoderName,
) -> None:
    """Natively decoded into the column (no Python value on the way), or fastavro's values built by
    pyarrow (the reference): the same column."""
    import pyarrow as pa

    records, expected = await asyncio.to_thread(avro_records, schema_registry.url, unique_topic, 30, 2)
    create_topic(apache_kafka_broker, unique_topic, partitions=2)
    produce(apache_kafka_broker, unique_topic, records)
    async with SchemaRegistryClient(schema_registry.url) as client:
        async with Consumer(unique_topic, **consumer_settings(
                apache_kafka_broker, unique_group, value_deserializer=AvroDeserializer(client))) as untyped:
            with pytest.raises(InvalidArgumentError, match="reader_schema"):
                await untyped.poll_arrow(timeout=1)  # the writers' shapes differ: no one column type
        typed = AvroDeserializer(client, reader_schema=V2)
        with decoder_in_use(decoder):
            async with Consumer(unique_topic, **consumer_settings(
                    apache_kafka_broker, unique_group, value_deserializer=typed, max_poll_records=7)) as consumer:
                batches = []
                async with asyncio.timeout(60):
                    while sum(len(b) for b in batches) < 30:
                        batch = await consumer.poll_arrow(timeout=0.5)
                        if len(batch):
                            batches.append(batch.to_pyarrow())
    # the native column reads each writer schema (v1, v2) by a program made for it
    assert len(typed.native_plans()) == (2 if decoder == "native" else 0)
    table = pa.Table.from_batches(batches)
    assert table.schema.field("value").type == pa.struct([
        pa.field("id", pa.int64(), nullable=False), pa.field("note", pa.utf8()),
        pa.field("qty", pa.int32(), nullable=False)])
    assert table.schema.field("key").type == pa.binary()  # keys stay bytes
    assert sorted(table.column("value").to_pylist(), key=lambda v: v["id"]) == expected
    assert sorted(table.column("offset").to_pylist()) == sorted([i // 2 for i in range(30)])
