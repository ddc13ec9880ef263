"""Polled records as one Arrow record batch, in the columns of Spark's Kafka source.

``build_arrow_batch`` turns decoded ``RecordColumns`` into an ``ArrowBatch`` with the schema
``arrow_schema()``::

    key: binary, value: binary, topic: string not null, partition: int32 not null,
    offset: int64 not null, timestamp: timestamp[ms, tz=UTC] not null, timestampType: int32 not null,
    headers: list<item: struct<key: string not null, value: binary> not null> not null

A record without headers has an empty list. A binary or string column whose data passes 2**31-1
bytes becomes ``large_binary``/``large_string`` instead (per column, in both builders).

The native extension builds the batch in Rust memory without pyarrow; without the extension,
pyarrow builds the same batch (same schema, same values). Either way the batch speaks the Arrow
PyCapsule interface (a struct array, or a stream of one batch), so ``pyarrow.record_batch(batch)``,
``pyarrow.table(batch)``, polars or DuckDB take it without a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain, repeat
from typing import Any

from .errors import ArrowUnavailableError, InvalidArgumentError
from .protocol import native
from .protocol.records.columns import RecordChunks, RecordColumns
from .structs import ConsumerRecords

_I32_MAX = 2**31 - 1
_NONE = type(None)


def _pyarrow() -> Any:
    try:
        import pyarrow  # type: ignore[import-untyped, unused-ignore]
    except ImportError as exc:
        raise ArrowUnavailableError(f"pyarrow is not installed ({exc})") from exc
    return pyarrow


class ArrowBatch:
    """One Arrow record batch: the native ``ArrowRecords`` or a ``pyarrow.RecordBatch`` inside."""

    __slots__ = ("_batch",)

    def __init__(self, batch: Any) -> None:
        self._batch = batch

    @property
    def num_rows(self) -> int:
        return int(self._batch.num_rows)

    def __len__(self) -> int:
        return self.num_rows

    def __arrow_c_schema__(self) -> Any:
        """A PyCapsule "arrow_schema" (Arrow PyCapsule interface)."""
        if hasattr(self._batch, "__arrow_c_schema__"):
            return self._batch.__arrow_c_schema__()
        return self._batch.schema.__arrow_c_schema__()  # a pyarrow.RecordBatch has it on its schema

    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]:
        """PyCapsules "arrow_schema" and "arrow_array" of a struct array (Arrow PyCapsule interface).

        The native batch ignores ``requested_schema``; a pyarrow batch casts to it when it can.
        """
        return self._batch.__arrow_c_array__(requested_schema)  # type: ignore[no-any-return]

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """A PyCapsule "arrow_array_stream" of a stream of this one batch (Arrow PyCapsule interface).

        For consumers that take streams (DuckDB, ``pyarrow.table``, ``polars.DataFrame``; note that
        ``polars.from_arrow`` gives a struct Series for any capsule object). Each call makes a new
        stream; ``requested_schema`` is handled as by ``__arrow_c_array__``.
        """
        if hasattr(self._batch, "__arrow_c_stream__"):
            return self._batch.__arrow_c_stream__(requested_schema)
        pa = _pyarrow()  # an older pyarrow's RecordBatch has no __arrow_c_stream__; its reader has
        reader = pa.RecordBatchReader.from_batches(self._batch.schema, [self._batch])
        return reader.__arrow_c_stream__(requested_schema)

    def to_pyarrow(self) -> Any:
        """The batch as a ``pyarrow.RecordBatch`` (no copy); needs pyarrow."""
        pa = _pyarrow()
        if isinstance(self._batch, pa.RecordBatch):
            return self._batch
        return pa.record_batch(self._batch)

    def __repr__(self) -> str:
        return f"ArrowBatch({self.num_rows} rows)"


def build_arrow_batch(chunks: Sequence[RecordColumns], *, values: bool = True) -> ArrowBatch:
    """One batch of the records of ``chunks``, in order (no chunks: an empty batch, full schema).
    ``values=False``: the native builder leaves the value column null-typed, for a caller that puts
    decoded values there (the raw bytes are not copied for nothing)."""
    if native.active is not None:
        return ArrowBatch(native.active.records_to_arrow([_native_chunk(c) for c in chunks], values=values))
    check_available()
    return ArrowBatch(_build_with_pyarrow(chunks))


def _native_chunk(c: RecordColumns) -> tuple[Any, ...]:
    """What ``records_to_arrow`` takes: the batch's raw spans while no column was made, else the columns."""
    raw = c.raw_rows()
    if raw is not None:
        return (c.topic, c.partition, *raw)
    return (c.topic, c.partition, c.offsets, c.timestamps, c.timestamp_type, c.keys, c.values, c.headers)


def check_available() -> None:
    """Raise ArrowUnavailableError unless batches can be built (native extension or pyarrow)."""
    if native.active is not None:
        return
    try:
        _pyarrow()
    except ArrowUnavailableError as exc:
        raise ArrowUnavailableError(f"pyarrow is not installed and {native.why_python()}") from exc


def decoded_value_type(key_deserializer: Any, value_deserializer: Any) -> Any:
    """The Arrow type of the values poll_arrow() gives: None for bytes (no deserializers), or the
    type a value deserializer that can say it has (``arrow_type(pyarrow)``, as a schema registry's
    AvroDeserializer with a reader schema); other deserializers are refused (InvalidArgumentError),
    and typed values need pyarrow (ArrowUnavailableError), both before anything is consumed."""
    if key_deserializer is None and value_deserializer is None:
        check_available()
        return None
    typed = getattr(value_deserializer, "arrow_type", None)
    if key_deserializer is not None or not callable(typed):
        raise InvalidArgumentError("poll_arrow() hands out raw bytes, or values typed by a deserializer that "
                                   "gives their Arrow type (an AvroDeserializer with a reader_schema): use poll() "
                                   "with other deserializers, or leave them unset")
    value_type = typed(_pyarrow())
    if value_type is None:
        raise InvalidArgumentError("poll_arrow() types the value column by the AvroDeserializer's reader_schema: "
                                   "give it one")
    return value_type


def value_sink(value_deserializer: Any) -> Any:
    """The deserializer's native value column for one poll_arrow() (``arrow_sink()``, as an
    AvroDeserializer's), or None: the values are then decoded one by one and built by pyarrow."""
    make = getattr(value_deserializer, "arrow_sink", None)
    return make() if callable(make) else None


def batch_of(records: ConsumerRecords, value_type: Any = None, sink: Any = None) -> ArrowBatch:
    """One batch of a poll() result, partition after partition (no per-record objects on the way);
    with ``value_type``, the values are decoded data of that Arrow type: the ``sink``'s native
    column when it has one for these records, else built by pyarrow."""
    chunks: list[RecordColumns] = []
    for tp, held in records.sequences().items():
        if isinstance(held, RecordChunks):
            chunks.extend(held.chunks)
        elif isinstance(held, RecordColumns):
            chunks.append(held)
        else:
            chunks.append(RecordColumns.of(tp.topic, tp.partition, list(held)))
    if value_type is None:
        return build_arrow_batch(chunks)
    column = None if sink is None else sink.column(chunks)
    if column is None:
        return ArrowBatch(_build_with_pyarrow(chunks, value_type, None if sink is None else sink.python_value))
    pa = _pyarrow()
    batch = build_arrow_batch(chunks, values=False).to_pyarrow()
    return ArrowBatch(batch.set_column(1, pa.field("value", value_type), pa.array(column)))


def arrow_schema() -> Any:
    """The ``pyarrow.Schema`` of the batches (with 32-bit offsets: data under 2 GiB per column)."""
    pa = _pyarrow()
    return _schema(pa, pa.binary(), pa.binary(), pa.utf8(), _headers_type(pa, pa.utf8(), pa.binary()))


def _schema(pa: Any, key: Any, value: Any, topic: Any, headers: Any) -> Any:
    return pa.schema([
        pa.field("key", key), pa.field("value", value), pa.field("topic", topic, nullable=False),
        pa.field("partition", pa.int32(), nullable=False), pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("timestampType", pa.int32(), nullable=False), pa.field("headers", headers, nullable=False),
    ])


def _headers_type(pa: Any, key: Any, value: Any) -> Any:
    entry = pa.struct([pa.field("key", key, nullable=False), pa.field("value", value)])
    return pa.list_(pa.field("item", entry, nullable=False))


def _checked(items: list[Any], kind: type, what: str, nullable: bool = True) -> list[Any]:
    """``items``, or the native builder's TypeError when one is not a ``kind`` (nor None if ``nullable``).

    pyarrow alone would take a str as binary and a None key as a null in a non-null field.
    """
    if nullable and items and items[0] is None and items.count(None) == len(items):  # keys often are
        return items
    if ({kind, _NONE} if nullable else {kind}).issuperset(map(type, items)):  # one C loop
        return items
    for item in items:  # a subclass, or a wrong type: find which
        if not isinstance(item, kind) and not (nullable and item is None):
            allowed = f"{kind.__name__} or None" if nullable else kind.__name__
            raise TypeError(f"{what} must be {allowed}, not {type(item).__name__}")
    return items


def _variable(pa: Any, items: list[Any], small: Any, large: Any) -> Any:
    """``items`` as a ``small`` array, or ``large`` when the data overflows 32-bit offsets."""
    array = pa.array(items, type=small)
    if isinstance(array, pa.ChunkedArray):  # pyarrow splits what does not fit one small array
        array = pa.array(items, type=large)
    return array


def _headers(pa: Any, chunks: Sequence[RecordColumns]) -> Any:
    offsets: list[int] = [0]
    keys: list[str] = []
    values: list[bytes | None] = []
    for chunk in chunks:
        if chunk.headers is None:
            offsets.extend(repeat(len(keys), len(chunk)))
            continue
        for record in chunk.headers:
            for key, value in record:
                keys.append(key)
                values.append(value)
            offsets.append(len(keys))
    key_array = _variable(pa, _checked(keys, str, "header keys", nullable=False), pa.utf8(), pa.large_utf8())
    value_array = _variable(pa, _checked(values, bytes, "header values"), pa.binary(), pa.large_binary())
    list_type = _headers_type(pa, key_array.type, value_array.type)
    entries = pa.StructArray.from_arrays([key_array, value_array], fields=list(list_type.value_type))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), entries, type=list_type)


def _flat(chunks: Sequence[RecordColumns], column: str) -> list[Any]:
    return list(chain.from_iterable(getattr(chunk, column) for chunk in chunks))


def _decoded(values: list[Any], decode: Callable[[Any], Any] | None) -> list[Any]:
    return values if decode is None else list(map(decode, values))


def _repeated(chunks: Sequence[RecordColumns], column: str) -> list[Any]:
    return list(chain.from_iterable(repeat(getattr(chunk, column), len(chunk)) for chunk in chunks))


def _build_with_pyarrow(chunks: Sequence[RecordColumns], value_type: Any = None,
                        decode: Callable[[Any], Any] | None = None) -> Any:
    """The pure-Python twin of the native ``records_to_arrow``; with ``value_type``, the values are
    decoded data of that type (each passed through ``decode`` first, if given)."""
    pa = _pyarrow()
    topic_bytes = sum(len(chunk.topic.encode()) * len(chunk) for chunk in chunks)
    topic_type = pa.utf8() if topic_bytes <= _I32_MAX else pa.large_utf8()
    arrays = [
        _variable(pa, _checked(_flat(chunks, "keys"), bytes, "keys"), pa.binary(), pa.large_binary()),
        _variable(pa, _checked(_flat(chunks, "values"), bytes, "values"), pa.binary(), pa.large_binary())
        if value_type is None else pa.array(_decoded(_flat(chunks, "values"), decode), type=value_type),
        pa.array(_repeated(chunks, "topic"), type=topic_type),
        pa.array(_repeated(chunks, "partition"), type=pa.int32()),
        pa.array(_flat(chunks, "offsets"), type=pa.int64()),
        pa.array(_flat(chunks, "timestamps"), type=pa.timestamp("ms", tz="UTC")),
        pa.array(_repeated(chunks, "timestamp_type"), type=pa.int32()),
        _headers(pa, chunks),
    ]
    schema = _schema(pa, arrays[0].type, arrays[1].type, arrays[2].type, arrays[7].type)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
