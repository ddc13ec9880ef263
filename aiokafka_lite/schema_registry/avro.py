"""``AvroDeserializer``: Avro values framed in Confluent's wire format, decoded with ``fastavro``.

The writer's schema is the registry's (by the id in the value); an optional reader schema gives
the application's view, fastavro resolving one into the other as the Avro spec says (fields added
with defaults, fields dropped, promotions). References (named types defined under other subjects)
are looked up with ``get_version(subject, version)``, depth first, and handed to fastavro as named
schemas. Needs the ``aiokafka-lite[schema-registry]`` extra (fastavro), imported when one is made.
"""

from __future__ import annotations

import io
import json
import logging
from typing import Any

from aiokafka_lite.errors import InvalidArgumentError
from aiokafka_lite.protocol import native
from aiokafka_lite.schema_registry import avro_plan
from aiokafka_lite.schema_registry.answers import RegisteredSchema, SchemaReference, SchemaType
from aiokafka_lite.schema_registry.avro_arrow import arrow_type
from aiokafka_lite.schema_registry.avro_sink import AvroArrowSink
from aiokafka_lite.schema_registry.client import SchemaRegistryClient
from aiokafka_lite.schema_registry.deserializers import Deadline, SchemaDeserializer, failed
from aiokafka_lite.schema_registry.errors import SchemaDeserializationError

log = logging.getLogger("aiokafka_lite.schema_registry")
# A chain of references deeper than this is taken for a cycle the registry let through.
_MAX_REFERENCE_DEPTH = 32


def import_fastavro() -> Any:
    """fastavro, imported only when a deserializer is made, so the package imports without it."""
    try:
        import fastavro
    except ImportError as exc:
        raise ImportError("the Avro deserializer needs fastavro, the extra aiokafka-lite[schema-registry]: "
                          "pip install '.[schema-registry]' in the aiokafka-lite clone") from exc
    return fastavro


class AvroDeserializer(SchemaDeserializer[Any]):
    """Avro values as Python objects (records as dicts). ``reader_schema`` (JSON text or a parsed
    schema) is the shape the application reads; omitted, values come in the writer's shape."""

    schema_type: SchemaType = "AVRO"

    def __init__(self, client: SchemaRegistryClient, *, reader_schema: str | dict[str, Any] | None = None,
                 cache_capacity: int = 1000) -> None:
        super().__init__(client, cache_capacity=cache_capacity)
        self._fastavro = import_fastavro()
        self._reader: Any = None
        self._reader_json: Any = None  # as given: the Arrow column's type is made from it
        # poll_arrow()'s native decoding: the reader's column layout, and a program per writer schema id
        self._native_shape: Any = None
        self._native_plans: dict[int, Any] = {}
        self._without_native_plan: set[int] = set()  # ids whose values poll_arrow() decodes with fastavro
        if reader_schema is not None:
            try:
                text = json.loads(reader_schema) if isinstance(reader_schema, str) else reader_schema
                self._reader = self._fastavro.parse_schema(text)
                self._reader_json = text
            except Exception as exc:  # a bad reader schema is the application's: say so at once
                raise InvalidArgumentError(f"reader_schema is not a valid Avro schema: {exc}") from exc

    def arrow_type(self, pa: Any) -> Any:
        """The pyarrow type of the values, for ``poll_arrow()``: the reader schema's (values of
        every writer schema are read into it, so one column type holds them all); None without
        a reader schema."""
        return None if self._reader_json is None else arrow_type(pa, self._reader_json)

    def arrow_sink(self) -> AvroArrowSink | None:
        """The native decoder of one poll_arrow()'s values (``avro_sink.py``); None without the
        native extension or a reader schema (pyarrow builds the column from decoded values then)."""
        extension = native.active
        if self._reader is None or extension is None or not hasattr(extension, "AvroArrowBuilder"):
            return None
        if self._native_shape is None:
            try:
                self._native_shape = extension.AvroShape(avro_plan.shape(avro_plan.Schema(self._reader)))
            except avro_plan.NativePlanUnavailable:
                return None
        return AvroArrowSink(self, extension.AvroArrowBuilder(self._native_shape))

    def native_plans(self) -> dict[int, Any]:
        """The native programs by writer schema id (read by the native decoder, not changed)."""
        return self._native_plans

    def add_native_plan(self, schema_id: int) -> None:
        """Make the native program of a prepared ``schema_id`` (``NativePlanUnavailable`` if the
        pair of schemas is one the native decoder does not read)."""
        extension = native.active
        assert extension is not None, "arrow_sink() made the sink"
        assert self._native_shape is not None
        if schema_id in self._without_native_plan:
            raise avro_plan.NativePlanUnavailable(f"schema id {schema_id}: found before")
        self._without_native_plan.add(schema_id)  # until the plan is made: each id is tried once
        try:
            op = avro_plan.plan(avro_plan.Schema(self._compiled[schema_id]), avro_plan.Schema(self._reader))
            plan = extension.AvroPlan(op, self._native_shape)
        except (ValueError, KeyError, TypeError) as exc:  # a defect of ours: the Python path still reads it
            log.warning("poll_arrow() decodes schema id %d with fastavro: its native program could not be made "
                        "(%s: %s)", schema_id, type(exc).__name__, exc)
            raise avro_plan.NativePlanUnavailable(str(exc)) from exc
        self._without_native_plan.discard(schema_id)
        self._native_plans[schema_id] = plan
        while len(self._native_plans) > self._capacity:
            del self._native_plans[next(iter(self._native_plans))]

    async def _compile(self, registered: RegisteredSchema, deadline: Deadline) -> Any:
        named: dict[str, Any] = {}
        await self._add_references(registered.schema_id, registered.references, named, deadline, set(), 0)
        # A reader the writer cannot be resolved into fails on decoding (fastavro resolves then).
        return self._parse(registered.schema_id, registered.schema, named, "the writer schema")

    async def _add_references(self, schema_id: int, references: list[SchemaReference], named: dict[str, Any],
                              deadline: Deadline, seen: set[tuple[str, int]], depth: int) -> None:
        """Parse each reference (its own references first) into ``named``, fastavro's named types."""
        if depth > _MAX_REFERENCE_DEPTH:
            raise SchemaDeserializationError(f"schema id {schema_id}: references nest deeper than "
                                             f"{_MAX_REFERENCE_DEPTH} levels (a cycle?)", schema_id=schema_id)
        for reference in references:
            key = (reference.subject, reference.version)
            if key in seen:
                continue
            seen.add(key)
            found = await self.client.get_version(reference.subject, reference.version, timeout=deadline.left())
            if found.schema_type != "AVRO":
                raise SchemaDeserializationError(
                    f"schema id {schema_id}: reference {reference.name!r} ({reference.subject} version "
                    f"{reference.version}) is a {found.schema_type} schema, not Avro", schema_id=schema_id)
            await self._add_references(schema_id, found.references, named, deadline, seen, depth + 1)
            self._parse(schema_id, found.schema, named,
                        f"reference {reference.name!r} ({reference.subject} version {reference.version})")

    def _parse(self, schema_id: int, text: str, named: dict[str, Any], what: str) -> Any:
        try:
            return self._fastavro.parse_schema(json.loads(text), named_schemas=named)
        except Exception as exc:
            raise failed(schema_id, f"cannot parse {what} as Avro", exc) from exc

    def _decode(self, compiled: Any, schema_id: int, payload: memoryview) -> Any:
        stream = io.BytesIO(payload)
        try:
            value = self._fastavro.schemaless_reader(stream, compiled, self._reader)
        except Exception as exc:  # fastavro raises what its decoding hit (EOFError, ValueError, ...)
            raise failed(schema_id, "the Avro payload does not match the schema", exc) from exc
        left = len(payload) - stream.tell()
        if left:  # Avro has no framing of its own: bytes past the value mean it was not this schema's
            raise SchemaDeserializationError(f"schema id {schema_id}: {left} bytes left over after the Avro "
                                             f"value: the payload does not match the schema", schema_id=schema_id)
        return value
