"""Kafka wire primitives: a bytearray writer and a reader with a sticky error.

The reader never raises mid-message: after the first short or malformed read it records the
problem, returns zero values from then on, and `finish()` raises one ProtocolDecodeError. So
decoders need no per-field checks, and a length field of 2 GB is refused, never allocated.

Kafka 4.4 brokers refuse an array of more than ``MAX_ARRAY_LENGTH`` elements and a tagged-field
section of more than ``MAX_TAGGED_FIELD_COUNT`` fields (``MessageUtil`` in Kafka's clients); the
reader refuses the same in what it decodes, on the count alone, before reading any element.
"""

from __future__ import annotations

import struct
import uuid

from ..errors import ProtocolDecodeError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)

# Kafka 4.4's org.apache.kafka.common.protocol.MessageUtil.MAX_ARRAY_LENGTH and
# MAX_TAGGED_FIELD_COUNT: the most elements one array, and the most tagged fields one section, may
# hold in a request or response that a broker reads (it refuses more) or that we decode.
MAX_ARRAY_LENGTH = 1_000_000
MAX_TAGGED_FIELD_COUNT = 10_000


class Writer:
    """Appends Kafka primitives to one bytearray."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def float64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uvarint(self, v: int) -> None:
        if v < 0:
            raise ValueError(f"unsigned varint cannot hold {v}")
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def varint(self, v: int) -> None:
        """Zig-zag signed varint (also used for varlong: Python ints are unbounded)."""
        self.uvarint((v << 1) ^ (v >> 63))

    def uuid(self, v: uuid.UUID | None) -> None:
        self.buf += (v or ZERO_UUID).bytes

    def string(self, v: str | None) -> None:
        if v is None:
            self.int16(-1)
            return
        data = v.encode()
        self.int16(len(data))
        self.buf += data

    def compact_string(self, v: str | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        data = v.encode()
        self.uvarint(len(data) + 1)
        self.buf += data

    def bytes_(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.int32(-1)
            return
        self.int32(len(v))
        self.buf += v

    def compact_bytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        self.uvarint(len(v) + 1)
        self.buf += v

    def array_length(self, n: int | None, compact: bool) -> None:
        if compact:
            self.uvarint(0 if n is None else n + 1)
        else:
            self.int32(-1 if n is None else n)

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data


class Reader:
    """Reads Kafka primitives from a buffer; errors are sticky (see module docstring)."""

    __slots__ = ("_data", "_end", "error", "pos")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self._data = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
        self._end = len(self._data)
        self.pos = pos
        self.error: str | None = None

    @property
    def remaining(self) -> int:
        return self._end - self.pos

    def fail(self, why: str) -> None:
        if self.error is None:
            self.error = f"{why} at byte {self.pos} of {self._end}"
        self.pos = self._end

    def _take(self, n: int) -> int:
        """Reserve n bytes; returns their start or -1 (and sets the sticky error)."""
        start = self.pos
        if n < 0 or start + n > self._end:
            self.fail(f"needed {n} bytes, {self._end - start} left")
            return -1
        self.pos = start + n
        return start

    def _fixed(self, fmt: struct.Struct) -> int:
        start = self._take(fmt.size)
        if start < 0:
            return 0
        value: int = fmt.unpack_from(self._data, start)[0]
        return value

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def uint16(self) -> int:
        return self._fixed(_U16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def uint32(self) -> int:
        return self._fixed(_U32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def float64(self) -> float:
        start = self._take(8)
        if start < 0:
            return 0.0
        value: float = _F64.unpack_from(self._data, start)[0]
        return value

    def boolean(self) -> bool:
        return self._fixed(_I8) != 0

    def uvarint(self) -> int:
        data, pos, end = self._data, self.pos, self._end
        result = shift = 0
        while pos < end:
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.pos = pos
                return result
            shift += 7
            if shift > 63:
                self.fail("varint longer than 10 bytes")
                return 0
        self.fail("truncated varint")
        return 0

    def varint(self) -> int:
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def uuid(self) -> uuid.UUID:
        start = self._take(16)
        if start < 0:
            return ZERO_UUID
        return uuid.UUID(bytes=bytes(self._data[start:start + 16]))

    def _text(self, n: int) -> str | None:
        start = self._take(n)
        if start < 0:
            return None
        try:
            return str(self._data[start:start + n], "utf-8")
        except UnicodeDecodeError:
            self.fail("string is not valid UTF-8")
            return None

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            if n != -1:
                self._bad_length(n)
            return None
        return self._text(n) if n else ""

    def compact_string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._text(n) if n else ""

    def _view(self, n: int) -> memoryview | None:
        start = self._take(n)
        if start < 0:
            return None
        return self._data[start:start + n]

    def bytes_view(self) -> memoryview | None:
        """Nullable int32-length bytes as a zero-copy view."""
        n = self.int32()
        if n < 0:
            if n != -1:
                self._bad_length(n)
            return None
        return self._view(n)

    def compact_bytes_view(self) -> memoryview | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        return self._view(n)

    def array_length(self, compact: bool, min_item_size: int = 1) -> int:
        """Element count, -1 for null; refuses counts over MAX_ARRAY_LENGTH, and counts the
        remaining bytes cannot hold, before anything is read or allocated for the elements."""
        n = self.uvarint() - 1 if compact else self.int32()
        if n < -1:
            self.fail(f"negative array length {n}")
            return 0
        if n > MAX_ARRAY_LENGTH:
            self.fail(f"array of {n} elements is over Kafka's limit of {MAX_ARRAY_LENGTH} elements")
            return 0
        if n > 0 and n * min_item_size > self.remaining:
            self.fail(f"array of {n} items cannot fit in {self.remaining} bytes")
            return 0
        return n

    def tagged_field_count(self, what: str = "tagged fields") -> int:
        """The count opening a tagged-field section; refuses counts over MAX_TAGGED_FIELD_COUNT,
        and counts the remaining bytes cannot hold, before reading any field."""
        n = self.uvarint()
        if n > MAX_TAGGED_FIELD_COUNT:
            self.fail(f"{n} {what} are over Kafka's limit of {MAX_TAGGED_FIELD_COUNT} tagged fields")
            return 0
        if n > self.remaining:
            self.fail(f"{n} {what} cannot fit")
            return 0
        return n

    def skip(self, n: int) -> None:
        self._take(n)

    def _bad_length(self, n: int) -> None:
        self.fail(f"invalid length {n}")
        return None

    def finish(self, what: str, allow_trailing: bool = True) -> None:
        """Raise the sticky error, if any, as one ProtocolDecodeError naming the message."""
        if self.error is not None:
            raise ProtocolDecodeError(f"cannot decode {what}: {self.error}")
        if not allow_trailing and self.pos != self._end:
            raise ProtocolDecodeError(f"cannot decode {what}: {self._end - self.pos} trailing bytes")
