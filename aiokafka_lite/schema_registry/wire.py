"""Confluent's wire format for schema-registry values: bytes in, (schema id, payload) out.

A framed value is the magic byte 0, the schema id as a 4-byte big-endian integer, then for
Protobuf the message-index list (a zig-zag varint count, then that many zig-zag varint indexes
into the schema's nested messages; the single byte 0 stands for [0], the first message), then the
payload itself. Sans-IO: no asyncio, no sockets. Every malformed input raises ``WireFormatError``
saying what is wrong; payloads are handed out as memoryviews of the input, never copied.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiokafka_lite.protocol.records.build import encode_varint
from aiokafka_lite.schema_registry.errors import WireFormatError

MAGIC_BYTE = 0
HEADER_SIZE = 5  # magic byte + schema id
# A varint of more than 10 bytes cannot be a 64-bit number; a count this large cannot be real
# (each index takes at least one byte), so neither is ever allocated for.
_MAX_VARINT_BYTES = 10
_MAX_SCHEMA_ID = 0xFFFFFFFF


def parse(value: bytes | bytearray | memoryview) -> tuple[int, memoryview]:
    """(schema id, payload) of a framed Avro or JSON Schema value."""
    view = memoryview(value).cast("B")
    if len(view) == 0:
        raise WireFormatError("empty value: a schema-registry value starts with the magic byte 0 and a schema id")
    if view[0] != MAGIC_BYTE:
        raise WireFormatError(f"unknown magic byte {view[0]} (0x{view[0]:02x}): Confluent's wire format starts "
                              f"with 0; the value is not framed for a schema registry")
    if len(view) < HEADER_SIZE:
        raise WireFormatError(f"value too short: {len(view)} bytes, the header alone (magic byte and "
                              f"schema id) takes {HEADER_SIZE}")
    return int.from_bytes(view[1:HEADER_SIZE], "big"), view[HEADER_SIZE:]


def parse_protobuf(value: bytes | bytearray | memoryview) -> tuple[int, list[int], memoryview]:
    """(schema id, message indexes, payload) of a framed Protobuf value."""
    schema_id, rest = parse(value)
    count, offset = _read_zigzag(rest, 0, "message-index count")
    if count < 0:
        raise WireFormatError(f"negative message-index count {count}")
    if count == 0:  # the shortcut for the first message: [0]
        return schema_id, [0], rest[offset:]
    if count > len(rest) - offset:
        raise WireFormatError(f"message-index count {count} is more than the {len(rest) - offset} bytes left")
    indexes = []
    for position in range(count):
        index, offset = _read_zigzag(rest, offset, f"message index {position}")
        if index < 0:
            raise WireFormatError(f"negative message index {index} at position {position}")
        indexes.append(index)
    return schema_id, indexes, rest[offset:]


def frame(schema_id: int, payload: bytes | bytearray | memoryview) -> bytes:
    """A framed Avro or JSON Schema value (for tests and tools)."""
    return _header(schema_id) + bytes(payload)


def frame_protobuf(schema_id: int, message_indexes: Sequence[int],
                   payload: bytes | bytearray | memoryview) -> bytes:
    """A framed Protobuf value; ``[0]`` is written as the one byte 0, as Confluent's serializers do."""
    if any(index < 0 for index in message_indexes):
        raise WireFormatError(f"message indexes must not be negative: {list(message_indexes)}")
    if list(message_indexes) in ([], [0]):
        indexes = b"\x00"
    else:
        out = bytearray()
        for number in (len(message_indexes), *message_indexes):
            encode_varint(number, out)
        indexes = bytes(out)
    return _header(schema_id) + indexes + bytes(payload)


def _header(schema_id: int) -> bytes:
    if not 0 <= schema_id <= _MAX_SCHEMA_ID:
        raise WireFormatError(f"schema id {schema_id} does not fit 4 unsigned bytes")
    return bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big")


def _read_zigzag(view: memoryview, offset: int, what: str) -> tuple[int, int]:
    """The zig-zag varint at ``offset`` and the offset after it."""
    raw, shift = 0, 0
    for position in range(offset, min(offset + _MAX_VARINT_BYTES, len(view))):
        byte = view[position]
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), position + 1
        shift += 7
    if len(view) - offset >= _MAX_VARINT_BYTES:
        raise WireFormatError(f"bad varint for the {what} at byte {HEADER_SIZE + offset}: longer than "
                              f"{_MAX_VARINT_BYTES} bytes")
    raise WireFormatError(f"bad varint for the {what} at byte {HEADER_SIZE + offset}: the value ends inside it")
