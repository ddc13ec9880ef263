"""RecordBatch magic v2: the header layout and the per-record decode loop (the client's hot path).

The record loop is written for CPython speed, not beauty: one function, locals only, varints
decoded inline for the one- and two-byte cases, keys and values sliced straight out of a ``bytes``
object into columns (see columns.py: no tuple per record until the caller iterates).
Bounds are not checked field by field: an ``IndexError`` from reading past the end, or a record
that does not end where its length said, becomes one ``CorruptRecordError``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import pairwise
from typing import NamedTuple

from aiokafka_lite.errors import CorruptRecordError
from aiokafka_lite.protocol.records.columns import Headers, RecordColumns

# baseOffset, batchLength | partitionLeaderEpoch, magic, crc | attributes ... recordsCount
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted by batchLength
CRC_START = 21  # the CRC covers attributes through the end of the batch
MAGIC_OFFSET = 16

TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

# Zigzag-decoded values of every one-byte and two-byte varint, so the hot loop only indexes
# (a shift or an add on ints costs more than a tuple index in CPython): _ZIGZAG[b] for one byte
# b < 0x80; _ZIGZAG2[c][b] for b >= 0x80 followed by c < 0x80 (entries b < 0x80 are unused).
_ZIGZAG = tuple((b >> 1) ^ -(b & 1) for b in range(128))
_ZIGZAG2 = tuple(tuple(((u := (c << 7) + (b & 0x7F)) >> 1) ^ -(u & 1) for b in range(256)) for c in range(128))
# A record's length varint read as the distance from its first byte to the record's end.
_RECORD_END1 = tuple(v + 1 for v in _ZIGZAG)
_RECORD_END2 = tuple(tuple(v + 2 for v in row) for row in _ZIGZAG2)
_NO_HEADERS: Headers = ()


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of a v2 RecordBatch, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int


def read_varint_slow(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint whose first byte has the continuation bit; returns (value, new pos)."""
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def decode_records(buf: bytes, pos: int, end: int, header: BatchHeader, min_offset: int,
                   topic: str, partition: int) -> RecordColumns:
    """Decode the records of one batch in ``buf[pos:end]``, keeping offsets >= ``min_offset``."""
    try:
        columns = _record_loop(buf, pos, end, header, topic, partition)
    except (IndexError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"record data is truncated or malformed ({exc})") from exc
    return columns.from_offset(min_offset)


def _record_loop(buf: bytes, pos: int, end: int, header: BatchHeader, topic: str,
                 partition: int) -> RecordColumns:
    zz = _ZIGZAG
    zz2 = _ZIGZAG2
    end1 = _RECORD_END1
    end2 = _RECORD_END2
    slow = read_varint_slow
    count = header.records_count
    base_ts = header.base_timestamp
    log_append = bool(header.attributes & TIMESTAMP_TYPE_BIT)
    timestamps: list[int] = []
    add_timestamp = timestamps.append
    keys: list[bytes | None] = []
    add_key = keys.append
    values: list[bytes | None] = []
    add_value = values.append
    deltas: list[int] | None = None  # offset deltas, kept only once one is not its record's index
    headers: dict[int, Headers] = {}
    # A records_count larger than the data ends in IndexError or in the final pos != end check.
    for index in range(count):
        # The record's end, and pos moved past its length and its (unused) attributes byte.
        b = buf[pos]
        if b < 0x80:
            record_end = pos + end1[b]
            pos += 2
        else:
            c = buf[pos + 1]
            if c < 0x80:
                record_end = pos + end2[c][b]
                pos += 3
            else:
                length, pos = slow(buf, pos)
                record_end = pos + length
                pos += 1
        b = buf[pos]
        if b < 0x80:
            ts_delta = zz[b]
            pos += 1
        else:
            c = buf[pos + 1]
            if c < 0x80:
                ts_delta = zz2[c][b]
                pos += 2
            else:
                ts_delta, pos = slow(buf, pos)
        add_timestamp(base_ts + ts_delta)
        b = buf[pos]
        if b < 0x80:
            offset_delta = zz[b]
            pos += 1
        else:
            c = buf[pos + 1]
            if c < 0x80:
                offset_delta = zz2[c][b]
                pos += 2
            else:
                offset_delta, pos = slow(buf, pos)
        if offset_delta != index or deltas is not None:
            if deltas is None:
                deltas = list(range(index))
            deltas.append(offset_delta)
        b = buf[pos]
        if b == 1:  # key length -1: no key (the common case on unkeyed topics)
            add_key(None)
            pos += 1
        else:
            if b < 0x80:
                size = zz[b]
                pos += 1
            else:
                c = buf[pos + 1]
                if c < 0x80:
                    size = zz2[c][b]
                    pos += 2
                else:
                    size, pos = slow(buf, pos)
            if size >= 0:
                stop = pos + size
                add_key(buf[pos:stop])
                pos = stop
            elif size == -1:  # an overlong encoding of -1
                add_key(None)
            else:
                raise CorruptRecordError(f"negative key length {size}")
        b = buf[pos]
        if b < 0x80:
            size = zz[b]
            pos += 1
        else:
            c = buf[pos + 1]
            if c < 0x80:
                size = zz2[c][b]
                pos += 2
            else:
                size, pos = slow(buf, pos)
        if size >= 0:
            stop = pos + size
            add_value(buf[pos:stop])
            pos = stop
        elif size == -1:
            add_value(None)
        else:
            raise CorruptRecordError(f"negative value length {size}")
        if buf[pos] == 0:
            pos += 1
        else:
            headers[index], pos = _read_headers(buf, pos)
        if pos != record_end:
            raise CorruptRecordError(f"record {index} of the batch does not end where its length says")
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left over after the batch's last record")
    if log_append:  # the broker's time, the same for every record
        timestamps = [header.max_timestamp] * count
    return RecordColumns(topic, partition, _offsets(header.base_offset, count, deltas), timestamps,
                         1 if log_append else 0, keys, values, _headers_column(headers, count),
                         leader_epoch(header))


def _offsets(base_offset: int, count: int, deltas: list[int] | None) -> Sequence[int]:
    if deltas is None:
        return range(base_offset, base_offset + count)
    if any(later <= earlier for earlier, later in pairwise(deltas)):
        raise CorruptRecordError("offset deltas do not ascend")
    return [base_offset + delta for delta in deltas]


def _headers_column(found: dict[int, Headers], count: int) -> list[Headers] | None:
    if not found:
        return None
    return [found.get(index, _NO_HEADERS) for index in range(count)]


def leader_epoch(header: BatchHeader) -> int | None:
    """The batch's partition leader epoch, or None when the batch carries none (-1)."""
    epoch = header.partition_leader_epoch
    return None if epoch == -1 else epoch


def _read_headers(buf: bytes, pos: int) -> tuple[Headers, int]:
    count, pos = read_varint(buf, pos)
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
    headers: list[tuple[str, bytes | None]] = []
    # Each header takes at least two bytes, so a huge count runs out of data (IndexError) quickly.
    for _ in range(count):
        size, pos = read_varint(buf, pos)
        if size < 0:
            raise CorruptRecordError(f"header key length {size}")
        name = buf[pos:pos + size].decode()
        pos += size
        size, pos = read_varint(buf, pos)
        if size >= 0:
            headers.append((name, buf[pos:pos + size]))
            pos += size
        elif size == -1:
            headers.append((name, None))
        else:
            raise CorruptRecordError(f"negative header value length {size}")
    return tuple(headers), pos


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return _ZIGZAG[b], pos + 1
    return read_varint_slow(buf, pos)


def control_type(buf: bytes, pos: int, end: int) -> int:
    """The type of a control batch's marker record: CONTROL_ABORT, CONTROL_COMMIT or another int.

    The record key is int16 version + int16 type; the value (coordinator epoch) is not needed.
    """
    try:
        _length, pos = read_varint(buf, pos)
        pos += 1
        _ts, pos = read_varint(buf, pos)
        _od, pos = read_varint(buf, pos)
        size, pos = read_varint(buf, pos)
        if size < 4 or pos + size > end:
            raise CorruptRecordError(f"control record key of {size} bytes is malformed")
        marker: int = struct.unpack_from(">h", buf, pos + 2)[0]
    except (IndexError, struct.error) as exc:
        raise CorruptRecordError(f"control record is truncated ({exc})") from exc
    return marker
