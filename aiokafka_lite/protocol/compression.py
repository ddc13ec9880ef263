"""Record-batch compression codecs, with a hard cap on decompressed size.

Kafka marks the codec in attributes bits 0-2. Decompression must never trust the sender about
sizes: a few kilobytes of zstd can expand to gigabytes, so every codec here decompresses into a
bounded output and reports anything bigger as corrupt instead of allocating it.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam

from aiokafka_lite.errors import CorruptRecordError, UnsupportedCodecError

# A legitimate batch is limited by the broker's message.max.bytes (1 MiB by default) *before*
# decompression; 128 MiB leaves room for very compressible payloads while stopping bombs.
DEFAULT_MAX_DECOMPRESSED_BYTES = 128 * 1024 * 1024

CODEC_MASK = 0x07

# Snappy as written by the Java client (snappy-java's SnappyOutputStream): a 16-byte header,
# then chunks, each an int32 length followed by one raw snappy block.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_CHUNK = 32 * 1024
_INT32 = struct.Struct(">i")

_LZ4_MAGIC = 0x184D2204
_ZSTD_MAGIC = 0xFD2FB528
_MIN_GUESS = 64 * 1024


class Codec(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


def codec_name(codec: int) -> str:
    try:
        return Codec(codec).name.lower()
    except ValueError:
        return f"unknown codec {codec}"


def compress(codec: int, data: bytes, *, xerial: bool = False) -> bytes:
    """Compress ``data`` the way a producer would for ``codec`` (``xerial`` frames snappy like Java)."""
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Codec.SNAPPY:
        return _xerial_compress(data) if xerial else bytes(cramjam.snappy.compress_raw(data))
    if codec == Codec.LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == Codec.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCodecError(f"cannot compress with {codec_name(codec)}")


def decompress(codec: int, data: bytes | memoryview,
               max_size: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
    """Decompress one batch body; more than ``max_size`` bytes of output -> CorruptRecordError."""
    if codec == Codec.GZIP:
        return _gunzip(data, max_size)
    if codec == Codec.SNAPPY:
        if bytes(data[:8]) == XERIAL_MAGIC:
            return _xerial_decompress(data, max_size)
        return _snappy_raw(data, max_size)
    if codec == Codec.LZ4:
        return _grow_into(cramjam.lz4.decompress_into, data, _lz4_content_size(data), max_size, "lz4")
    if codec == Codec.ZSTD:
        return _grow_into(cramjam.zstd.decompress_into, data, _zstd_content_size(data), max_size, "zstd")
    raise UnsupportedCodecError(f"record batch uses {codec_name(codec)}, which this client cannot decode")


def _too_big(max_size: int) -> CorruptRecordError:
    return CorruptRecordError(f"decompressed batch exceeds {max_size} bytes")


def _gunzip(data: bytes | memoryview, max_size: int) -> bytes:
    # zlib's max_length bounds the output itself, and is as fast as cramjam's gzip here.
    # Concatenated gzip members are legal, so keep going while input remains.
    out: list[bytes] = []
    total = 0
    rest: bytes | memoryview = data
    try:
        while True:
            inflater = zlib.decompressobj(47)  # 32 + 15: accept gzip or zlib headers
            chunk = inflater.decompress(rest, max_size - total + 1)
            total += len(chunk)
            out.append(chunk)
            if total > max_size:
                raise _too_big(max_size)
            if not inflater.eof:
                raise CorruptRecordError("gzip stream is truncated")
            rest = inflater.unused_data
            if not rest:
                return b"".join(out)
    except zlib.error as exc:
        raise CorruptRecordError(f"gzip data is corrupt: {exc}") from exc


def _snappy_raw(data: bytes | memoryview, max_size: int) -> bytes:
    try:
        # Raw snappy states its uncompressed length up front: check it before allocating.
        size = cramjam.snappy.decompress_raw_len(data)
        if size > max_size:
            raise _too_big(max_size)
        return bytes(cramjam.snappy.decompress_raw(data))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"snappy data is corrupt: {exc}") from exc


def _xerial_decompress(data: bytes | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    if len(view) < _XERIAL_HEADER.size:
        raise CorruptRecordError("xerial snappy header is truncated")
    pos = _XERIAL_HEADER.size
    out: list[bytes] = []
    total = 0
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError("xerial snappy chunk length is truncated")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise CorruptRecordError(f"xerial snappy chunk of {length} bytes overruns the data")
        chunk = _snappy_raw(view[pos:pos + length], max_size - total)
        total += len(chunk)
        out.append(chunk)
        pos += length
    return b"".join(out)


def _xerial_compress(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
    for start in range(0, len(data), _XERIAL_CHUNK):
        block = bytes(cramjam.snappy.compress_raw(data[start:start + _XERIAL_CHUNK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _grow_into(decompress_into: object, data: bytes | memoryview, hint: int | None,
               max_size: int, name: str) -> bytes:
    """Decompress into a fixed buffer, growing it (up to ``max_size``) while it is too small.

    cramjam stops with an error as soon as a fixed output buffer is full, so memory stays bounded
    by the buffer; total work is at most a few times the real output size.
    """
    size = min(hint if hint is not None else max(_MIN_GUESS, 4 * len(data)), max_size)
    while True:
        out = bytearray(size)
        try:
            written: int = decompress_into(data, out)  # type: ignore[operator]
        except cramjam.DecompressionError as exc:
            if size >= max_size:
                raise CorruptRecordError(
                    f"{name} data is corrupt or exceeds {max_size} bytes: {exc}") from exc
            size = min(size * 4, max_size)
            continue
        return bytes(memoryview(out)[:written])


def _lz4_content_size(data: bytes | memoryview) -> int | None:
    """The frame's declared content size (FLG bit 3), used only as a first buffer-size guess."""
    if len(data) < 14 or struct.unpack_from("<I", data, 0)[0] != _LZ4_MAGIC:
        return None
    if not data[4] & 0x08:
        return None
    size: int = struct.unpack_from("<Q", data, 6)[0]
    return size + 1  # +1 so an exact fit is not mistaken for an overflow


def _zstd_content_size(data: bytes | memoryview) -> int | None:
    """The first frame's Frame_Content_Size, when present (a guess only; frames may follow)."""
    if len(data) < 6 or struct.unpack_from("<I", data, 0)[0] != _ZSTD_MAGIC:
        return None
    descriptor = data[4]
    size_flag = descriptor >> 6
    single_segment = descriptor & 0x20
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 0x03]
    width = (1 if single_segment else 0, 2, 4, 8)[size_flag]
    if width == 0 or len(data) < pos + width:
        return None
    size = int.from_bytes(data[pos:pos + width], "little") + (256 if width == 2 else 0)
    return size + 1
