"""What the three deserializers share (deserializers.py), shown with the JSON one: the bounded
cache of prepared ids, concurrent prepare() sharing the lookup, and prepare()'s time limit, one
for all the lookups it makes (Avro's references)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from aiokafka_lite.errors import ConfigError, DeserializerNotReadyError, InvalidArgumentError, KafkaTimeoutError
from aiokafka_lite.schema_registry import (
    AvroDeserializer,
    JsonSchemaDeserializer,
    SchemaNotFoundError,
    SchemaNotPreparedError,
    SchemaRegistryClient,
    SchemaRegistryUnavailableError,
)
from aiokafka_lite.schema_registry.wire import frame
from tests.unit.schema_registry.registry_schemas import registry_of, schema_body
from tests.unit.schema_registry.scripted_registry import Reply, SeenRequest, scripted_registry

pytestmark = pytest.mark.asyncio

SCHEMAS = {1: schema_body({"type": "object"}, "JSON"), 2: schema_body({"type": "array"}, "JSON")}


async def test_the_prepared_ids_are_bounded_least_recently_used_first() -> None:
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        deserializer = JsonSchemaDeserializer(client, cache_capacity=1)
        await deserializer.prepare(1)
        await deserializer.prepare(2)
        assert (deserializer.ready(1), deserializer.ready(2)) == (False, True)
        assert deserializer(frame(2, b"[1]")) == [1]
    with pytest.raises(ConfigError, match="cache_capacity=0"):
        JsonSchemaDeserializer(client, cache_capacity=0)


async def test_concurrent_prepares_of_one_id_make_one_request() -> None:
    async with scripted_registry(registry_of(SCHEMAS), delay=0.2) as server, \
            SchemaRegistryClient(server.url) as client:
        deserializer = JsonSchemaDeserializer(client, validate=True)
        await asyncio.gather(*(deserializer.prepare(1) for _ in range(5)))
        assert deserializer.ready(1)
    assert len(server.requests) == 1


async def test_one_time_limit_covers_the_schema_and_its_references() -> None:
    record = {"type": "record", "name": "R", "fields": [{"name": "m", "type": "Money"}]}
    by_id = {5: schema_body(record, references=[{"name": "Money", "subject": "money", "version": 1}])}
    ids = registry_of(by_id)

    def references_never_answer(request: SeenRequest) -> Reply:
        return None if "/subjects/" in request.path else ids(request)
    async with scripted_registry(references_never_answer, delay=0.2) as server, \
            SchemaRegistryClient(server.url) as client:
        avro = AvroDeserializer(client)
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            await avro.prepare(5, timeout=0.5)  # 0.2 s for the schema, the rest for its reference
        assert 0.45 < time.monotonic() - started < 1.5
        assert not avro.ready(5)
        with pytest.raises(InvalidArgumentError, match="timeout"):
            await avro.prepare(5, timeout=-1)


async def test_a_bad_reader_schema_is_refused_at_once() -> None:
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        with pytest.raises(InvalidArgumentError, match="reader_schema is not a valid Avro schema"):
            AvroDeserializer(client, reader_schema=json.dumps({"type": "no-such-type"}))
    assert server.requests == []


async def test_in_a_poll_a_value_the_registry_cannot_give_a_schema_for_becomes_a_poison_record() -> None:
    """What poll() does with the SchemaNotPreparedError a call raises (DeserializerNotReadyError):
    awaits its prepare(). An id the registry does not know is the value's fault: prepare() ends
    quietly and the next call on that id raises the registry's answer, once, so that poll() makes the
    record a poison record; a registry that cannot be reached is raised by prepare() itself."""
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        deserializer = JsonSchemaDeserializer(client)
        with pytest.raises(SchemaNotPreparedError) as not_ready:
            deserializer(frame(1, b"{}"))
        assert isinstance(not_ready.value, DeserializerNotReadyError)
        await not_ready.value.prepare(5.0)
        assert deserializer(frame(1, b"{}")) == {}
        with pytest.raises(SchemaNotPreparedError) as unknown:
            deserializer(frame(9, b"{}"))
        await unknown.value.prepare(5.0)  # the 404 is kept, not raised
        with pytest.raises(SchemaNotFoundError, match="schema id 9"):
            deserializer(frame(9, b"{}"))
        with pytest.raises(SchemaNotPreparedError):  # once: the next record with id 9 asks again
            deserializer(frame(9, b"{}"))
        assert len(server.requests) == 2
    async with SchemaRegistryClient(server.url, request_timeout_ms=200) as down:  # the server is gone
        deserializer = JsonSchemaDeserializer(down)
        with pytest.raises(SchemaNotPreparedError) as not_ready:
            deserializer(frame(1, b"{}"))
        with pytest.raises(SchemaRegistryUnavailableError):
            await not_ready.value.prepare(1.0)
        with pytest.raises(SchemaNotPreparedError):
            deserializer(frame(1, b"{}"))
