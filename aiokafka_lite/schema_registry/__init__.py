"""Schema registry support (issue 42): an asyncio client of the Confluent-compatible REST API
(``SchemaRegistryClient``) and Confluent's wire format (``wire``). Needs the
``aiokafka-lite[schema-registry]`` extra (httpx), imported only when a client is made."""

from aiokafka_lite.schema_registry.answers import RegisteredSchema, SchemaReference, SchemaType
from aiokafka_lite.schema_registry.client import SchemaRegistryClient
from aiokafka_lite.schema_registry.errors import (
    InvalidSchemaError,
    SchemaNotFoundError,
    SchemaRegistryClosedError,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
    WireFormatError,
)

__all__ = [
    "InvalidSchemaError",
    "RegisteredSchema",
    "SchemaNotFoundError",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryClosedError",
    "SchemaRegistryError",
    "SchemaRegistryUnavailableError",
    "SchemaType",
    "WireFormatError",
]
