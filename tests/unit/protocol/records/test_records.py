"""RecordBatch v2 decoding: round trips, offsets, timestamps, control batches, transactions."""

from __future__ import annotations

import pytest

from aiokafka_lite.errors import CorruptRecordError, KafkaError, UnsupportedCodecError
from aiokafka_lite.protocol.compression import Codec
from aiokafka_lite.protocol.records.build import RecordSpec, build_control_batch, build_record_batch
from aiokafka_lite.protocol.records.decode import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    PartitionRecords,
    decode_records,
    first_batch_incomplete,
    iter_batches,
)
from aiokafka_lite.structs import ConsumerRecord, TimestampType

pytestmark = pytest.mark.usefixtures("record_decoder")

SAMPLE = [
    RecordSpec(b"k0", b"v0", [("h1", b"x"), ("h2", None), ("h3", b"")]),
    RecordSpec(None, b"no key"),
    RecordSpec(b"no value", None),
    RecordSpec(b"", b""),
    RecordSpec(b"big", b"z" * 5000, [("\u00e9t\u00e9", b"\x00\xff")]),
    RecordSpec(b"neg-ts", b"v", timestamp=1_600_000_000_000),
]


def expected(specs: list[RecordSpec], base_offset: int = 0, epoch: int | None = None,
             base_ts: int = 1_700_000_000_000) -> list[tuple[object, ...]]:
    return [(base_offset + i, base_ts + i if s.timestamp is None else s.timestamp, s.key, s.value,
             tuple(s.headers), epoch) for i, s in enumerate(specs)]


def summary(records: list[ConsumerRecord]) -> list[tuple[object, ...]]:
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers), r.leader_epoch) for r in records]


@pytest.mark.parametrize("codec", list(Codec))
@pytest.mark.parametrize("xerial", [False, True])
def test_round_trip_every_codec(codec: Codec, xerial: bool) -> None:
    data = build_record_batch(SAMPLE, base_offset=100, codec=codec, partition_leader_epoch=7, xerial=xerial)
    (batch,) = iter_batches(data, "t", 3)
    assert batch.codec == codec
    records = decode_records(data, "t", 3, 100)
    assert summary(records) == expected(SAMPLE, 100, epoch=7)
    assert all(r.topic == "t" and r.partition == 3 for r in records)
    assert all(r.timestamp_type == TimestampType.CREATE_TIME for r in records)
    assert all(type(r.key) is bytes for r in records if r.key is not None)
    assert all(type(r.value) is bytes for r in records if r.value is not None)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_accepts_any_buffer_type(kind: type) -> None:
    data = build_record_batch(SAMPLE, codec=Codec.LZ4)
    assert summary(decode_records(kind(data), "t", 0)) == expected(SAMPLE)


def test_log_append_time_uses_max_timestamp_for_every_record() -> None:
    data = build_record_batch(SAMPLE[:3], timestamp_type=1, max_timestamp=1_750_000_000_000)
    records = decode_records(data, "t", 0)
    assert [r.timestamp for r in records] == [1_750_000_000_000] * 3
    assert {r.timestamp_type for r in records} == {TimestampType.LOG_APPEND_TIME}


def test_leader_epoch_minus_one_is_none() -> None:
    records = decode_records(build_record_batch(SAMPLE[:1]), "t", 0)
    assert records[0].leader_epoch is None


def test_records_below_fetch_offset_are_skipped() -> None:
    data = build_record_batch(SAMPLE, base_offset=10) + build_record_batch(SAMPLE, base_offset=16)
    records = decode_records(data, "t", 0, fetch_offset=14)
    assert [r.offset for r in records] == [14, 15, *range(16, 22)]


def test_partial_trailing_batch_stops_cleanly_and_position_stays_before_it() -> None:
    first = build_record_batch(SAMPLE[:2], base_offset=0)
    second = build_record_batch(SAMPLE[:2], base_offset=2)
    for cut in (1, 11, 12, 40, len(second) - 1):
        reader = PartitionRecords("t", 0, first + second[:cut], 0)
        assert [r.offset for r in reader.take()] == [0, 1]
        assert reader.position == 2
        assert reader.exhausted
        assert not reader.record_too_large


def test_only_a_partial_batch_means_record_too_large() -> None:
    data = build_record_batch(SAMPLE)
    reader = PartitionRecords("t", 0, data[:-1], 0)
    assert reader.record_too_large
    assert list(reader.take()) == []
    assert reader.position == 0
    assert first_batch_incomplete(data[:5])
    assert not first_batch_incomplete(b"")
    assert not first_batch_incomplete(data)


def test_position_covers_compacted_away_tail_and_empty_batches() -> None:
    # offsets 0 and 2 survive compaction of a batch that once held 0..9
    survivors = [RecordSpec(b"a", b"1", offset_delta=0), RecordSpec(b"b", b"2", offset_delta=2)]
    compacted = build_record_batch(survivors, base_offset=0, last_offset_delta=9)
    emptied = build_record_batch([], base_offset=10, last_offset_delta=4)
    reader = PartitionRecords("t", 0, compacted + emptied, 0)
    assert [r.offset for r in reader.take()] == [0, 2]
    assert reader.position == 15


def test_take_hands_out_slices_and_tracks_position() -> None:
    data = build_record_batch(SAMPLE[:4], base_offset=0, partition_leader_epoch=2)
    data += build_record_batch(SAMPLE[:4], base_offset=4, last_offset_delta=5, partition_leader_epoch=3)
    reader = PartitionRecords("t", 0, data, 0)
    assert [r.offset for r in reader.take(3)] == [0, 1, 2]
    assert reader.position == 3
    assert [r.offset for r in reader.take(3)] == [3, 4, 5]
    assert (reader.position, reader.position_leader_epoch) == (6, 3)
    assert [r.offset for r in reader.take(10)] == [6, 7]
    assert reader.position == 10  # the batch's lastOffsetDelta reaches past its last record
    assert reader.exhausted
    assert list(reader.take(5)) == []


def test_iteration_yields_everything() -> None:
    data = b"".join(build_record_batch(SAMPLE, base_offset=i * 6) for i in range(200))
    assert [r.offset for r in PartitionRecords("t", 0, data, 0)] == list(range(1200))


def test_control_batches_are_skipped_but_exposed() -> None:
    data = (build_record_batch(SAMPLE[:2], base_offset=0, producer_id=5, transactional=True)
            + build_control_batch(CONTROL_COMMIT, base_offset=2, producer_id=5)
            + build_record_batch(SAMPLE[:1], base_offset=3))
    batches = list(iter_batches(data, "t", 0))
    assert [b.is_control for b in batches] == [False, True, False]
    assert [b.control_type() for b in batches] == [None, CONTROL_COMMIT, None]
    assert batches[0].is_transactional
    assert batches[0].producer_id == 5
    assert list(batches[1].records()) == []
    assert [r.offset for r in decode_records(data, "t", 0)] == [0, 1, 3]


def transactional_log() -> tuple[bytes, list[tuple[int, int]]]:
    """pid 1 commits 0-1; pid 2 aborts 2-3 (marker at 6); pid 1 aborts 5, then commits 8."""
    log = (build_record_batch(SAMPLE[:2], base_offset=0, producer_id=1, transactional=True)
           + build_record_batch(SAMPLE[:2], base_offset=2, producer_id=2, transactional=True)
           + build_control_batch(CONTROL_COMMIT, base_offset=4, producer_id=1)
           + build_record_batch(SAMPLE[:1], base_offset=5, producer_id=1, transactional=True)
           + build_control_batch(CONTROL_ABORT, base_offset=6, producer_id=2)
           + build_control_batch(CONTROL_ABORT, base_offset=7, producer_id=1)
           + build_record_batch(SAMPLE[:1], base_offset=8, producer_id=1, transactional=True)
           + build_record_batch(SAMPLE[:1], base_offset=9)  # non-transactional
           + build_control_batch(CONTROL_COMMIT, base_offset=10, producer_id=1))
    return log, [(1, 5), (2, 2)]


def test_read_committed_drops_aborted_transactions() -> None:
    log, aborted = transactional_log()
    committed = decode_records(log, "t", 0, read_committed=True, aborted_transactions=aborted)
    assert [r.offset for r in committed] == [0, 1, 8, 9]
    everything = decode_records(log, "t", 0, aborted_transactions=aborted)
    assert [r.offset for r in everything] == [0, 1, 2, 3, 5, 8, 9]


def test_read_committed_tracks_aborts_below_the_fetch_offset() -> None:
    log, aborted = transactional_log()
    reader = PartitionRecords("t", 0, log, 8, read_committed=True, aborted_transactions=aborted)
    assert [r.offset for r in reader.take()] == [8, 9]
    assert reader.position == 11


def test_crc_mismatch_raises_with_location_and_can_be_disabled() -> None:
    data = bytearray(build_record_batch(SAMPLE, base_offset=42))
    data[-2] ^= 0x01  # inside the last value: still well-formed, only the CRC notices
    with pytest.raises(CorruptRecordError) as info:
        decode_records(bytes(data), "orders", 4)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("orders", 4, 42)
    assert "'orders'" in str(info.value)
    assert "CRC" in str(info.value)
    assert len(decode_records(bytes(data), "orders", 4, check_crcs=False)) == len(SAMPLE)


def test_records_before_a_corrupt_batch_are_handed_out_first() -> None:
    good = build_record_batch(SAMPLE[:2], base_offset=0)
    bad = bytearray(build_record_batch(SAMPLE[:2], base_offset=2))
    bad[-1] ^= 0xFF
    reader = PartitionRecords("t", 0, good + bytes(bad), 0)
    assert [r.offset for r in reader.take()] == [0, 1]
    assert not reader.exhausted
    for _ in range(2):  # sticky: the consumer sees it until it seeks elsewhere
        with pytest.raises(CorruptRecordError):
            reader.take()
    assert reader.position == 2


def test_unknown_codec_is_typed() -> None:
    data = bytearray(build_record_batch(SAMPLE[:1]))
    data[22] = (data[22] & ~0x07) | 0x05
    with pytest.raises(UnsupportedCodecError, match="codec 5"):
        decode_records(bytes(data), "t", 0, check_crcs=False)


def test_unknown_magic_is_corrupt() -> None:
    data = bytearray(build_record_batch(SAMPLE[:1]))
    data[16] = 3
    with pytest.raises(CorruptRecordError, match="magic 3"):
        decode_records(bytes(data), "t", 0)


def test_negative_batch_length_is_corrupt() -> None:
    data = bytearray(build_record_batch(SAMPLE[:1]))
    data[8:12] = (-5).to_bytes(4, "big", signed=True)
    with pytest.raises(CorruptRecordError, match="batch length -5"):
        decode_records(bytes(data), "t", 0)


def test_huge_records_count_fails_without_allocating() -> None:
    data = bytearray(build_record_batch(SAMPLE[:2]))
    data[57:61] = (2**31 - 1).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(data), "t", 0, check_crcs=False)


def test_huge_batch_length_is_a_partial_batch_not_an_allocation() -> None:
    data = bytearray(build_record_batch(SAMPLE[:2]))
    data[8:12] = (2**31 - 1).to_bytes(4, "big")
    reader = PartitionRecords("t", 0, bytes(data), 0)
    assert list(reader.take()) == []
    assert reader.record_too_large


@pytest.mark.parametrize("field", ["key", "value", "header"])
def test_huge_length_fields_are_corrupt(field: str) -> None:
    spec = {"key": RecordSpec(b"K", b"v"), "value": RecordSpec(b"k", b"V"),
            "header": RecordSpec(b"k", b"v", [("H", b"")])}[field]
    data = bytearray(build_record_batch([spec]))
    marker = data.index(field[0].upper().encode(), 61)
    # replace the 1-byte length before the marker with a 5-byte varint of 2**31-1 (zigzag)
    data[marker - 1:marker] = b"\xfe\xff\xff\xff\x0f"
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(data), "t", 0, check_crcs=False)


def test_overlong_varint_is_corrupt() -> None:
    data = bytearray(build_record_batch([RecordSpec(b"k", b"v")]))
    data[61:62] = b"\xff" * 12 + b"\x01"
    with pytest.raises(CorruptRecordError, match="varint"):
        decode_records(bytes(data), "t", 0, check_crcs=False)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_decompression_bomb_is_refused(codec: Codec) -> None:
    data = build_record_batch([RecordSpec(None, b"\x00" * 3_000_000)], codec=codec)
    assert len(data) < 300_000
    with pytest.raises(CorruptRecordError, match="exceeds"):
        decode_records(data, "t", 0, max_decompressed_bytes=1_000_000)
    assert len(decode_records(data, "t", 0, max_decompressed_bytes=4_000_000)[0].value) == 3_000_000


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_garbage_compressed_payload_is_corrupt(codec: Codec) -> None:
    data = bytearray(build_record_batch(SAMPLE, codec=codec))
    data[61:] = (bytes(range(256)) * 100)[: len(data) - 61]
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(data), "t", 0, check_crcs=False)


def test_every_truncation_of_the_only_batch_is_a_clean_stop() -> None:
    data = build_record_batch(SAMPLE, codec=Codec.ZSTD)
    for cut in range(len(data)):
        assert decode_records(data[:cut], "t", 0) == []


def test_errors_share_the_root() -> None:
    assert issubclass(CorruptRecordError, KafkaError)
    assert issubclass(UnsupportedCodecError, KafkaError)
