"""The schema registry's errors, each under one root (``SchemaRegistryError``, a ``KafkaError``).

Timeouts are not here: a lapsed call raises ``aiokafka_lite.errors.KafkaTimeoutError`` as every
other awaitable of the library does (shared/DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiokafka_lite.errors import DeserializerNotReadyError, KafkaError


class SchemaRegistryError(KafkaError):
    """A schema registry refused or failed a request. ``status`` is the HTTP status and
    ``error_code`` Confluent's code from the answer's body (None when there was none)."""

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None,
                 error_code: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.error_code = error_code


class SchemaNotFoundError(SchemaRegistryError):
    """The registry knows no such schema id, subject or version (HTTP 404, codes 40401-40403)."""


class SchemaRegistryUnavailableError(SchemaRegistryError):
    """The registry could not be reached, or kept answering 5xx/429, until the call's time ran out."""


class SchemaRegistryClosedError(SchemaRegistryError):
    """The client was closed (``aclose()``) while the call was waiting for its answer."""


class InvalidSchemaError(SchemaRegistryError):
    """The registry's answer was not what the Confluent API promises (not JSON, fields missing)."""


class WireFormatError(SchemaRegistryError, ValueError):
    """A framed value is not in Confluent's wire format (magic byte, schema id, message indexes)."""


class SchemaNotPreparedError(SchemaRegistryError, DeserializerNotReadyError):
    """A deserializer was called (synchronously) with a schema id it has not prepared: ``await
    deserializer.prepare(schema_id)`` first. ``schema_id`` is the id the value named. A consumer's
    poll() does that itself: it awaits this error's ``prepare()`` (DeserializerNotReadyError)."""

    def __init__(self, message: str, *, schema_id: int,
                 preparer: Callable[[float], Awaitable[None]] | None = None) -> None:
        super().__init__(message)
        self.schema_id = schema_id
        self._preparer = preparer

    async def prepare(self, timeout: float) -> None:
        if self._preparer is None:
            raise NotImplementedError("this error was raised without a deserializer to prepare")
        await self._preparer(timeout)


class SchemaDeserializationError(SchemaRegistryError):
    """A value, or the schema it names, could not be decoded: the payload does not match the schema,
    the schema cannot be parsed, or is of another type than the deserializer reads. ``schema_id`` is
    the id; the cause, when there is one, is chained."""

    def __init__(self, message: str, *, schema_id: int) -> None:
        super().__init__(message)
        self.schema_id = schema_id


class MessageTypeMismatchError(SchemaDeserializationError):
    """A Protobuf value's message indexes point at another message than the deserializer's class."""
