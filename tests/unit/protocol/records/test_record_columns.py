"""Records decoded into columns: offsets with gaps, sparse headers, slicing, and no GC-tracked tuple per record."""

from __future__ import annotations

import gc

import pytest

from aiokafka_lite.errors import CorruptRecordError
from aiokafka_lite.protocol.records.build import RecordSpec, build_record_batch
from aiokafka_lite.protocol.records.columns import RecordChunks, RecordColumns
from aiokafka_lite.protocol.records.decode import PartitionRecords, decode_records, iter_batches
from aiokafka_lite.structs import ConsumerRecord, ConsumerRecords, TopicPartition
from tests.decoders import converted

pytestmark = pytest.mark.usefixtures("record_decoder")


def test_offset_deltas_with_gaps_are_kept_and_filtered_by_fetch_offset() -> None:
    survivors = [RecordSpec(b"a", b"1", offset_delta=0), RecordSpec(b"b", b"2", offset_delta=3),
                 RecordSpec(b"c", b"3", offset_delta=7)]
    data = build_record_batch(survivors, base_offset=100, last_offset_delta=9)
    assert [r.offset for r in decode_records(data, "t", 0)] == [100, 103, 107]
    assert [(r.offset, r.key) for r in decode_records(data, "t", 0, fetch_offset=104)] == [(107, b"c")]
    reader = PartitionRecords("t", 0, data, 101)
    assert [r.offset for r in reader.take()] == [103, 107]
    assert reader.position == 110  # past the compacted tail: last_offset_delta counts


def test_offset_deltas_that_do_not_ascend_are_corrupt() -> None:
    specs = [RecordSpec(b"a", b"1", offset_delta=0), RecordSpec(b"b", b"2", offset_delta=2),
             RecordSpec(b"c", b"3", offset_delta=2)]
    data = build_record_batch(specs, last_offset_delta=2)
    with pytest.raises(CorruptRecordError, match="offset deltas do not ascend"):
        decode_records(data, "t", 0)


def test_headers_of_some_records_only() -> None:
    specs = [RecordSpec(None, b"0"), RecordSpec(None, b"1", [("h", b"x")]), RecordSpec(None, b"2")]
    records = decode_records(build_record_batch(specs), "t", 0)
    assert [tuple(r.headers) for r in records] == [(), (("h", b"x"),), ()]


def test_columns_build_equal_records_each_time_and_slice_as_columns() -> None:
    specs = [RecordSpec(b"k%d" % i, b"v%d" % i) for i in range(10)]
    batch = next(iter_batches(build_record_batch(specs, base_offset=50, partition_leader_epoch=4), "t", 3))
    columns = batch.records()
    assert isinstance(columns, RecordColumns)
    first, second = list(columns), list(columns)
    assert first == second
    assert all(type(r) is ConsumerRecord for r in first)
    assert columns[2] == first[2] == ConsumerRecord("t", 3, 52, first[2].timestamp, 0, b"k2", b"v2", (), 4)
    assert columns[-1].offset == 59
    part = columns[3:6]
    assert isinstance(part, RecordColumns)
    assert list(part) == first[3:6]
    assert list(columns.from_offset(57)) == first[7:]
    assert list(converted(columns, bytes.upper, len)) == [r._replace(key=r.key.upper(), value=len(r.value))
                                                        for r in first]


def test_log_append_time_stamps_every_record_with_the_batch_time() -> None:
    data = build_record_batch([RecordSpec(None, b"a"), RecordSpec(None, b"b")], timestamp_type=1,
                              max_timestamp=1_800_000_000_000)
    assert [(r.timestamp, r.timestamp_type) for r in decode_records(data, "t", 0)] == [
        (1_800_000_000_000, 1), (1_800_000_000_000, 1)]


def test_consumer_records_views_over_chunks() -> None:
    tp = TopicPartition("t", 0)
    data = b"".join(build_record_batch([RecordSpec(None, b"x")] * 3, base_offset=i * 3) for i in range(3))
    chunks = PartitionRecords("t", 0, data, 0).take()
    assert isinstance(chunks, RecordChunks)
    assert len(chunks.chunks) == 3
    result = ConsumerRecords({tp: chunks})
    assert len(result) == 9
    assert [r.offset for r in result] == list(range(9))
    assert [r.offset for r in result.records(tp)] == list(range(9))
    assert result[4].offset == 4
    assert result.by_partition()[tp] == list(result)
    assert chunks[8].offset == 8


def test_a_held_poll_result_holds_no_gc_tracked_object_per_record() -> None:
    # Why columns exist: thousands of tracked tuples per poll made CPython's collector run full
    # collections over the whole heap. Keys, values and ints are untracked; only a few lists are.
    data = b"".join(build_record_batch([RecordSpec(None, b"v" * 100)] * 500, base_offset=i * 500)
                    for i in range(20))
    gc.collect()
    before = len(gc.get_objects())
    held = PartitionRecords("t", 0, data, 0).take()
    grown = len(gc.get_objects()) - before
    assert len(held) == 10_000
    assert grown < 200, f"{grown} tracked objects for 10,000 records"


@pytest.mark.parametrize("length_byte", [0x10, 0x14])  # 8 and 10 for a record of 9 bytes
def test_a_record_length_that_disagrees_with_its_fields_is_corrupt(length_byte: int) -> None:
    data = bytearray(build_record_batch([RecordSpec(None, b"abc"), RecordSpec(None, b"def")]))
    assert data[61] == 0x12  # the first record's length, 9, zigzag-encoded
    data[61] = length_byte
    with pytest.raises(CorruptRecordError, match="does not end where its length says"):
        decode_records(bytes(data), "t", 0, check_crcs=False)


def test_an_overlong_null_key_length_still_means_no_key() -> None:
    data = bytearray(build_record_batch([RecordSpec(None, b"x")]))
    assert data[61:] == bytes([0x0E, 0, 0, 0, 0x01, 0x02]) + b"x\x00"
    data[61:] = bytes([0x10, 0, 0, 0, 0x81, 0x00, 0x02]) + b"x\x00"  # -1 in two varint bytes
    data[8:12] = (int.from_bytes(data[8:12], "big") + 1).to_bytes(4, "big")  # batchLength
    [record] = decode_records(bytes(data), "t", 0, check_crcs=False)
    assert (record.key, record.value) == (None, b"x")
