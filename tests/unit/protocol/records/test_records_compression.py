"""Codec layer: framing variants producers use, bounded output, typed errors."""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest

from aiokafka_lite.errors import CorruptRecordError, UnsupportedCodecError
from aiokafka_lite.protocol.compression import XERIAL_MAGIC, Codec, compress, decompress

pytestmark = pytest.mark.usefixtures("record_decoder")

PAYLOAD = b"".join(b"record %d; " % i for i in range(20_000))


@pytest.mark.parametrize("codec", list(Codec)[1:])
def test_round_trip(codec: Codec) -> None:
    assert decompress(codec, compress(codec, PAYLOAD)) == PAYLOAD
    assert decompress(codec, memoryview(compress(codec, PAYLOAD))) == PAYLOAD


def test_xerial_snappy_frames_are_detected_and_chunked() -> None:
    framed = compress(Codec.SNAPPY, PAYLOAD, xerial=True)
    assert framed.startswith(XERIAL_MAGIC)
    assert struct.unpack_from(">ii", framed, 8) == (1, 1)
    assert decompress(Codec.SNAPPY, framed) == PAYLOAD
    with pytest.raises(CorruptRecordError, match="exceeds"):
        decompress(Codec.SNAPPY, framed, max_size=len(PAYLOAD) - 1)


def test_xerial_chunk_overrun_is_corrupt() -> None:
    framed = bytearray(compress(Codec.SNAPPY, PAYLOAD, xerial=True))
    framed[16:20] = (2**31 - 1).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="overruns"):
        decompress(Codec.SNAPPY, bytes(framed))
    with pytest.raises(CorruptRecordError, match="truncated"):
        decompress(Codec.SNAPPY, XERIAL_MAGIC + b"\x00\x00")


def test_concatenated_gzip_members_and_truncated_gzip() -> None:
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Codec.GZIP, two) == b"first second"
    with pytest.raises(CorruptRecordError, match="truncated"):
        decompress(Codec.GZIP, gzip.compress(PAYLOAD)[:100])


def test_lz4_frame_with_declared_content_size_still_bounded() -> None:
    frame = bytes(cramjam.lz4.compress(PAYLOAD))
    assert decompress(Codec.LZ4, frame, max_size=len(PAYLOAD)) == PAYLOAD
    with pytest.raises(CorruptRecordError):
        decompress(Codec.LZ4, frame, max_size=len(PAYLOAD) - 1)


def test_zstd_exact_limit() -> None:
    frame = compress(Codec.ZSTD, PAYLOAD)
    assert decompress(Codec.ZSTD, frame, max_size=len(PAYLOAD)) == PAYLOAD
    with pytest.raises(CorruptRecordError):
        decompress(Codec.ZSTD, frame, max_size=len(PAYLOAD) - 1)


def test_unknown_codecs_are_typed() -> None:
    with pytest.raises(UnsupportedCodecError):
        decompress(6, b"")
    with pytest.raises(UnsupportedCodecError):
        compress(7, b"")
