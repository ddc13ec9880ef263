"""Schema registry support (issue 42): an asyncio client of the Confluent-compatible REST API
(``SchemaRegistryClient``), Confluent's wire format (``wire``) and the Avro, Protobuf and JSON
Schema deserializers. Needs the
``aiokafka-lite[schema-registry]`` extra (httpx), imported only when a client is made."""

from aiokafka_lite.schema_registry.answers import RegisteredSchema, SchemaReference, SchemaType
from aiokafka_lite.schema_registry.avro import AvroDeserializer
from aiokafka_lite.schema_registry.client import SchemaRegistryClient
from aiokafka_lite.schema_registry.deserializers import SchemaDeserializer
from aiokafka_lite.schema_registry.errors import (
    InvalidSchemaError,
    MessageTypeMismatchError,
    SchemaDeserializationError,
    SchemaNotFoundError,
    SchemaNotPreparedError,
    SchemaRegistryClosedError,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
    WireFormatError,
)
from aiokafka_lite.schema_registry.json_schema import JsonSchemaDeserializer
from aiokafka_lite.schema_registry.protobuf import ProtobufDeserializer

__all__ = [
    "AvroDeserializer",
    "InvalidSchemaError",
    "JsonSchemaDeserializer",
    "MessageTypeMismatchError",
    "ProtobufDeserializer",
    "RegisteredSchema",
    "SchemaDeserializationError",
    "SchemaDeserializer",
    "SchemaNotFoundError",
    "SchemaNotPreparedError",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryClosedError",
    "SchemaRegistryError",
    "SchemaRegistryUnavailableError",
    "SchemaType",
    "WireFormatError",
]
