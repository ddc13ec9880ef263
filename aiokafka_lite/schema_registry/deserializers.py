"""What the three deserializers (``avro.py``, ``protobuf.py``, ``json_schema.py``) share.

A deserializer is used in two steps so that it can be a consumer's synchronous
``value_deserializer``: ``await prepare(schema_id)`` looks the schema up (the client's cache and
single-flight lookups) and compiles it once, and ``deserializer(data)`` decodes with the compiled
schema and never does I/O: an id not prepared raises ``SchemaNotPreparedError``. ``deserialize()``
does both, for code outside poll(). Compiled schemas are kept by id in a bounded LRU.
"""

from __future__ import annotations

import asyncio
import functools
import math
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Any, Generic, TypeVar

from aiokafka_lite.errors import ConfigError, KafkaTimeoutError
from aiokafka_lite.liveness.deadlines import DEFAULT, Timeout
from aiokafka_lite.schema_registry import wire
from aiokafka_lite.schema_registry.answers import RegisteredSchema, SchemaType
from aiokafka_lite.schema_registry.client import SchemaRegistryClient
from aiokafka_lite.schema_registry.errors import (
    InvalidSchemaError,
    SchemaDeserializationError,
    SchemaNotFoundError,
    SchemaNotPreparedError,
)

Compiled = TypeVar("Compiled")


class Deadline:
    """One prepare()'s time, shared by the several lookups it may make (Avro's references)."""

    def __init__(self, client: SchemaRegistryClient, timeout: Timeout) -> None:
        self.seconds = client.time_limit(timeout)
        self._end = asyncio.get_running_loop().time() + self.seconds

    def left(self) -> float | None:
        """The time left, for the next lookup's ``timeout`` (None: no bound)."""
        if math.isinf(self.seconds):
            return None
        left = self._end - asyncio.get_running_loop().time()
        if left <= 0:
            raise KafkaTimeoutError(f"preparing a schema took longer than {self.seconds:g} s")
        return left


class SchemaDeserializer(ABC, Generic[Compiled]):
    """The shared shape; a subclass says which schema type it reads and how it compiles and decodes."""

    schema_type: SchemaType

    def __init__(self, client: SchemaRegistryClient, *, cache_capacity: int = 1000) -> None:
        if isinstance(cache_capacity, bool) or not isinstance(cache_capacity, int) or cache_capacity < 1:
            # 0 would make every prepare() useless: the synchronous call could never succeed
            raise ConfigError(f"cache_capacity={cache_capacity!r}: must be an int >= 1")
        self.client = client
        self._compiled: OrderedDict[int, Compiled] = OrderedDict()
        # A poll()'s preparation that failed for the value's own sake, raised once by the next call.
        self._failures: dict[int, Exception] = {}
        self._capacity = cache_capacity

    def schema_id_of(self, data: bytes | bytearray | memoryview) -> int:
        """The schema id a framed value names (``WireFormatError`` for a value not framed)."""
        return self._unframe(data)[0]

    def _unframe(self, data: bytes | bytearray | memoryview) -> tuple[int, Any]:
        """(schema id, what ``_decode`` reads: the payload) of a framed value, parsed once."""
        return wire.parse(data)

    async def prepare(self, schema_id: int, *, timeout: Timeout = DEFAULT) -> None:
        """Look ``schema_id`` up and compile it, once: a prepared id is not looked up again."""
        if schema_id in self._compiled:
            self._compiled.move_to_end(schema_id)
            return
        deadline = Deadline(self.client, timeout)
        registered = await self.client.get_schema(schema_id, timeout=timeout)  # the first: as given
        if registered.schema_type != self.schema_type:
            raise SchemaDeserializationError(
                f"schema id {schema_id} is a {registered.schema_type} schema, this deserializer reads "
                f"{self.schema_type}", schema_id=schema_id)
        compiled = await self._compile(registered, deadline)
        self._compiled[schema_id] = compiled
        self._compiled.move_to_end(schema_id)
        while len(self._compiled) > self._capacity:
            self._compiled.popitem(last=False)

    def ready(self, schema_id: int) -> bool:
        """Whether ``schema_id`` is prepared (the synchronous call can decode its values)."""
        return schema_id in self._compiled

    def __call__(self, data: bytes | None) -> Any:
        """The value ``data`` holds, decoded with its prepared schema. No I/O: an id not prepared
        raises ``SchemaNotPreparedError``. None (a tombstone) stays None."""
        if data is None:
            return None
        schema_id, framed = self._unframe(data)
        if schema_id not in self._compiled:  # not .get(): None is a compiled form (nothing to compile)
            failure = self._failures.pop(schema_id, None)
            if failure is not None:  # found by a poll()'s preparation: this value is a poison record
                raise failure
            raise SchemaNotPreparedError(
                f"schema id {schema_id} is not prepared: await prepare({schema_id}) before decoding "
                f"its values synchronously", schema_id=schema_id,
                preparer=functools.partial(self._prepare_for_poll, schema_id))
        self._compiled.move_to_end(schema_id)
        return self._decode(self._compiled[schema_id], schema_id, framed)

    async def _prepare_for_poll(self, schema_id: int, timeout: float) -> None:
        """prepare() for a consumer's poll(): a failure that is the value's (an id the registry
        does not know, a schema that does not compile or is of another type) is kept for the next
        call on that id to raise, so that poll() makes the record a poison record; a failure that is
        the registry's (unavailable, closed, out of time) is raised for poll() to raise."""
        try:
            await self.prepare(schema_id, timeout=None if math.isinf(timeout) else timeout)
        except (SchemaNotFoundError, InvalidSchemaError, SchemaDeserializationError) as exc:
            self._failures[schema_id] = exc
            if len(self._failures) > self._capacity:  # ids whose records were not handed out again
                del self._failures[next(iter(self._failures))]

    async def deserialize(self, data: bytes | None, *, timeout: Timeout = DEFAULT) -> Any:
        """``prepare()`` then decode: for code that reads values outside a consumer's poll()."""
        if data is None:
            return None
        await self.prepare(self.schema_id_of(data), timeout=timeout)
        return self(data)

    @abstractmethod
    async def _compile(self, registered: RegisteredSchema, deadline: Deadline) -> Compiled:
        """The schema in the form ``_decode`` uses; ``SchemaDeserializationError`` if it cannot be."""

    @abstractmethod
    def _decode(self, compiled: Compiled, schema_id: int, framed: Any) -> Any:
        """The value of ``framed`` (what ``_unframe`` gave); ``SchemaDeserializationError`` (its
        cause chained) if it does not match."""


def failed(schema_id: int, what: str, cause: BaseException) -> SchemaDeserializationError:
    """The error for ``cause``, naming the id and what failed (raise it ``from cause``)."""
    return SchemaDeserializationError(f"schema id {schema_id}: {what}: {type(cause).__name__}: {cause}",
                                      schema_id=schema_id)
