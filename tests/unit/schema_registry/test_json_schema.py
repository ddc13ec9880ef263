"""JsonSchemaDeserializer against a scripted registry: values decoded, validated when asked, and
typed errors naming the id (and the failing path) for values that are not JSON or do not match."""

from __future__ import annotations

import json

import pytest

from aiokafka_lite.schema_registry import (
    JsonSchemaDeserializer,
    SchemaDeserializationError,
    SchemaNotPreparedError,
    SchemaRegistryClient,
    WireFormatError,
)
from aiokafka_lite.schema_registry.wire import frame
from tests.unit.schema_registry.registry_schemas import registry_of, schema_body
from tests.unit.schema_registry.scripted_registry import scripted_registry

pytestmark = pytest.mark.asyncio

ORDER = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
         "properties": {"id": {"type": "integer"}, "lines": {"type": "array", "items": {"type": "object",
                        "properties": {"qty": {"type": "integer", "minimum": 1}}}}},
         "required": ["id"]}
SCHEMAS = {8: schema_body(ORDER, "JSON"), 9: schema_body({"type": "wrong"}, "JSON"),
           10: schema_body(ORDER, "JSON", [{"name": "other.json", "subject": "other", "version": 1}])}


def json_value(schema_id: int, value: object) -> bytes:
    return frame(schema_id, json.dumps(value).encode())


async def test_values_decode_with_and_without_validation() -> None:
    good = {"id": 1, "lines": [{"qty": 2}]}
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        for validate in (False, True):
            deserializer = JsonSchemaDeserializer(client, validate=validate)
            assert await deserializer.deserialize(json_value(8, good)) == good
            assert deserializer(json_value(8, good)) == good
        # Not validating, a value the schema refuses still decodes (the registry is not asked twice).
        loose = JsonSchemaDeserializer(client)
        assert await loose.deserialize(json_value(8, {"lines": "no"})) == {"lines": "no"}


async def test_a_value_that_fails_validation_names_the_id_and_the_path() -> None:
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        deserializer = JsonSchemaDeserializer(client, validate=True)
        await deserializer.prepare(8)
        with pytest.raises(SchemaDeserializationError,
                           match=r"schema id 8: the value does not match the schema at \$\['lines'\]\[0\]\['qty'\]"
                           ) as caught:
            deserializer(json_value(8, {"id": 1, "lines": [{"qty": 0}]}))
        assert caught.value.schema_id == 8
        assert caught.value.__cause__ is not None
        with pytest.raises(SchemaDeserializationError, match=r"at \$: 'id' is a required property"):
            deserializer(json_value(8, {}))


async def test_not_json_not_prepared_bad_framing_and_bad_schemas() -> None:
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        deserializer = JsonSchemaDeserializer(client, validate=True)
        with pytest.raises(SchemaNotPreparedError, match="schema id 8"):
            deserializer(json_value(8, {}))
        assert server.requests == []
        await deserializer.prepare(8)
        with pytest.raises(SchemaDeserializationError, match="schema id 8: the payload is not JSON"):
            deserializer(frame(8, b"{not json"))
        with pytest.raises(SchemaDeserializationError, match="schema id 8: the payload is not JSON"):
            deserializer(frame(8, b"\xff\xfe"))
        with pytest.raises(WireFormatError, match="value too short"):
            deserializer(b"\x00\x00")
        with pytest.raises(SchemaDeserializationError, match="schema id 9: cannot use the registered schema"):
            await deserializer.prepare(9)
        with pytest.raises(SchemaDeserializationError, match=r"schema id 10: .*references \(other.json\)"):
            await deserializer.prepare(10)
        await JsonSchemaDeserializer(client).prepare(10)  # not validating, references do not matter


async def test_one_id_prepared_twice_is_looked_up_once() -> None:
    async with scripted_registry(registry_of(SCHEMAS)) as server, \
            SchemaRegistryClient(server.url, cache_capacity=0) as client:
        deserializer = JsonSchemaDeserializer(client, validate=True)
        await deserializer.prepare(8)
        await deserializer.prepare(8)
    assert len(server.requests) == 1
