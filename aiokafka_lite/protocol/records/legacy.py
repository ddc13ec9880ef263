"""Legacy message sets, magic v0 and v1 (Kafka before 0.11), as brokers may still serve them.

Each entry is ``offset int64, size int32, message``; a message is ``crc uint32, magic int8,
attributes int8, [timestamp int64 if v1], key bytes, value bytes`` with the CRC32 over magic..end.
A compressed message is a *wrapper*: its value is a whole inner message set. In v1 the inner
offsets are relative and the wrapper carries the absolute offset of the last inner message.
"""

from __future__ import annotations

import struct
import zlib

from aiokafka_lite.errors import CorruptRecordError
from aiokafka_lite.protocol.compression import CODEC_MASK, Codec, decompress
from aiokafka_lite.structs import ConsumerRecord

_ENTRY = struct.Struct(">qi")
_V0 = struct.Struct(">IbB")  # crc, magic, attributes
_V1 = struct.Struct(">IbBq")  # crc, magic, attributes, timestamp
_INT32 = struct.Struct(">i")
ENTRY_OVERHEAD = 12
MIN_MESSAGE_SIZE = 14  # v0: crc + magic + attributes + two null lengths
NO_TIMESTAMP_TYPE = -1  # v0 messages carry no timestamp (Java's TimestampType.NO_TIMESTAMP_TYPE)
_LOG_APPEND_TIME_BIT = 0x08


class _Message:
    __slots__ = ("attributes", "key", "magic", "offset", "timestamp", "value")

    def __init__(self, offset: int, magic: int, attributes: int, timestamp: int,
                 key: bytes | None, value: bytes | None) -> None:
        self.offset = offset
        self.magic = magic
        self.attributes = attributes
        self.timestamp = timestamp
        self.key = key
        self.value = value


def decode_legacy_entry(buf: bytes, pos: int, end: int, topic: str, partition: int, *,
                        check_crcs: bool, max_decompressed: int) -> list[ConsumerRecord]:
    """All records of the top-level entry at ``buf[pos:end]`` (several if it is a wrapper)."""
    try:
        outer = _read_message(buf, pos, end, check_crcs)
        if outer.attributes & CODEC_MASK == Codec.NONE:
            return [_to_record(outer, outer.offset, topic, partition, None)]
        return _unwrap(outer, topic, partition, check_crcs, max_decompressed)
    except (IndexError, struct.error) as exc:
        raise CorruptRecordError(f"legacy message is truncated ({exc})") from exc


def _read_message(buf: bytes, pos: int, end: int, check_crcs: bool) -> _Message:
    offset, size = _ENTRY.unpack_from(buf, pos)
    start = pos + ENTRY_OVERHEAD
    stop = start + size
    if size < MIN_MESSAGE_SIZE or stop > end:
        raise CorruptRecordError(f"legacy message size {size} is invalid")
    crc, magic, attributes = _V0.unpack_from(buf, start)
    if magic not in (0, 1):
        raise CorruptRecordError(f"inner message has magic {magic}")
    if check_crcs and zlib.crc32(memoryview(buf)[start + 4:stop]) != crc:
        raise CorruptRecordError(f"CRC32 mismatch in legacy message at offset {offset}")
    pos = start + 6
    timestamp = -1
    if magic == 1:
        timestamp = struct.unpack_from(">q", buf, pos)[0]
        pos += 8
    key, pos = _read_bytes(buf, pos, stop)
    value, pos = _read_bytes(buf, pos, stop)
    if pos != stop:
        raise CorruptRecordError(f"legacy message size {size} does not match its contents")
    return _Message(offset, magic, attributes, timestamp, key, value)


def _read_bytes(buf: bytes, pos: int, stop: int) -> tuple[bytes | None, int]:
    (size,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if size == -1:
        return None, pos
    if size < 0 or pos + size > stop:
        raise CorruptRecordError(f"legacy message field length {size} is invalid")
    return buf[pos:pos + size], pos + size


def _unwrap(outer: _Message, topic: str, partition: int, check_crcs: bool,
            max_decompressed: int) -> list[ConsumerRecord]:
    if outer.value is None:
        raise CorruptRecordError("compressed legacy wrapper has no value")
    inner_buf = decompress(outer.attributes & CODEC_MASK, outer.value, max_decompressed)
    inner: list[_Message] = []
    pos = 0
    while pos < len(inner_buf):
        if pos + ENTRY_OVERHEAD > len(inner_buf):
            raise CorruptRecordError("inner message set is truncated")
        message = _read_message(inner_buf, pos, len(inner_buf), check_crcs)
        if message.attributes & CODEC_MASK:
            raise CorruptRecordError("nested compression in a legacy message set")
        inner.append(message)
        pos += ENTRY_OVERHEAD + _INT32.unpack_from(inner_buf, pos + 8)[0]
    if not inner:
        return []
    shift = outer.offset - inner[-1].offset if outer.magic == 1 else 0
    wrapper_ts = outer.timestamp if outer.attributes & _LOG_APPEND_TIME_BIT else None
    return [_to_record(m, m.offset + shift, topic, partition, wrapper_ts) for m in inner]


def _to_record(message: _Message, offset: int, topic: str, partition: int,
               wrapper_ts: int | None) -> ConsumerRecord:
    if message.magic == 0:
        ts, ts_type = -1, NO_TIMESTAMP_TYPE
    elif wrapper_ts is not None or message.attributes & _LOG_APPEND_TIME_BIT:
        ts, ts_type = (wrapper_ts if wrapper_ts is not None else message.timestamp), 1
    else:
        ts, ts_type = message.timestamp, 0
    return ConsumerRecord(topic, partition, offset, ts, ts_type, message.key, message.value, (), None)
