"""ProtobufDeserializer against a scripted registry: the message indexes checked against the
class's place in its file, round trips of a first, a second and a nested message, typed errors."""

from __future__ import annotations

import pytest

from aiokafka_lite.schema_registry import (
    MessageTypeMismatchError,
    ProtobufDeserializer,
    SchemaDeserializationError,
    SchemaNotPreparedError,
    SchemaRegistryClient,
    WireFormatError,
)
from aiokafka_lite.schema_registry.wire import frame_protobuf
from tests.unit.schema_registry.registry_schemas import PROTO_TEXT, protobuf_classes, registry_of, schema_body
from tests.unit.schema_registry.scripted_registry import scripted_registry

CLASSES = protobuf_classes()
SCHEMAS = {3: schema_body(PROTO_TEXT, "PROTOBUF"), 4: schema_body('{"type": "string"}')}


def test_each_class_knows_its_place_in_its_file() -> None:
    places = {name: ProtobufDeserializer(None, cls).message_indexes  # type: ignore[arg-type]
              for name, cls in CLASSES.items()}
    assert places == {"Order": [0], "Customer": [1], "Customer.Address": [1, 0]}


@pytest.mark.asyncio
async def test_round_trips_of_a_first_a_second_and_a_nested_message() -> None:
    order = CLASSES["Order"](id=7, note="hi")
    customer = CLASSES["Customer"](name="Ann")
    address = CLASSES["Customer.Address"](city="Lyon")
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        for message, indexes in ((order, [0]), (customer, [1]), (address, [1, 0])):
            protobuf = ProtobufDeserializer(client, type(message))
            value = frame_protobuf(3, indexes, message.SerializeToString())
            assert protobuf.schema_id_of(value) == 3
            assert await protobuf.deserialize(value) == message
            assert protobuf(value) == message


@pytest.mark.asyncio
async def test_indexes_of_another_message_name_both() -> None:
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        protobuf = ProtobufDeserializer(client, CLASSES["Order"])
        await protobuf.prepare(3)
        with pytest.raises(MessageTypeMismatchError, match=r"indexes \[1, 0\] are message Customer.Address of the "
                                                           r"class's file, not shop.Order \(indexes \[0\]") as caught:
            protobuf(frame_protobuf(3, [1, 0], CLASSES["Customer.Address"](city="x").SerializeToString()))
        assert caught.value.schema_id == 3
        with pytest.raises(MessageTypeMismatchError, match=r"\[5\] are no message of the class's file"):
            protobuf(frame_protobuf(3, [5], b""))


@pytest.mark.asyncio
async def test_not_prepared_bad_payloads_and_framing_are_typed_errors() -> None:
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        protobuf = ProtobufDeserializer(client, CLASSES["Order"])
        with pytest.raises(SchemaNotPreparedError, match="schema id 3"):
            protobuf(frame_protobuf(3, [0], b""))
        assert server.requests == []
        await protobuf.prepare(3)
        with pytest.raises(SchemaDeserializationError,
                           match=r"schema id 3: the payload is not a shop\.Order") as caught:
            protobuf(frame_protobuf(3, [0], b"\x0a\xff"))  # field 1 as length-delimited, its length cut off
        assert caught.value.__cause__ is not None
        with pytest.raises(WireFormatError, match="magic byte"):
            protobuf(b"\x05" + frame_protobuf(3, [0], b"")[1:])
        with pytest.raises(WireFormatError, match="message-index count 3"):
            protobuf.schema_id_of(frame_protobuf(3, [0], b"")[:5] + b"\x06")
        with pytest.raises(SchemaDeserializationError, match="schema id 4 is a AVRO schema"):
            await protobuf.prepare(4)


def test_a_class_that_is_not_a_message_is_refused() -> None:
    with pytest.raises(TypeError, match="generated Protobuf message class"):
        ProtobufDeserializer(None, dict)  # type: ignore[arg-type]
