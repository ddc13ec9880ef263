"""Decoding the ``records`` field of a Fetch response partition into ConsumerRecords.

Layers, from cheap to expensive:

* ``iter_batches`` walks batch boundaries (two integers per batch) and yields lazy
  ``RecordBatch`` objects; a partial batch at the end is normal (the broker cuts at its size
  limit) and simply ends the walk.
* ``RecordBatch.records()`` checks the CRC, decompresses and decodes one batch.
* ``PartitionRecords`` is what the consumer holds per partition: it hands out records in
  ``take(n)`` slices, decodes a batch only when the previous one is used up, skips records below
  the fetch position, filters aborted transactions under read_committed, and keeps ``position``
  (the next offset to consume or fetch) correct even across control and compacted-away batches.

Sans-IO: bytes in, records out.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import Any, Final

from crc32c import crc32c

from aiokafka_lite.errors import CorruptRecordError, KafkaError, UnsupportedCodecError
from aiokafka_lite.protocol import native
from aiokafka_lite.protocol.compression import (
    CODEC_MASK,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    Codec,
    decompress,
)
from aiokafka_lite.protocol.records import legacy as records_legacy
from aiokafka_lite.protocol.records import v2 as records_v2
from aiokafka_lite.protocol.records.columns import RecordChunks, RecordColumns
from aiokafka_lite.protocol.records.v2 import (
    CONTROL_ABORT,
    CONTROL_BIT,
    CONTROL_COMMIT,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
)
from aiokafka_lite.structs import ConsumerRecord

__all__ = [
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "BatchHeader",
    "PartitionRecords",
    "RecordBatch",
    "decode_records",
    "first_batch_incomplete",
    "iter_batches",
]

_ENTRY = struct.Struct(">qi")
NO_PRODUCER_ID: Final = -1
Buffer = bytes | bytearray | memoryview


class RecordBatch:
    """One batch of a fetch response, decoded only when asked (v2, or a legacy v0/v1 entry)."""

    __slots__ = ("_buf", "_check_crcs", "_end", "_max_decompressed", "_start", "header", "partition",
                 "topic")

    def __init__(self, buf: Any, start: int, end: int, header: BatchHeader, topic: str,
                 partition: int, check_crcs: bool, max_decompressed: int) -> None:
        self._buf = buf  # bytes, or a native Frame (read by the Rust decoder in place)
        self._start = start
        self._end = end
        self.header = header
        self.topic = topic
        self.partition = partition
        self._check_crcs = check_crcs
        self._max_decompressed = max_decompressed

    @property
    def magic(self) -> int:
        return self.header.magic

    @property
    def base_offset(self) -> int:
        """First offset (for a legacy compressed entry: its wrapper's offset, i.e. the last one)."""
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.base_offset + self.header.last_offset_delta

    @property
    def next_offset(self) -> int:
        """Where fetching continues after this batch, even if compaction emptied it."""
        return self.last_offset + 1

    @property
    def codec(self) -> int:
        return self.header.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.header.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return self.header.magic == 2 and bool(self.header.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return self.header.magic == 2 and bool(self.header.attributes & CONTROL_BIT)

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def leader_epoch(self) -> int | None:
        return records_v2.leader_epoch(self.header)

    def validate_crc(self) -> None:
        """Raise CorruptRecordError unless the stored checksum matches the bytes."""
        if self.header.magic != 2:
            self._legacy_records(0)  # legacy CRCs are per message; decoding checks them
            return
        actual = crc32c(memoryview(self._buf)[self._start + records_v2.CRC_START:self._end])
        if actual != self.header.crc:
            raise self._corrupt(f"CRC32C mismatch: stored {self.header.crc:#010x}, computed {actual:#010x}")

    def records(self, min_offset: int = 0) -> RecordColumns:
        """The user records with offset >= ``min_offset`` (none for a control batch)."""
        if self.header.magic != 2:
            return self._legacy_records(min_offset)
        if self.is_control:
            return RecordColumns.of(self.topic, self.partition, ())
        if native.active is not None:
            return self._native_records(min_offset)
        if self._check_crcs:
            self.validate_crc()
        buf, pos, end = self._body()
        try:
            return records_v2.decode_records(buf, pos, end, self.header, min_offset, self.topic,
                                             self.partition)
        except CorruptRecordError as exc:
            raise self._corrupt(str(exc)) from exc

    def _native_records(self, min_offset: int) -> RecordColumns:
        """records() through the Rust decoder: the same columns and errors as the Python path, raised here."""
        try:
            offsets, timestamp_type, raw = native.active.decode_v2_raw(
                self._buf, self._start, self._end, self._check_crcs, self._max_decompressed)
        except CorruptRecordError as exc:
            raise self._corrupt(str(exc)) from exc
        except UnsupportedCodecError as exc:
            raise self._unsupported(exc) from exc
        # Keys, values, timestamps and headers are made on first access (never on the Arrow path).
        return RecordColumns.of_raw(self.topic, self.partition, offsets, timestamp_type, raw,
                                    self.leader_epoch).from_offset(min_offset)

    def control_type(self) -> int | None:
        """For a control batch, its marker type (CONTROL_ABORT / CONTROL_COMMIT); else None."""
        if not self.is_control:
            return None
        if self._check_crcs:
            self.validate_crc()
        buf, pos, end = self._body()
        try:
            return records_v2.control_type(buf, pos, end)
        except CorruptRecordError as exc:
            raise self._corrupt(str(exc)) from exc

    def _as_bytes(self) -> bytes:
        """The buffer as ``bytes`` for the pure-Python decoders: a native frame's batch is copied
        out once (they run on such a batch only for legacy and control batches, or after
        ``use_decoder('python')``)."""
        if type(self._buf) is not bytes:
            self._buf = bytes(memoryview(self._buf)[self._start:self._end])
            self._start, self._end = 0, self._end - self._start
        buf: bytes = self._buf
        return buf

    def _body(self) -> tuple[bytes, int, int]:
        """(buffer, start, end) of the record data, decompressed if needed."""
        buf = self._as_bytes()
        pos = self._start + HEADER_SIZE
        codec = self.codec
        if codec == Codec.NONE:
            return buf, pos, self._end
        try:
            plain = decompress(codec, memoryview(buf)[pos:self._end], self._max_decompressed)
        except CorruptRecordError as exc:
            raise self._corrupt(str(exc)) from exc
        except UnsupportedCodecError as exc:
            raise self._unsupported(exc) from exc
        return plain, 0, len(plain)

    def _legacy_records(self, min_offset: int) -> RecordColumns:
        try:
            found = records_legacy.decode_legacy_entry(
                self._as_bytes(), self._start, self._end, self.topic, self.partition,
                check_crcs=self._check_crcs, max_decompressed=self._max_decompressed)
        except CorruptRecordError as exc:
            raise self._corrupt(str(exc)) from exc
        return RecordColumns.of(self.topic, self.partition, [r for r in found if r.offset >= min_offset])

    def _unsupported(self, exc: UnsupportedCodecError) -> UnsupportedCodecError:
        return UnsupportedCodecError(f"{exc} (topic {self.topic!r}, partition {self.partition}, "
                                     f"batch base offset {self.base_offset})")

    def _corrupt(self, message: str) -> CorruptRecordError:
        if "(topic " in message:  # already carries its location
            return CorruptRecordError(message)
        return CorruptRecordError(message, self.topic, self.partition, self.base_offset)

    def __repr__(self) -> str:
        return (f"RecordBatch(magic={self.magic}, offsets={self.base_offset}..{self.last_offset}, "
                f"codec={self.codec}, control={self.is_control})")


_INT32 = struct.Struct(">i")
LEADER_EPOCH_AT = 12  # baseOffset 8, batchLength 4
LAST_OFFSET_DELTA_AT = 23  # baseOffset 8, batchLength 4, leaderEpoch 4, magic 1, crc 4, attributes 2


def fetch_continuation(data: Buffer) -> tuple[int, int] | None:
    """Where a fetch that continues ``data`` starts: the offset after its last complete batch, and
    that batch's partition leader epoch (-1: none, or a legacy entry), sent as the fetch's
    ``last_fetched_epoch`` (KIP-320). Reads only batch headers; None when no batch is complete or
    a header looks malformed (decoding the data then reports the problem)."""
    size = len(data)
    pos = 0
    found: tuple[int, int] | None = None
    while size - pos >= LOG_OVERHEAD:
        base_offset, length = _ENTRY.unpack_from(data, pos)
        end = pos + LOG_OVERHEAD + length
        if length < records_legacy.MIN_MESSAGE_SIZE or end > size:
            break
        magic = data[pos + records_v2.MAGIC_OFFSET]
        if magic == 2:
            if length < HEADER_SIZE - LOG_OVERHEAD:
                return None
            last = base_offset + _INT32.unpack_from(data, pos + LAST_OFFSET_DELTA_AT)[0]
            found = last + 1, _INT32.unpack_from(data, pos + LEADER_EPOCH_AT)[0]
        elif magic in (0, 1):
            found = base_offset + 1, -1  # a legacy entry's offset is its last message's
        else:
            return None
        pos = end
    return found


def _in_place(data: Buffer) -> tuple[Any, int, int]:
    """``(buf, start, end)``: where ``data``'s bytes are. A fetch response's records are a view into
    the response frame (``bytes``, or a native ``Frame`` the reader thread filled); the native
    extension finds the frame and the offset, so the batches are decoded in place, else they are
    copied out once."""
    if type(data) is bytes:
        return data, 0, len(data)
    locate = getattr(native.active, "view_in_bytes", None)
    found = locate(data) if locate is not None and isinstance(data, memoryview) else None
    if found is not None:
        frame, start = found
        return frame, start, start + len(data)
    copied = bytes(data)
    return copied, 0, len(copied)


def iter_batches(data: Buffer, topic: str, partition: int, *, check_crcs: bool = True,
                 max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> Iterator[RecordBatch]:
    """Yield each complete batch in ``data``; stop quietly at a partial trailing batch."""
    buf, pos, size = _in_place(data)
    scan = buf if type(buf) is bytes else memoryview(buf)  # a received frame: read through a view
    while size - pos >= LOG_OVERHEAD:
        base_offset, length = _ENTRY.unpack_from(scan, pos)
        if length < records_legacy.MIN_MESSAGE_SIZE:
            raise CorruptRecordError(f"batch length {length} is too small", topic, partition, base_offset)
        end = pos + LOG_OVERHEAD + length
        if end > size:
            return  # cut by the broker's size limit: fetch again from here
        header = _read_header(scan, pos, length, topic, partition)
        yield RecordBatch(buf, pos, end, header, topic, partition, check_crcs, max_decompressed_bytes)
        pos = end


def _read_header(buf: bytes | memoryview, pos: int, length: int, topic: str, partition: int) -> BatchHeader:
    magic = buf[pos + records_v2.MAGIC_OFFSET]
    if magic == 2:
        if length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"v2 batch length {length} is shorter than its header",
                                     topic, partition, _ENTRY.unpack_from(buf, pos)[0])
        return BatchHeader._make(HEADER.unpack_from(buf, pos))
    offset = _ENTRY.unpack_from(buf, pos)[0]
    if magic in (0, 1):
        # The entry offset is the last offset of its (possibly wrapped) messages.
        crc, attributes = struct.unpack_from(">IxB", buf, pos + LOG_OVERHEAD)
        return BatchHeader(offset, length, -1, magic, crc, attributes, 0, -1, -1, NO_PRODUCER_ID, -1, -1, 1)
    raise CorruptRecordError(f"unknown record batch magic {magic}", topic, partition, offset)


def first_batch_incomplete(data: Buffer) -> bool:
    """True if ``data`` holds bytes but not one complete batch (a record bigger than the fetch size)."""
    if len(data) == 0:
        return False
    if len(data) < LOG_OVERHEAD:
        return True
    length: int = _ENTRY.unpack_from(data, 0)[1]
    return length >= 0 and LOG_OVERHEAD + length > len(data)


class _AbortedTransactions:
    """read_committed bookkeeping: which producers are inside an aborted transaction right now.

    A producer enters the set once batches reach the first offset of one of its aborted
    transactions (from the Fetch response) and leaves it at its ABORT control marker.
    """

    __slots__ = ("_active", "_index", "_pending")

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        self._pending = sorted(aborted, key=lambda entry: entry[1])
        self._index = 0
        self._active: set[int] = set()

    def should_skip(self, batch: RecordBatch) -> bool:
        """Update the state for ``batch`` and say whether its records must be dropped."""
        if batch.producer_id == NO_PRODUCER_ID:
            return batch.is_control
        last = batch.last_offset
        while self._index < len(self._pending) and self._pending[self._index][1] <= last:
            self._active.add(self._pending[self._index][0])
            self._index += 1
        if batch.is_control:
            if batch.control_type() == CONTROL_ABORT:
                self._active.discard(batch.producer_id)
            return True
        return batch.is_transactional and batch.producer_id in self._active


class PartitionRecords:
    """The decoded view of one partition's fetched bytes, consumed with ``take()``.

    ``position`` is the next offset to hand out (or to fetch from once this is used up).
    A corrupt batch stops the stream: records before it are still handed out, then ``take()``
    raises the error (every time) with ``position`` left at the corrupt batch.
    """

    __slots__ = ("_batches", "_current", "_current_next", "_done", "_error", "_index", "_transactions",
                 "partition", "position", "position_leader_epoch", "record_too_large", "topic")

    def __init__(self, topic: str, partition: int, data: Buffer, fetch_offset: int, *,
                 check_crcs: bool = True, read_committed: bool = False,
                 aborted_transactions: Iterable[tuple[int, int]] | None = None,
                 max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> None:
        self.topic = topic
        self.partition = partition
        self.position = fetch_offset
        self.position_leader_epoch: int | None = None
        self.record_too_large = first_batch_incomplete(data)
        self._batches = iter_batches(data, topic, partition, check_crcs=check_crcs,
                                     max_decompressed_bytes=max_decompressed_bytes)
        self._transactions = _AbortedTransactions(aborted_transactions or ()) if read_committed else None
        self._current = RecordColumns.of(topic, partition, ())
        self._index = 0
        self._current_next = fetch_offset
        self._error: KafkaError | None = None
        self._done = False

    @property
    def error(self) -> KafkaError | None:
        """The error that stopped decoding, raised by ``take()`` once the records before it are out."""
        return self._error

    @property
    def exhausted(self) -> bool:
        """Nothing left to hand out (an error still pending counts as something)."""
        return self._done and self._error is None and self._index >= len(self._current)

    def take(self, max_records: int | None = None) -> RecordChunks:
        """Up to ``max_records`` records (all that remain if None), decoding batches as needed."""
        out: list[RecordColumns] = []
        wanted = -1 if max_records is None else max_records
        while wanted != 0:
            if self._index < len(self._current):
                wanted -= self._hand_out(out, wanted)
            elif not self._load_next_batch():
                break
        if not out and self._error is not None:
            raise self._error
        return RecordChunks(out)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while True:
            chunk = self.take(500)
            if not chunk:
                return
            yield from chunk

    def _hand_out(self, out: list[RecordColumns], wanted: int) -> int:
        """Move up to ``wanted`` (all if negative) records of the current batch to ``out``; returns how many."""
        current = self._current
        start = self._index
        stop = len(current) if wanted < 0 else min(len(current), start + wanted)
        out.append(current[start:stop] if start or stop < len(current) else current)
        self._index = stop
        self.position = current.offsets[stop - 1] + 1
        self.position_leader_epoch = current.leader_epoch
        if stop == len(current):
            self.position = max(self.position, self._current_next)
        return stop - start

    def _load_next_batch(self) -> bool:
        """Decode the next batch that has records for us; False at the end or on an error."""
        if self._done or self._error is not None:
            return False
        try:
            for batch in self._batches:
                records = self._records_of(batch)
                if records:
                    self._current, self._index, self._current_next = records, 0, batch.next_offset
                    return True
                if batch.next_offset > self.position:
                    self.position = batch.next_offset
                    self.position_leader_epoch = batch.leader_epoch
        except KafkaError as exc:
            self._error = exc
            return False
        self._done = True
        return False

    def _records_of(self, batch: RecordBatch) -> RecordColumns | None:
        if self._transactions is not None and self._transactions.should_skip(batch):
            return None
        if batch.is_control or batch.next_offset <= self.position:
            return None
        return batch.records(self.position)


def decode_records(data: Buffer, topic: str, partition: int, fetch_offset: int = 0, *,
                   check_crcs: bool = True, read_committed: bool = False,
                   aborted_transactions: Iterable[tuple[int, int]] | None = None,
                   max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> list[ConsumerRecord]:
    """Every record in ``data`` from ``fetch_offset`` on; any decoding error is raised."""
    reader = PartitionRecords(topic, partition, data, fetch_offset, check_crcs=check_crcs,
                              read_committed=read_committed, aborted_transactions=aborted_transactions,
                              max_decompressed_bytes=max_decompressed_bytes)
    records = list(reader.take())
    if reader.error is not None:
        raise reader.error
    return records
