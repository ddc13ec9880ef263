"""Writer/Reader edge cases. Expected bytes are worked out by hand from the Kafka protocol guide."""

from __future__ import annotations

import time
import uuid

import pytest

from aiokafka_lite.errors import ProtocolDecodeError
from aiokafka_lite.protocol.primitives import ZERO_UUID, Reader, Writer


def written(method: str, value: object) -> bytes:
    w = Writer()
    getattr(w, method)(value)
    return bytes(w.buf)


# ---------------------------------------------------------------- varints

@pytest.mark.parametrize(("value", "wire"), [
    (0, b"\x00"),
    (1, b"\x01"),
    (127, b"\x7f"),
    (128, b"\x80\x01"),  # low 7 bits first, continuation bit set
    (300, b"\xac\x02"),
    (16383, b"\xff\x7f"),
    (16384, b"\x80\x80\x01"),
    (2**31 - 1, b"\xff\xff\xff\xff\x07"),
    (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    (2**64 - 1, b"\xff" * 9 + b"\x01"),
])
def test_unsigned_varint_boundaries(value: int, wire: bytes) -> None:
    assert written("uvarint", value) == wire
    r = Reader(wire)
    assert r.uvarint() == value
    assert r.remaining == 0
    r.finish("uvarint", allow_trailing=False)


@pytest.mark.parametrize(("value", "zigzag"), [
    (0, 0), (-1, 1), (1, 2), (-2, 3), (2, 4), (63, 126), (-64, 127), (64, 128),
    (2**31 - 1, 2**32 - 2), (-(2**31), 2**32 - 1),
    (2**63 - 1, 2**64 - 2), (-(2**63), 2**64 - 1),
])
def test_signed_varint_uses_zigzag(value: int, zigzag: int) -> None:
    wire = written("varint", value)
    assert wire == written("uvarint", zigzag)
    assert Reader(wire).varint() == value


def test_minus_one_and_int64_min_as_varint_bytes() -> None:
    assert written("varint", -1) == b"\x01"
    assert written("varint", -(2**63)) == b"\xff" * 9 + b"\x01"


def test_negative_unsigned_varint_is_refused() -> None:
    with pytest.raises(ValueError, match="-1"):
        Writer().uvarint(-1)


def test_varint_longer_than_ten_bytes_is_a_decode_error() -> None:
    r = Reader(b"\x80" * 11 + b"\x01")
    assert r.uvarint() == 0
    with pytest.raises(ProtocolDecodeError, match="longer than 10 bytes"):
        r.finish("varint")


def test_truncated_varint_is_a_decode_error() -> None:
    r = Reader(b"\x80\x80")
    assert r.uvarint() == 0
    with pytest.raises(ProtocolDecodeError, match="truncated varint"):
        r.finish("varint")


# ---------------------------------------------------------------- fixed-size values

@pytest.mark.parametrize(("method", "value", "wire"), [
    ("int8", -128, b"\x80"), ("int8", 127, b"\x7f"),
    ("int16", -1, b"\xff\xff"), ("int16", 32767, b"\x7f\xff"),
    ("uint16", 65535, b"\xff\xff"),
    ("int32", -(2**31), b"\x80\x00\x00\x00"), ("int32", 2**31 - 1, b"\x7f\xff\xff\xff"),
    ("uint32", 2**32 - 1, b"\xff\xff\xff\xff"),
    ("int64", -1, b"\xff" * 8), ("int64", 2**63 - 1, b"\x7f" + b"\xff" * 7),
    ("float64", 1.5, b"\x3f\xf8" + b"\x00" * 6),
    ("boolean", True, b"\x01"), ("boolean", False, b"\x00"),
])
def test_fixed_size_values_are_big_endian(method: str, value: object, wire: bytes) -> None:
    assert written(method, value) == wire
    assert getattr(Reader(wire), method)() == value


def test_any_nonzero_byte_reads_as_true() -> None:
    assert Reader(b"\x02").boolean() is True


def test_uuid_round_trip_and_none_is_the_zero_uuid() -> None:
    u = uuid.UUID("0123456789abcdef0123456789abcdef")
    assert written("uuid", u) == bytes.fromhex("0123456789abcdef0123456789abcdef")
    assert written("uuid", None) == b"\x00" * 16
    assert Reader(u.bytes).uuid() == u


# ---------------------------------------------------------------- strings and bytes

@pytest.mark.parametrize(("method", "value", "wire"), [
    ("string", None, b"\xff\xff"),
    ("string", "", b"\x00\x00"),
    ("string", "kafka", b"\x00\x05kafka"),
    ("string", "é", b"\x00\x02\xc3\xa9"),  # the length counts UTF-8 bytes, not characters
    ("compact_string", None, b"\x00"),
    ("compact_string", "", b"\x01"),
    ("compact_string", "kafka", b"\x06kafka"),
    ("bytes_", None, b"\xff\xff\xff\xff"),
    ("bytes_", b"", b"\x00\x00\x00\x00"),
    ("bytes_", b"\x00\x01", b"\x00\x00\x00\x02\x00\x01"),
    ("compact_bytes", None, b"\x00"),
    ("compact_bytes", b"", b"\x01"),
    ("compact_bytes", b"\xff", b"\x02\xff"),
])
def test_nullable_and_empty_strings_and_bytes(method: str, value: object, wire: bytes) -> None:
    assert written(method, value) == wire
    reader_method = {"bytes_": "bytes_view", "compact_bytes": "compact_bytes_view"}.get(method, method)
    r = Reader(wire)
    got = getattr(r, reader_method)()
    assert got == value if value is not None else got is None
    r.finish(method, allow_trailing=False)


def test_bytes_are_a_zero_copy_view_of_the_frame() -> None:
    frame = b"\x00\x00\x00\x03abc"
    view = Reader(frame).bytes_view()
    assert isinstance(view, memoryview)
    assert view.obj is frame
    assert bytes(view) == b"abc"


def test_reader_accepts_bytearray_and_non_byte_memoryviews() -> None:
    assert Reader(bytearray(b"\x00\x07")).int16() == 7
    words = memoryview(bytearray(b"\x00\x00\x00\x09")).cast("I")
    assert Reader(words).int32() == 9


@pytest.mark.parametrize("wire", [b"\x00\x02\xff\xfe", b"\x03\xc3\x28"])
def test_invalid_utf8_is_a_decode_error(wire: bytes) -> None:
    r = Reader(wire)
    text = r.string() if len(wire) == 4 else r.compact_string()
    assert text is None
    with pytest.raises(ProtocolDecodeError, match="UTF-8"):
        r.finish("string")


def test_negative_string_length_other_than_minus_one_is_refused() -> None:
    r = Reader(b"\xff\xfe")
    assert r.string() is None
    with pytest.raises(ProtocolDecodeError, match="invalid length -2"):
        r.finish("string")


# ---------------------------------------------------------------- oversize lengths

@pytest.mark.parametrize(("read", "wire"), [
    (lambda r: r.bytes_view(), b"\x7f\xff\xff\xff" + b"x" * 8),
    (lambda r: r.compact_bytes_view(), b"\x80\x80\x80\x80\x08" + b"x" * 8),  # 2**31 - 1 + 1
    (lambda r: r.compact_string(), b"\x80\x80\x80\x80\x08" + b"x" * 8),
    (lambda r: r.string(), b"\x7f\xff" + b"x" * 8),
    (lambda r: r.array_length(False), b"\x7f\xff\xff\xff" + b"x" * 8),
    (lambda r: r.array_length(True), b"\x80\x80\x80\x80\x08" + b"x" * 8),
])
def test_oversize_lengths_fail_fast_without_allocating(read: object, wire: bytes) -> None:
    r = Reader(wire)
    began = time.perf_counter()
    read(r)  # type: ignore[operator]
    assert time.perf_counter() - began < 0.1
    with pytest.raises(ProtocolDecodeError):
        r.finish("oversize")


def test_array_length_counts_minimum_item_size() -> None:
    assert Reader(b"\x00\x00\x00\x02" + b"\x00" * 8).array_length(False, min_item_size=4) == 2
    r = Reader(b"\x00\x00\x00\x03" + b"\x00" * 8)
    assert r.array_length(False, min_item_size=4) == 0
    with pytest.raises(ProtocolDecodeError, match="array of 3 items cannot fit in 8 bytes"):
        r.finish("array")


@pytest.mark.parametrize(("compact", "wire", "expected"), [
    (False, b"\xff\xff\xff\xff", -1),
    (True, b"\x00", -1),
    (False, b"\x00\x00\x00\x00", 0),
    (True, b"\x01", 0),
])
def test_null_and_empty_array_lengths(compact: bool, wire: bytes, expected: int) -> None:
    r = Reader(wire)
    assert r.array_length(compact) == expected
    r.finish("array", allow_trailing=False)


def test_negative_array_length_below_minus_one_is_refused() -> None:
    r = Reader(b"\xff\xff\xff\xfe")
    r.array_length(False)
    with pytest.raises(ProtocolDecodeError, match="negative array length -2"):
        r.finish("array")


def test_array_length_writer() -> None:
    assert written_array(None, False) == b"\xff\xff\xff\xff"
    assert written_array(None, True) == b"\x00"
    assert written_array(2, False) == b"\x00\x00\x00\x02"
    assert written_array(2, True) == b"\x03"


def written_array(n: int | None, compact: bool) -> bytes:
    w = Writer()
    w.array_length(n, compact)
    return bytes(w.buf)


# ---------------------------------------------------------------- the sticky error

def test_after_one_failure_every_read_returns_zero_and_finish_names_the_position() -> None:
    data = b"\x00\x01" + b"\x00\x09ab" + b"\x7f" * 12  # int16, then a string claiming 9 bytes
    r = Reader(data[:6])
    assert r.int16() == 1
    assert r.string() is None  # needs 9 bytes, 2 are left
    first_error = r.error
    assert first_error == "needed 9 bytes, 2 left at byte 4 of 6"
    # Every later read yields a zero value instead of raising...
    assert r.int8() == 0
    assert r.int16() == 0
    assert r.int32() == 0
    assert r.int64() == 0
    assert r.uint32() == 0
    assert r.float64() == 0.0
    assert r.boolean() is False
    assert r.uvarint() == 0
    assert r.varint() == 0
    assert r.uuid() == ZERO_UUID
    assert r.compact_string() is None
    assert r.string() == ""  # a zero length
    empty = r.bytes_view()
    assert empty is not None
    assert bytes(empty) == b""
    assert r.array_length(True) == -1
    # ...and the first failure is the one reported.
    assert r.error == first_error
    with pytest.raises(ProtocolDecodeError,
                       match=r"cannot decode thing: needed 9 bytes, 2 left at byte 4 of 6"):
        r.finish("thing")


def test_reads_after_a_failure_never_return_later_bytes() -> None:
    r = Reader(b"\x00\x00\x00\x05" + b"\x01\x02")  # bytes claiming 5, only 2 follow
    assert r.bytes_view() is None
    assert r.int8() == 0  # the 0x01 that follows must not be read as data
    assert r.remaining == 0


def test_finish_reports_trailing_bytes_only_when_asked() -> None:
    r = Reader(b"\x00\x01\x02")
    r.int16()
    r.finish("lenient")
    with pytest.raises(ProtocolDecodeError, match="1 trailing bytes"):
        r.finish("strict", allow_trailing=False)


def test_skip_past_the_end_fails() -> None:
    r = Reader(b"\x00")
    r.skip(2)
    with pytest.raises(ProtocolDecodeError, match="needed 2 bytes, 1 left at byte 0 of 1"):
        r.finish("skip")
