"""AvroDeserializer against a scripted registry: round trips, schema evolution both ways,
references, the synchronous call without I/O, typed errors for bad values and framing."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest

from aiokafka_lite.schema_registry import (
    AvroDeserializer,
    SchemaDeserializationError,
    SchemaNotFoundError,
    SchemaNotPreparedError,
    SchemaRegistryClient,
    WireFormatError,
)
from aiokafka_lite.schema_registry.wire import frame
from tests.unit.schema_registry.registry_schemas import registry_of, schema_body
from tests.unit.schema_registry.scripted_registry import scripted_registry

pytestmark = pytest.mark.asyncio

V1 = {"type": "record", "name": "Order", "namespace": "shop",
      "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "qty", "type": "int", "default": 1}]}
SCHEMAS = {1: schema_body(V1), 2: schema_body(V2), 7: schema_body("syntax = 'proto3';", "PROTOBUF")}


def avro_value(schema: dict[str, Any], record: dict[str, Any], schema_id: int) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return frame(schema_id, out.getvalue())


async def test_a_round_trip_and_a_tombstone() -> None:
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        avro = AvroDeserializer(client)
        value = avro_value(V1, {"id": 7, "note": "hi"}, 1)
        assert avro.schema_id_of(value) == 1
        assert not avro.ready(1)
        assert await avro.deserialize(value) == {"id": 7, "note": "hi"}
        assert avro.ready(1)
        assert avro(value) == {"id": 7, "note": "hi"}
        assert avro(None) is None


async def test_a_new_writer_read_by_an_old_reader_and_the_other_way() -> None:
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        old_reader = AvroDeserializer(client, reader_schema=json.dumps(V1))
        new_reader = AvroDeserializer(client, reader_schema=V2)
        written_v2 = avro_value(V2, {"id": 1, "note": None, "qty": 5}, 2)
        written_v1 = avro_value(V1, {"id": 2, "note": "x"}, 1)
        assert await old_reader.deserialize(written_v2) == {"id": 1, "note": None}  # qty dropped
        assert await new_reader.deserialize(written_v1) == {"id": 2, "note": "x", "qty": 1}  # the default
        assert await new_reader.deserialize(written_v2) == {"id": 1, "note": None, "qty": 5}


async def test_a_reader_the_writer_cannot_resolve_into_is_a_typed_error() -> None:
    reader = {**V1, "fields": [*V1["fields"], {"name": "must", "type": "string"}]}  # no default
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        with pytest.raises(SchemaDeserializationError, match="schema id 1") as caught:
            await AvroDeserializer(client, reader_schema=reader).deserialize(avro_value(V1, {"id": 2, "note": None}, 1))
    assert caught.value.schema_id == 1
    assert caught.value.__cause__ is not None


async def test_the_synchronous_call_never_looks_up_a_schema() -> None:
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        avro = AvroDeserializer(client)
        with pytest.raises(SchemaNotPreparedError, match="schema id 2 is not prepared") as caught:
            avro(avro_value(V2, {"id": 1, "note": None, "qty": 5}, 2))
    assert caught.value.schema_id == 2
    assert server.requests == []


async def test_one_id_prepared_twice_is_looked_up_once() -> None:
    # cache_capacity=0: the client itself caches nothing, so only the deserializer's cache saves the request
    async with scripted_registry(registry_of(SCHEMAS)) as server, \
            SchemaRegistryClient(server.url, cache_capacity=0) as client:
        avro = AvroDeserializer(client)
        await avro.prepare(1)
        await avro.prepare(1)
    assert [request.path for request in server.requests] == ["/apis/ccompat/v7/schemas/ids/1"]


async def test_bad_values_and_bad_framing_are_typed_errors() -> None:
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        avro = AvroDeserializer(client)
        await avro.prepare(1)
        with pytest.raises(SchemaDeserializationError, match="schema id 1: the Avro payload") as caught:
            avro(frame(1, b"\x02"))  # id 1, then the value ends inside the union's index
        assert caught.value.__cause__ is not None
        with pytest.raises(SchemaDeserializationError, match="schema id 1: 3 bytes left over"):
            avro(avro_value(V1, {"id": 7, "note": None}, 1) + b"abc")
        with pytest.raises(WireFormatError, match="magic byte 1"):
            avro(b"\x01" + avro_value(V1, {"id": 7, "note": None}, 1)[1:])
        with pytest.raises(SchemaDeserializationError, match="schema id 7 is a PROTOBUF schema"):
            await avro.prepare(7)
        with pytest.raises(SchemaNotFoundError):
            await avro.prepare(99)
        assert not avro.ready(99)


async def test_references_are_looked_up_depth_first_by_subject_and_version() -> None:
    money = {"type": "record", "name": "Money", "namespace": "shop",
             "fields": [{"name": "cents", "type": "long"}, {"name": "currency", "type": "shop.Currency"}]}
    currency = {"type": "enum", "name": "Currency", "namespace": "shop", "symbols": ["EUR", "USD"]}
    priced = {"type": "record", "name": "Priced", "namespace": "shop",
              "fields": [{"name": "price", "type": "shop.Money"}]}
    by_id = {5: schema_body(priced, references=[{"name": "shop.Money", "subject": "money", "version": 2}])}
    by_version = {("money", 2): {"id": 40, **schema_body(money, references=[
                      {"name": "shop.Currency", "subject": "currency", "version": 1}])},
                  ("currency", 1): {"id": 41, **schema_body(currency)}}
    whole = {**priced, "fields": [{"name": "price", "type": {**money, "fields": [
        money["fields"][0], {"name": "currency", "type": currency}]}}]}
    record = {"price": {"cents": 250, "currency": "USD"}}
    async with scripted_registry(registry_of(by_id, by_version)) as server, SchemaRegistryClient(server.url) as client:
        assert await AvroDeserializer(client).deserialize(avro_value(whole, record, 5)) == record
    assert [request.path.removeprefix("/apis/ccompat/v7/") for request in server.requests] == [
        "schemas/ids/5", "subjects/money/versions/2", "subjects/currency/versions/1"]


async def test_a_missing_reference_fails_prepare() -> None:
    priced = {"type": "record", "name": "Priced", "fields": [{"name": "price", "type": "shop.Money"}]}
    by_id = {5: schema_body(priced, references=[{"name": "shop.Money", "subject": "money", "version": 2}])}
    async with scripted_registry(registry_of(by_id)) as server, SchemaRegistryClient(server.url) as client:
        avro = AvroDeserializer(client)
        with pytest.raises(SchemaNotFoundError):
            await avro.prepare(5)
        assert not avro.ready(5)
