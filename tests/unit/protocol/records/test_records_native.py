"""The Rust decoder's own guarantees: bounded decompression per codec, typed errors, no panics."""

from __future__ import annotations

import gzip
import resource
import struct
import zlib

import cramjam
import pytest
from crc32c import crc32c

from aiokafka_lite.errors import CorruptRecordError, NativeError, UnsupportedCodecError
from aiokafka_lite.protocol import native
from aiokafka_lite.protocol.compression import Codec, compress
from aiokafka_lite.protocol.records.build import RecordSpec, build_record_batch
from aiokafka_lite.protocol.records.decode import decode_records
from tests.decoders import require_native

BOMB_SIZE = 512 * 1024 * 1024  # zeros that compress to well under a megabyte


@pytest.fixture(autouse=True)
def _native_decoder() -> object:
    require_native()
    before = native.decoder()
    native.use_decoder("native")
    yield
    native.use_decoder(before)


def with_body(body: bytes, codec: int, count: int = 1) -> bytes:
    """A v2 batch around an arbitrary (compressed) body, with a correct CRC."""
    header = bytearray(struct.pack(">qiibIhiqqqhii", 0, 49 + len(body), -1, 2, 0, codec, 0,
                                   1_700_000_000_000, 1_700_000_000_000, -1, -1, -1, count))
    batch = header + body
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def _bomb(codec: Codec) -> bytes:
    if codec == Codec.GZIP:
        squeezer = zlib.compressobj(9, wbits=31)
        chunk = bytes(1 << 20)
        return b"".join(squeezer.compress(chunk) for _ in range(BOMB_SIZE >> 20)) + squeezer.flush()
    return compress(codec, bytes(BOMB_SIZE // 8))  # 64 MiB: snappy's format caps a raw block


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_decompression_bomb_is_corrupt_without_allocating_it(codec: Codec) -> None:
    batch = with_body(_bomb(codec), codec)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(CorruptRecordError, match="decompressed batch exceeds 1048576 bytes"):
        native.active.decode_v2_batch(batch, 0, len(batch), True, 1 << 20)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    assert grown_kib < 160 * 1024  # zstd's window may take up to 128 MiB, never the bomb's size


@pytest.mark.parametrize("codec", list(Codec)[1:])
def test_exact_limit_decodes_and_one_byte_less_is_corrupt(codec: Codec) -> None:
    batch = build_record_batch([RecordSpec(b"k", b"v" * 5000)], codec=codec)
    plain = len(build_record_batch([RecordSpec(b"k", b"v" * 5000)])) - 61
    assert decode_records(batch, "t", 0, max_decompressed_bytes=plain)[0].value == b"v" * 5000
    with pytest.raises(CorruptRecordError, match="exceeds"):
        decode_records(batch, "t", 0, max_decompressed_bytes=plain - 1)


def test_gzip_and_zlib_members_concatenated() -> None:
    body = build_record_batch([RecordSpec(b"k", b"v")])[61:]
    batch = with_body(gzip.compress(body[:3]) + zlib.compress(body[3:]), Codec.GZIP)
    assert decode_records(batch, "t", 0)[0].value == b"v"


def test_several_lz4_and_zstd_frames() -> None:
    body = build_record_batch([RecordSpec(b"k", b"v"), RecordSpec(None, b"w")])[61:]
    for codec, pack in ((Codec.LZ4, cramjam.lz4.compress), (Codec.ZSTD, cramjam.zstd.compress)):
        batch = with_body(bytes(pack(body[:5])) + bytes(pack(body[5:])), codec, count=2)
        assert [r.value for r in decode_records(batch, "t", 0)] == [b"v", b"w"]


@pytest.mark.parametrize(("codec", "body"), [
    (Codec.GZIP, b""), (Codec.GZIP, b"\x1f\x8b\x08garbage"), (Codec.SNAPPY, b"\xff\xff\xff"),
    (Codec.SNAPPY, b"\x82SNAPPY\x00\x00"), (Codec.LZ4, b""), (Codec.LZ4, b"\x04\x22\x4d\x18"),
    (Codec.ZSTD, b"\x28\xb5\x2f\xfd"), (Codec.ZSTD, b"not zstd"),
])
def test_damaged_compressed_bodies_are_corrupt(codec: Codec, body: bytes) -> None:
    with pytest.raises(CorruptRecordError, match="batch base offset 0"):
        decode_records(with_body(body, codec), "t", 0, check_crcs=True)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_message_matches_python(codec: int) -> None:
    batch = with_body(b"", codec)
    with pytest.raises(UnsupportedCodecError) as rust:
        decode_records(batch, "t", 0)
    native.use_decoder("python")
    with pytest.raises(UnsupportedCodecError) as python:
        decode_records(batch, "t", 0)
    assert str(rust.value) == str(python.value)
    assert f"unknown codec {codec}" in str(rust.value)


def record(body: bytes) -> bytes:
    """One record: its length varint (zigzag, single byte) and ``body`` (attributes onward)."""
    return bytes([len(body) << 1]) + body


@pytest.mark.parametrize(("body", "message"), [
    (record(b"\x00\x00\x00\x03\x02v\x00"), "negative key length -2"),
    (record(b"\x00\x00\x00\x01\x03\x00"), "negative value length -2"),
    (record(b"\x00\x00\x00\x01\x00\x01"), "negative header count -1"),
    (record(b"\x00\x00\x00\x01\x00\x02\x03"), "header key length -2"),
    (record(b"\x00\x00\x00\x01\x00\x02\x02\xff\xfe\x00"), "truncated or malformed"),
    (record(b"\x00\x00\x00\x01\x00\x02\x00\x03"), "negative header value length -2"),
    (record(b"\x00\x00\x00\x01\x00\x00\x00"), "does not end where its length says"),
    (record(b"\x00\x00\x00\x01\x00\x00") + b"\x00", "1 bytes left over"),
    (record(b"\x00\x00\x00\x01\x00"), "truncated or malformed"),
    (b"\x0e\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x01\x00", "varint longer than 10 bytes"),
])
def test_record_errors_match_python(body: bytes, message: str) -> None:
    batch = with_body(body, Codec.NONE)
    with pytest.raises(CorruptRecordError, match=message) as rust:
        decode_records(batch, "t", 0)
    native.use_decoder("python")
    with pytest.raises(CorruptRecordError) as python:
        decode_records(batch, "t", 0)
    if "malformed" not in message:  # Python's text names the IndexError/UnicodeDecodeError
        assert str(rust.value) == str(python.value)


def test_offset_deltas_that_do_not_ascend() -> None:
    batch = build_record_batch([RecordSpec(b"a", b"1", offset_delta=2), RecordSpec(b"b", b"2", offset_delta=1)])
    with pytest.raises(CorruptRecordError, match="offset deltas do not ascend"):
        decode_records(batch, "t", 0)


def test_records_count_larger_than_the_data() -> None:
    batch = bytearray(build_record_batch([RecordSpec(b"k", b"v")]))
    struct.pack_into(">i", batch, 57, 2**31 - 1)
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_records(bytes(batch), "t", 0, check_crcs=False)


def test_crc_mismatch_message_matches_python() -> None:
    batch = bytearray(build_record_batch([RecordSpec(b"k", b"v")]))
    batch[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC32C mismatch: stored 0x") as rust:
        decode_records(bytes(batch), "t", 0)
    native.use_decoder("python")
    with pytest.raises(CorruptRecordError) as python:
        decode_records(bytes(batch), "t", 0)
    assert str(rust.value) == str(python.value)


def test_columns_have_the_python_types() -> None:
    batch = build_record_batch([RecordSpec(None, b"v", [("h", None)]), RecordSpec(b"k", None)], base_offset=9)
    offsets, timestamps, ts_type, keys, values, headers = native.active.decode_v2_batch(
        batch, 0, len(batch), True, 1 << 20)
    assert offsets == range(9, 11)
    assert timestamps == [1_700_000_000_000, 1_700_000_000_001]
    assert ts_type == 0
    assert keys == [None, b"k"]
    assert values == [b"v", None]
    assert headers == [(("h", None),), ()]
    stamped = build_record_batch([RecordSpec(b"k", b"v")] * 3, timestamp_type=1, max_timestamp=5)
    assert native.active.decode_v2_batch(stamped, 0, len(stamped), True, 1 << 20)[1:3] == ([5, 5, 5], 1)


def test_bounds_outside_the_buffer_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="outside"):
        native.active.decode_v2_batch(b"\x00" * 10, 0, 20, True, 100)
    with pytest.raises(CorruptRecordError, match="shorter than its header"):
        native.active.decode_v2_batch(b"\x00" * 10, 0, 10, True, 100)


def test_a_panic_becomes_native_error() -> None:
    # A bug, not bad bytes: NativeError says so and names the way back to the pure-Python decoder.
    with pytest.raises(NativeError, match=r"failed in _panic_probe: probe .*AIOKAFKA_LITE_NO_NATIVE=1"):
        native.active._panic_probe()
