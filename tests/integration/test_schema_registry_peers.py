"""Our deserializers read what Confluent's own serializers (confluent-kafka) write, through a real
registry: Apicurio Registry's Confluent-compatible API (the ``schema_registry`` fixture). No Kafka
broker: their serializer makes the bytes a record would carry, ours decode them."""

from __future__ import annotations

import asyncio
import importlib
import json
import uuid
import warnings
from typing import Any

import pytest

from aiokafka_lite.schema_registry import (
    AvroDeserializer,
    JsonSchemaDeserializer,
    ProtobufDeserializer,
    SchemaDeserializationError,
    SchemaNotFoundError,
    SchemaRegistryClient,
)
from aiokafka_lite.schema_registry.wire import frame
from aiokafka_lite.testing.schema_registry import confluent_client_config
from tests.unit.schema_registry.registry_schemas import protobuf_classes

pytestmark = pytest.mark.asyncio

V1 = {"type": "record", "name": "Order", "namespace": "shop",
      "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "qty", "type": "int", "default": 1}]}
JSON_ORDER = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "note": {"type": "string"}}, "required": ["id"]}


def confluent(serializer: str) -> Any:
    """confluent_kafka's schema registry package with its ``serializer`` module (avro, protobuf,
    json_schema), or a skip naming what it lacks (its protobuf module needs googleapis-common-protos,
    the confluent-kafka[protobuf] extra)."""
    try:
        with warnings.catch_warnings():  # authlib warns of its own httpx module on import
            warnings.simplefilter("ignore")
            import confluent_kafka.schema_registry as registry
            import confluent_kafka.serialization  # noqa: F401
            importlib.import_module(f"confluent_kafka.schema_registry.{serializer}")
    except ImportError as exc:
        pytest.skip(f"confluent_kafka.schema_registry.{serializer} cannot be imported: {exc}")
    return registry


def contexts(topic: str) -> dict[str, Any]:
    from confluent_kafka.serialization import MessageField, SerializationContext
    return {"value": SerializationContext(topic, MessageField.VALUE),
            "key": SerializationContext(topic, MessageField.KEY)}


async def test_avro_keys_and_values_with_evolution_both_ways(schema_registry: Any) -> None:
    registry = confluent("avro")
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    peer = registry.SchemaRegistryClient(confluent_client_config(schema_registry.url))
    try:
        await asyncio.to_thread(peer.set_compatibility, f"{topic}-value", "BACKWARD")
        conf = {"auto.register.schemas": True}
        write_v1 = registry.avro.AvroSerializer(peer, json.dumps(V1), conf=conf)
        write_v2 = registry.avro.AvroSerializer(peer, json.dumps(V2), conf=conf)
        on = contexts(topic)
        key = await asyncio.to_thread(write_v1, {"id": 1, "note": "key"}, on["key"])
        old = await asyncio.to_thread(write_v1, {"id": 2, "note": "v1"}, on["value"])
        new = await asyncio.to_thread(write_v2, {"id": 3, "note": None, "qty": 5}, on["value"])
        versions = await asyncio.to_thread(peer.get_versions, f"{topic}-value")
        assert versions == [1, 2]  # v2 was accepted as BACKWARD compatible
        async with SchemaRegistryClient(schema_registry.url) as client:
            writers = AvroDeserializer(client)
            assert await writers.deserialize(key, timeout=10) == {"id": 1, "note": "key"}
            assert await writers.deserialize(old, timeout=10) == {"id": 2, "note": "v1"}
            assert await writers.deserialize(new, timeout=10) == {"id": 3, "note": None, "qty": 5}
            v1_reader = AvroDeserializer(client, reader_schema=V1)
            v2_reader = AvroDeserializer(client, reader_schema=json.dumps(V2))
            assert await v1_reader.deserialize(new, timeout=10) == {"id": 3, "note": None}
            assert await v2_reader.deserialize(old, timeout=10) == {"id": 2, "note": "v1", "qty": 1}
            with pytest.raises(SchemaDeserializationError, match=f"schema id {writers.schema_id_of(old)}"):
                writers(old[:-2])  # cut inside the note
    finally:
        peer.close()


async def test_protobuf_keys_and_values(schema_registry: Any) -> None:
    registry = confluent("protobuf")
    classes, topic = protobuf_classes(), f"people-{uuid.uuid4().hex[:8]}"
    peer = registry.SchemaRegistryClient(confluent_client_config(schema_registry.url))
    try:
        on = contexts(topic)
        write_order = registry.protobuf.ProtobufSerializer(classes["Order"], peer)
        write_address = registry.protobuf.ProtobufSerializer(classes["Customer.Address"], peer)
        key = await asyncio.to_thread(write_order, classes["Order"](id=1, note="key"), on["key"])
        value = await asyncio.to_thread(write_address, classes["Customer.Address"](city="Lyon"), on["value"])
        async with SchemaRegistryClient(schema_registry.url) as client:
            orders = ProtobufDeserializer(client, classes["Order"])
            addresses = ProtobufDeserializer(client, classes["Customer.Address"])
            assert await orders.deserialize(key, timeout=10) == classes["Order"](id=1, note="key")
            assert await addresses.deserialize(value, timeout=10) == classes["Customer.Address"](city="Lyon")
            with pytest.raises(SchemaDeserializationError, match=r"\[1, 0\] are message Customer\.Address"):
                await orders.deserialize(value, timeout=10)
    finally:
        peer.close()


async def test_json_keys_and_values_validated(schema_registry: Any) -> None:
    registry = confluent("json_schema")
    topic = f"json-{uuid.uuid4().hex[:8]}"
    peer = registry.SchemaRegistryClient(confluent_client_config(schema_registry.url))
    try:
        on = contexts(topic)
        write = registry.json_schema.JSONSerializer(json.dumps(JSON_ORDER), peer)
        key = await asyncio.to_thread(write, {"id": 1}, on["key"])
        value = await asyncio.to_thread(write, {"id": 2, "note": "n"}, on["value"])
        async with SchemaRegistryClient(schema_registry.url) as client:
            deserializer = JsonSchemaDeserializer(client, validate=True)
            assert await deserializer.deserialize(key, timeout=10) == {"id": 1}
            assert await deserializer.deserialize(value, timeout=10) == {"id": 2, "note": "n"}
            schema_id = deserializer.schema_id_of(value)
            with pytest.raises(SchemaDeserializationError, match=rf"schema id {schema_id}: .* at \$\['id'\]"):
                deserializer(frame(schema_id, b'{"id": "two"}'))
    finally:
        peer.close()


async def test_an_unknown_id_is_not_found(schema_registry: Any) -> None:
    async with SchemaRegistryClient(schema_registry.url) as client:
        for deserializer in (AvroDeserializer(client), JsonSchemaDeserializer(client)):
            with pytest.raises(SchemaNotFoundError, match="schema id 987654321"):
                await deserializer.prepare(987654321, timeout=10)
            assert not deserializer.ready(987654321)
