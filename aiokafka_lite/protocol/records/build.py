"""Encoding record batches (v2) and legacy message sets (v0/v1): for tests, tools and benchmarks.

The consumer never encodes records; this exists so tests can build any batch a broker could
send, including transactional, control, compacted (offset gaps) and LOG_APPEND_TIME ones.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from crc32c import crc32c

from aiokafka_lite.errors import ConfigError
from aiokafka_lite.protocol.compression import Codec, compress
from aiokafka_lite.protocol.records.v2 import (
    CONTROL_BIT,
    CRC_START,
    HEADER,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
)

_LEGACY_LOG_APPEND_BIT = 0x08


class RecordSpec(NamedTuple):
    """One record to encode. ``offset_delta`` None means "its index in the batch"."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None
    offset_delta: int | None = None


def encode_varint(value: int, out: bytearray) -> None:
    """Append ``value`` as a zigzag varint (Kafka's varint/varlong)."""
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def _encode_nullable(data: bytes | None, out: bytearray) -> None:
    if data is None:
        encode_varint(-1, out)
    else:
        encode_varint(len(data), out)
        out += data


def encode_record(record: RecordSpec, offset_delta: int, timestamp_delta: int, out: bytearray) -> None:
    """Append one v2 record (length-prefixed) to ``out``."""
    body = bytearray(b"\x00")  # record attributes
    encode_varint(timestamp_delta, body)
    encode_varint(offset_delta, body)
    _encode_nullable(record.key, body)
    _encode_nullable(record.value, body)
    encode_varint(len(record.headers), body)
    for name, value in record.headers:
        raw_name = name.encode()
        encode_varint(len(raw_name), body)
        body += raw_name
        _encode_nullable(value, body)
    encode_varint(len(body), out)
    out += body


def build_record_batch(records: Iterable[RecordSpec | tuple[bytes | None, bytes | None]], *,
                       base_offset: int = 0, codec: int = Codec.NONE, timestamp_type: int = 0,
                       base_timestamp: int = 1_700_000_000_000, max_timestamp: int | None = None,
                       producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                       transactional: bool = False, control: bool = False,
                       partition_leader_epoch: int = -1, last_offset_delta: int | None = None,
                       xerial: bool = False) -> bytes:
    """A complete v2 RecordBatch (with a correct CRC32C) holding ``records``.

    ``timestamp_type=1`` (LOG_APPEND_TIME) stamps ``max_timestamp`` as a broker would;
    ``last_offset_delta`` larger than the last record's delta simulates compaction.
    """
    specs = [r if isinstance(r, RecordSpec) else RecordSpec(*r) for r in records]
    body = bytearray()
    last_delta = -1
    timestamps = []
    for index, spec in enumerate(specs):
        delta = index if spec.offset_delta is None else spec.offset_delta
        ts = base_timestamp + index if spec.timestamp is None else spec.timestamp
        timestamps.append(ts)
        encode_record(spec, delta, ts - base_timestamp, body)
        last_delta = max(last_delta, delta)
    if last_offset_delta is None:
        last_offset_delta = max(last_delta, 0)
    if max_timestamp is None:
        max_timestamp = max(timestamps, default=base_timestamp)
    attributes = _v2_attributes(codec, timestamp_type, transactional, control)
    payload = compress(codec, bytes(body), xerial=xerial)
    header = bytearray(HEADER.pack(
        base_offset, HEADER.size - LOG_OVERHEAD + len(payload), partition_leader_epoch, 2, 0,
        attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
        base_sequence, len(specs)))
    batch = header + payload
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


def _v2_attributes(codec: int, timestamp_type: int, transactional: bool, control: bool) -> int:
    if codec not in tuple(Codec):
        raise ConfigError(f"unknown codec {codec}")
    attributes = int(codec)
    if timestamp_type == 1:
        attributes |= TIMESTAMP_TYPE_BIT
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    if control:
        attributes |= CONTROL_BIT
    return attributes


def build_control_batch(control_type: int, *, base_offset: int, producer_id: int, producer_epoch: int = 0,
                        coordinator_epoch: int = 0, timestamp: int = 1_700_000_000_000) -> bytes:
    """A transaction marker batch: control_type 0 = ABORT, 1 = COMMIT."""
    key = struct.pack(">hh", 0, control_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_record_batch([RecordSpec(key, value, timestamp=timestamp)], base_offset=base_offset,
                              base_timestamp=timestamp, producer_id=producer_id,
                              producer_epoch=producer_epoch, transactional=True, control=True)


def build_legacy_message_set(records: Iterable[RecordSpec | tuple[bytes | None, bytes | None]], *,
                             magic: int, base_offset: int = 0, codec: int = Codec.NONE,
                             timestamp_type: int = 0, base_timestamp: int = 1_700_000_000_000) -> bytes:
    """A v0/v1 message set; with a codec, one wrapper message around the inner set (snappy: xerial)."""
    if magic not in (0, 1):
        raise ConfigError(f"legacy magic must be 0 or 1, not {magic}")
    specs = [r if isinstance(r, RecordSpec) else RecordSpec(*r) for r in records]
    stamps = [base_timestamp + i if s.timestamp is None else s.timestamp for i, s in enumerate(specs)]
    if codec == Codec.NONE:
        return b"".join(_legacy_entry(base_offset + i, magic, 0, stamps[i], s.key, s.value)
                        for i, s in enumerate(specs))
    # v1 inner offsets are relative; v0 inner offsets are absolute.
    inner = b"".join(_legacy_entry(i if magic == 1 else base_offset + i, magic, 0, stamps[i], s.key, s.value)
                     for i, s in enumerate(specs))
    attributes = int(codec) | (_LEGACY_LOG_APPEND_BIT if timestamp_type == 1 and magic == 1 else 0)
    wrapper_ts = max(stamps, default=base_timestamp)
    return _legacy_entry(base_offset + len(specs) - 1, magic, attributes, wrapper_ts, None,
                         compress(codec, inner, xerial=True))


def _legacy_entry(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None,
                  value: bytes | None) -> bytes:
    body = bytearray(struct.pack(">bB", magic, attributes))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1 if field is None else len(field))
        body += field or b""
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message
