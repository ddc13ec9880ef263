"""Legacy message sets (magic v0 and v1), plain and compressed, alone and mixed with v2."""

from __future__ import annotations

import pytest

from aiokafka_lite.errors import CorruptRecordError
from aiokafka_lite.protocol.compression import Codec, compress
from aiokafka_lite.protocol.records.build import RecordSpec, build_legacy_message_set, build_record_batch
from aiokafka_lite.protocol.records.decode import PartitionRecords, decode_records, iter_batches
from aiokafka_lite.protocol.records.legacy import NO_TIMESTAMP_TYPE

pytestmark = pytest.mark.usefixtures("record_decoder")

SPECS = [RecordSpec(b"k0", b"v0"), RecordSpec(None, b"v1"), RecordSpec(b"k2", None), RecordSpec(b"", b"")]
LEGACY_CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_v1_round_trip_with_relative_inner_offsets(codec: Codec) -> None:
    data = build_legacy_message_set(SPECS, magic=1, base_offset=50, codec=codec)
    records = decode_records(data, "t", 0, 50)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (50 + i, s.key, s.value) for i, s in enumerate(SPECS)]
    assert [r.timestamp for r in records] == [1_700_000_000_000 + i for i in range(4)]
    assert {r.timestamp_type for r in records} == {0}
    assert {r.headers for r in records} == {()}
    assert {r.leader_epoch for r in records} == {None}


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_v0_has_no_timestamps(codec: Codec) -> None:
    data = build_legacy_message_set(SPECS, magic=0, base_offset=7, codec=codec)
    records = decode_records(data, "t", 0, 7)
    assert [r.offset for r in records] == [7, 8, 9, 10]
    assert {(r.timestamp, r.timestamp_type) for r in records} == {(-1, NO_TIMESTAMP_TYPE)}


def test_v1_wrapper_log_append_time_applies_to_inner_messages() -> None:
    data = build_legacy_message_set(SPECS, magic=1, codec=Codec.GZIP, timestamp_type=1,
                                    base_timestamp=1_000)
    records = decode_records(data, "t", 0)
    assert {(r.timestamp, r.timestamp_type) for r in records} == {(1_003, 1)}


def test_fetch_offset_inside_a_compressed_wrapper_and_position() -> None:
    data = build_legacy_message_set(SPECS, magic=1, base_offset=10, codec=Codec.SNAPPY)
    reader = PartitionRecords("t", 0, data, 12)
    assert [r.offset for r in reader.take()] == [12, 13]
    assert reader.position == 14
    (batch,) = iter_batches(data, "t", 0)
    assert batch.next_offset == 14


def test_legacy_then_v2_in_one_fetch() -> None:
    data = build_legacy_message_set(SPECS, magic=1, codec=Codec.LZ4)
    data += build_record_batch(SPECS, base_offset=4)
    assert [r.offset for r in decode_records(data, "t", 0)] == list(range(8))


def test_legacy_crc_mismatch() -> None:
    data = bytearray(build_legacy_message_set(SPECS, magic=1, base_offset=3))
    data[data.index(b"v1") + 1] ^= 0x04  # the value b"v1" becomes b"v5"
    with pytest.raises(CorruptRecordError, match="CRC32") as info:
        decode_records(bytes(data), "t", 1)
    assert (info.value.partition, info.value.offset) == (1, 4)
    unchecked = decode_records(bytes(data), "t", 1, check_crcs=False)
    assert [r.value for r in unchecked] == [b"v0", b"v5", None, b""]


def test_legacy_field_length_overrun_is_corrupt() -> None:
    data = bytearray(build_legacy_message_set(SPECS[:1], magic=0))
    data[18:22] = (2**31 - 1).to_bytes(4, "big")  # the key length
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(data), "t", 0, check_crcs=False)


def test_nested_compression_is_corrupt() -> None:
    inner_wrapper = build_legacy_message_set(SPECS, magic=1, codec=Codec.GZIP)
    outer = bytearray(build_legacy_message_set([RecordSpec(None, compress(Codec.GZIP, inner_wrapper))],
                                               magic=1))
    outer[17] = Codec.GZIP  # the outer message's attributes: now a wrapper around a wrapper
    with pytest.raises(CorruptRecordError, match="nested"):
        decode_records(bytes(outer), "t", 0, check_crcs=False)
