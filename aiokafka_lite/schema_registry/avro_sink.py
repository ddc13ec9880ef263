"""One ``poll_arrow()``'s Avro value column, decoded by the native extension while poll() hands the
records out: no Python object per value.

The sink is the poll's value converter. It decodes each chunk's values into the native builder and
leaves the records' values as they came (bytes). A value it cannot decode stops the chunk there
as the Python path would: the deserializer itself is called on that one value, so poll() raises its
error (a schema to prepare first, a poison record) exactly as with ``poll()``. Then
``column(chunks)`` gives the decoded column if it holds exactly the records handed out; otherwise
(a schema pair the native decoder does not read, records handed out from elsewhere) None, and the
values are decoded by the deserializer (``python_value``) and built by pyarrow, the reference path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import count
from typing import Any, Protocol

from aiokafka_lite.liveness.deadlines import own_failure
from aiokafka_lite.protocol.records.columns import BadRecord, RecordChunks, RecordColumns
from aiokafka_lite.schema_registry import wire
from aiokafka_lite.schema_registry.avro_plan import NativePlanUnavailable
from aiokafka_lite.schema_registry.errors import SchemaDeserializationError

_ALL_DECODED, _NOT_PLANNED = 0, 1
Span = tuple[str, int, int, int]  # topic, partition, first offset, rows


class NativeAvroReader(Protocol):
    """What the sink needs of its deserializer (``avro.AvroDeserializer``)."""

    def __call__(self, data: bytes | None) -> Any: ...
    def native_plans(self) -> dict[int, Any]: ...
    def add_native_plan(self, schema_id: int) -> None: ...


class AvroArrowSink:
    """The native value column of one poll_arrow() (made by ``AvroDeserializer.arrow_sink()``)."""

    def __init__(self, deserializer: NativeAvroReader, builder: Any) -> None:
        self._deserializer = deserializer
        self._deserialize = own_failure(deserializer)  # as the fetch buffer's deserializers are
        self._builder = builder
        self._spans: list[Span] = []
        self._native = True  # False once a value needed the Python path: the column is not used

    def convert(self, records: RecordChunks) -> tuple[RecordChunks, tuple[RecordColumns, BadRecord] | None]:
        """The fetch buffer's converter: decode the values, stopping at the first that fails."""
        out: list[RecordColumns] = []
        for chunk in records.chunks:
            converted, bad = self._convert_chunk(chunk)
            if converted:
                out.append(converted)
            if bad is not None:
                return RecordChunks(out), (chunk, bad)
        return RecordChunks(out), None

    def _convert_chunk(self, chunk: RecordColumns) -> tuple[RecordColumns, BadRecord | None]:
        if self._native:
            try:
                bad = self._decode(chunk.values)
            except NativePlanUnavailable:
                self._native = False  # this poll's values go the Python way, this chunk's too
            else:
                if bad is None:
                    converted: RecordColumns = chunk
                else:
                    converted, bad = chunk.converted_until_failure(_same, _raising_at(bad))
                if converted:
                    self._spans.append(_span(converted))
                return converted, bad
        return chunk.converted_until_failure(_same, self._deserialize)

    def _decode(self, values: list[bytes | None]) -> BadRecord | None:
        start, stop = 0, len(values)
        plans = self._deserializer.native_plans()
        while True:
            done, status, why = self._builder.decode(values, start, stop, plans)
            start += done
            if status == _ALL_DECODED:
                return None
            value = values[start]
            try:
                self._deserialize(value)  # a schema to prepare, or a poison record: raised as by poll()
            except Exception as exc:
                return BadRecord(start, "value", exc)
            assert value is not None
            schema_id = wire.parse(value)[0]
            if status == _NOT_PLANNED:
                self._deserializer.add_native_plan(schema_id)  # prepared: it has a plan from now on
                continue
            # fastavro read it, the native decoder did not: its reason makes the record a poison record
            return BadRecord(start, "value", SchemaDeserializationError(
                f"schema id {schema_id}: the Avro payload does not match the schema: {why}", schema_id=schema_id))

    def column(self, chunks: Sequence[RecordColumns]) -> Any | None:
        """The decoded values of ``chunks`` (an object with ``__arrow_c_array__``), or None when
        the sink did not decode exactly those records."""
        if not self._native or [_span(c) for c in chunks if len(c)] != self._spans:
            return None
        return self._builder.finish()

    def python_value(self, value: Any) -> Any:
        """A value of a record for the Python path: bytes the sink left are decoded now."""
        return self._deserialize(value) if isinstance(value, bytes) else value


def _span(chunk: RecordColumns) -> Span:
    return (chunk.topic, chunk.partition, chunk.offsets[0], len(chunk))


def _same(data: Any) -> Any:
    return data


def _raising_at(bad: BadRecord) -> Callable[[Any], Any]:
    """A value converter that passes values through and raises ``bad.cause`` at ``bad.row``."""
    rows = count()

    def convert(value: Any) -> Any:
        if next(rows) == bad.row:
            raise bad.cause
        return value

    return convert
