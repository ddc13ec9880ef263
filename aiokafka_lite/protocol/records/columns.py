"""Decoded records kept column by column; ConsumerRecord tuples are built only while iterating.

Why columns: a decoded record held as a tuple is a garbage-collector-tracked object. A poll()
result of thousands of tuples survives young collections and is promoted, which makes CPython
run full collections over the whole heap again and again (about a fifth of a consumer's CPU time
at 100-byte records). Keys, values and integers are not tracked, so columns of them cost the
collector nothing; the tuples made while a caller iterates are freed one by one by reference
counting. Building them with ``map``/``zip`` keeps that per-record work in C; with the native
decoder active, ``_native.iter_records`` builds each record directly (no intermediate tuple,
about 1.5-1.7x faster to iterate), giving the same ConsumerRecord sequence.

Iterating twice gives equal records, not the same objects. Sans-IO.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from itertools import chain, repeat
from typing import Any, NamedTuple, overload

from aiokafka_lite.protocol import native
from aiokafka_lite.structs import ConsumerRecord

Headers = Sequence[tuple[str, bytes | None]]
_make_record = partial(tuple.__new__, ConsumerRecord)


class BadRecord(NamedTuple):
    """Where a conversion stopped: the record's row, which deserializer raised, and what it raised."""

    row: int
    origin: str  # "key" or "value"
    cause: Exception


class RecordColumns(Sequence[ConsumerRecord]):
    """The records of one batch (or a slice of it): one list per varying field.

    Built by the native decoder from a ``RawRecords`` (spans into the batch's bytes), the keys,
    values, timestamps and headers are made on first access (all four at once, then kept), so the
    Arrow path (``raw_rows()``) never creates them. Offsets are always there.
    """

    __slots__ = ("_headers", "_keys", "_raw", "_raw_start", "_raw_stop", "_timestamps", "_values", "leader_epoch",
                 "offsets", "partition", "timestamp_type", "topic")

    def __init__(self, topic: str, partition: int, offsets: Sequence[int], timestamps: Sequence[int],
                 timestamp_type: int, keys: list[Any], values: list[Any], headers: Sequence[Headers] | None,
                 leader_epoch: int | None) -> None:
        self.topic = topic
        self.partition = partition
        self.offsets = offsets  # a range when the batch's offsets have no gaps
        self._timestamps = timestamps
        self.timestamp_type = timestamp_type
        self._keys = keys
        self._values = values
        self._headers = headers  # None: no record has headers
        self.leader_epoch = leader_epoch
        self._raw: Any = None  # a native RawRecords while the four columns above are not made yet
        self._raw_start = self._raw_stop = 0

    @classmethod
    def of_raw(cls, topic: str, partition: int, offsets: Sequence[int], timestamp_type: int, raw: Any,
               leader_epoch: int | None, start: int = 0, stop: int | None = None) -> RecordColumns:
        """Records ``start:stop`` of a native ``RawRecords`` (``offsets``: theirs); columns made when read."""
        columns = cls(topic, partition, offsets, [], timestamp_type, [], [], None, leader_epoch)
        columns._raw = raw
        columns._raw_start = start
        columns._raw_stop = len(raw) if stop is None else stop
        return columns

    def _materialise(self) -> None:
        raw = self._raw
        if raw is not None:
            self._timestamps, self._keys, self._values, self._headers = raw.columns(self._raw_start, self._raw_stop)
            self._raw = None

    @property
    def timestamps(self) -> Sequence[int]:
        self._materialise()
        return self._timestamps

    @property
    def keys(self) -> list[Any]:
        self._materialise()
        return self._keys

    @property
    def values(self) -> list[Any]:
        self._materialise()
        return self._values

    @property
    def headers(self) -> Sequence[Headers] | None:
        self._materialise()
        return self._headers

    def raw_rows(self) -> tuple[Any, int, int] | None:
        """``(RawRecords, start, stop)`` while the columns are not made and fit Arrow's int64 (else None)."""
        raw = self._raw
        if raw is None or not raw.narrow:
            return None
        return raw, self._raw_start, self._raw_stop

    @classmethod
    def of(cls, topic: str, partition: int, records: Sequence[ConsumerRecord]) -> RecordColumns:
        """Columns from records of one partition (legacy message sets are decoded record by record)."""
        if not records:
            return cls(topic, partition, [], [], 0, [], [], None, None)
        return cls(topic, partition, [r.offset for r in records], [r.timestamp for r in records],
                   records[0].timestamp_type, [r.key for r in records], [r.value for r in records],
                   [r.headers for r in records], records[-1].leader_epoch)

    def __len__(self) -> int:
        if self._raw is not None:
            return self._raw_stop - self._raw_start
        return len(self._values)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        if native.active is not None:  # the same records, built without the intermediate tuple
            it: Iterator[ConsumerRecord] = native.active.iter_records(
                ConsumerRecord, self.topic, self.partition, self.offsets, self.timestamps, self.timestamp_type,
                self.keys, self.values, self.headers, self.leader_epoch)
            return it
        headers = repeat(()) if self.headers is None else self.headers
        return map(_make_record, zip(repeat(self.topic, len(self.values)), repeat(self.partition), self.offsets,
                                     self.timestamps, repeat(self.timestamp_type), self.keys, self.values,
                                     headers, repeat(self.leader_epoch)))

    @overload
    def __getitem__(self, index: int) -> ConsumerRecord: ...

    @overload
    def __getitem__(self, index: slice) -> RecordColumns: ...

    def __getitem__(self, index: int | slice) -> ConsumerRecord | RecordColumns:
        if isinstance(index, slice):
            if self._raw is not None:
                return self._raw_slice(index)
            return RecordColumns(self.topic, self.partition, self.offsets[index], self.timestamps[index],
                                 self.timestamp_type, self.keys[index], self.values[index],
                                 None if self.headers is None else self.headers[index], self.leader_epoch)
        return ConsumerRecord(self.topic, self.partition, self.offsets[index], self.timestamps[index],
                              self.timestamp_type, self.keys[index], self.values[index],
                              () if self.headers is None else self.headers[index], self.leader_epoch)

    def _raw_slice(self, index: slice) -> RecordColumns:
        rows = range(self._raw_start, self._raw_stop)[index]
        if rows.step != 1:
            self._materialise()
            return self[index]
        return RecordColumns.of_raw(self.topic, self.partition, self.offsets[index], self.timestamp_type, self._raw,
                                    self.leader_epoch, rows.start, max(rows.start, rows.stop))

    def from_offset(self, min_offset: int) -> RecordColumns:
        """The records with offset >= ``min_offset`` (offsets ascend within a batch)."""
        if not self.offsets or self.offsets[0] >= min_offset:
            return self
        return self[bisect_left(self.offsets, min_offset):]

    def converted_until_failure(self, key_deserializer: Callable[[Any], Any],
                                value_deserializer: Callable[[Any], Any]) -> tuple[RecordColumns, BadRecord | None]:
        """A copy with the keys and values passed through the deserializers, column by column.

        If a deserializer raises, the copy holds the records before the first one that failed (its
        key or its value) and the second item says which record that is (its row) and why; else it is None.
        ``list.extend`` keeps what it made before the raise, so finding the record costs nothing
        extra and no deserializer sees a record twice.
        """
        keys: list[Any] = []
        values: list[Any] = []
        bad: BadRecord | None = None
        try:
            keys.extend(map(key_deserializer, self.keys))
        except Exception as exc:
            bad = BadRecord(len(keys), "key", exc)
        try:
            values.extend(map(value_deserializer, self.values if bad is None else self.values[:bad.row]))
        except Exception as exc:
            bad = BadRecord(len(values), "value", exc)  # a record before the bad key: it comes first
        if bad is None:
            return RecordColumns(self.topic, self.partition, self.offsets, self.timestamps, self.timestamp_type,
                                 keys, values, self.headers, self.leader_epoch), None
        good = slice(0, bad.row)
        return RecordColumns(self.topic, self.partition, self.offsets[good], self.timestamps[good],
                             self.timestamp_type, keys[good], values[good],
                             None if self.headers is None else self.headers[good], self.leader_epoch), bad

    def __repr__(self) -> str:
        span = f"{self.offsets[0]}..{self.offsets[-1]}" if self.offsets else "empty"
        return f"RecordColumns({self.topic}-{self.partition}, offsets {span})"


class RecordChunks(Sequence[ConsumerRecord]):
    """Several RecordColumns of one partition read as one sequence (what poll() holds per partition)."""

    __slots__ = ("_flat", "chunks")

    def __init__(self, chunks: list[RecordColumns]) -> None:
        self.chunks = chunks
        self._flat: list[ConsumerRecord] | None = None

    def __len__(self) -> int:
        return sum(map(len, self.chunks))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return chain.from_iterable(self.chunks)

    @overload
    def __getitem__(self, index: int) -> ConsumerRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[ConsumerRecord]: ...

    def __getitem__(self, index: int | slice) -> ConsumerRecord | list[ConsumerRecord]:
        if self._flat is None:
            self._flat = list(self)
        return self._flat[index]

    def __repr__(self) -> str:
        return f"RecordChunks({len(self)} records in {len(self.chunks)} chunks)"
