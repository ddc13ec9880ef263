"""Iterating RecordColumns: the native iterator (``_native.iter_records``) against the pure-Python twin.

Every case builds the records both ways from the same columns and wants equal sequences of
ConsumerRecord instances; the columns come from each decoder in turn.
"""

from __future__ import annotations

import gc
import importlib
import operator
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from aiokafka_lite.protocol import native
from aiokafka_lite.protocol.records.build import RecordSpec, build_record_batch
from aiokafka_lite.protocol.records.columns import RecordChunks, RecordColumns
from aiokafka_lite.protocol.records.decode import iter_batches
from aiokafka_lite.structs import ConsumerRecord, ConsumerRecords, TopicPartition
from tests.decoders import converted, require_native

pytestmark = pytest.mark.usefixtures("record_decoder")


def both(columns: RecordColumns) -> tuple[list[ConsumerRecord], list[ConsumerRecord]]:
    """The records of ``columns`` from the Python path and from the native iterator."""
    require_native()
    before = native.decoder()
    try:
        native.use_decoder("python")
        from_python = list(columns)
        native.use_decoder("native")
        from_native = list(columns)
    finally:
        native.use_decoder(before)
    return from_python, from_native


def assert_same(columns: RecordColumns) -> list[ConsumerRecord]:
    from_python, from_native = both(columns)
    assert from_native == from_python
    assert all(type(r) is ConsumerRecord for r in from_native)
    return from_native


def decoded(specs: list[RecordSpec], **batch: Any) -> RecordColumns:
    columns = next(iter_batches(build_record_batch(specs, **batch), "t", 3)).records()
    assert isinstance(columns, RecordColumns)
    return columns


def extension() -> Any:
    """The native extension, whichever decoder the module runs under."""
    require_native()
    return importlib.import_module("aiokafka_lite._native")


def native_iter(columns: RecordColumns) -> Iterator[ConsumerRecord]:
    it: Iterator[ConsumerRecord] = extension().iter_records(
        ConsumerRecord, columns.topic, columns.partition, columns.offsets, columns.timestamps,
        columns.timestamp_type, columns.keys, columns.values, columns.headers, columns.leader_epoch)
    return it


def test_range_offsets_without_headers() -> None:
    columns = decoded([RecordSpec(b"k%d" % i, b"v%d" % i) for i in range(20)], base_offset=1000,
                      partition_leader_epoch=7)
    assert isinstance(columns.offsets, range)
    assert columns.headers is None
    records = assert_same(columns)
    assert [r.offset for r in records] == list(range(1000, 1020))
    assert records[5] == ConsumerRecord("t", 3, 1005, records[5].timestamp, 0, b"k5", b"v5", (), 7)


def test_listed_offsets_and_sparse_headers() -> None:
    specs = [RecordSpec(b"a", b"1", offset_delta=0), RecordSpec(None, b"2", [("h", b"x"), ("n", None)], offset_delta=3),
             RecordSpec(b"c", None, offset_delta=7)]
    columns = decoded(specs, base_offset=100, last_offset_delta=9)
    assert not isinstance(columns.offsets, range)
    assert columns.headers is not None
    records = assert_same(columns)
    assert [(r.offset, r.key, r.value, tuple(r.headers)) for r in records] == [
        (100, b"a", b"1", ()), (103, None, b"2", (("h", b"x"), ("n", None))), (107, b"c", None, ())]


def test_log_append_time() -> None:
    columns = decoded([RecordSpec(b"k", b"v", timestamp=5), RecordSpec(b"k", b"w", timestamp=6)],
                      timestamp_type=1, max_timestamp=1_800_000_000_000)
    records = assert_same(columns)
    assert [(r.timestamp_type, r.timestamp) for r in records] == [(1, 1_800_000_000_000)] * 2


@pytest.mark.parametrize("index", [slice(3, 8), slice(None, None, 2), slice(None, None, -1), slice(15, 2, -3),
                                   slice(5, 5), slice(-4, None)])
def test_slices_of_range_and_listed_offsets(index: slice) -> None:
    gapless = decoded([RecordSpec(b"k", b"v%d" % i) for i in range(20)], base_offset=40)
    gaps = decoded([RecordSpec(b"k", b"v%d" % i, [("i", b"%d" % i)], offset_delta=2 * i) for i in range(20)],
                   last_offset_delta=40)
    for columns in (gapless, gaps):
        assert_same(columns[index])
        assert assert_same(columns[index]) == list(columns)[index]


def test_from_offset_and_converted_columns_holding_any_objects() -> None:
    columns = decoded([RecordSpec(b"k%d" % i, b"v%d" % i) for i in range(10)], base_offset=10)
    assert_same(columns.from_offset(14))
    marker = object()
    copy = converted(columns, lambda key: {"key": key}, lambda value: [value, marker, None])
    records = assert_same(copy)
    assert records[1].key == {"key": b"k1"}
    assert records[1].value[1] is marker
    assert_same(converted(columns, lambda key: None, len))


def test_empty_columns_and_columns_of_records() -> None:
    assert both(RecordColumns.of("t", 0, [])) == ([], [])
    assert both(decoded([RecordSpec(b"k", b"v")])[1:]) == ([], [])
    made = [ConsumerRecord("t", 1, 5, 9, 0, b"k", b"v", [("h", b"1")], 2),
            ConsumerRecord("t", 1, 8, 9, 0, None, None, (), 2)]
    assert assert_same(RecordColumns.of("t", 1, made)) == made


def test_columns_that_are_not_lists_are_read_like_zip_reads_them() -> None:
    columns = RecordColumns("t", 0, (7, 8, 9), (1, 2, 3), 0, ("a", "b", "c"), ["x", "y", "z"],  # type: ignore[arg-type]
                            ((), (("h", None),), ()), None)
    assert [r.offset for r in assert_same(columns)] == [7, 8, 9]


def test_the_shortest_column_ends_the_iteration() -> None:
    columns = RecordColumns("t", 0, range(10), [1, 2, 3], 0, [None] * 5, [b"v"] * 4, None, None)
    assert len(assert_same(columns)) == 3


def test_offsets_beyond_64_bits_are_still_exact() -> None:
    top = 2**63 - 2
    columns = RecordColumns("t", 0, range(top, top + 4), [0] * 4, 0, [None] * 4, [b""] * 4, None, None)
    assert [r.offset for r in assert_same(columns)] == [top, top + 1, top + 2, top + 3]


def test_records_are_consumer_records_with_named_fields() -> None:
    columns = decoded([RecordSpec(b"key", b"value", [("h", b"x")])], base_offset=3, partition_leader_epoch=1)
    record = next(native_iter(columns))
    assert type(record) is ConsumerRecord
    assert isinstance(record, tuple)
    assert len(record) == 9
    assert (record.topic, record.partition, record.offset, record.key, record.value, record.leader_epoch) == (
        "t", 3, 3, b"key", b"value", 1)
    assert list(record.headers) == [("h", b"x")]
    assert record._replace(value=b"other").value == b"other"
    assert record._asdict()["timestamp_type"] == 0
    hash(record)


def test_chunks_and_poll_results_chain_the_native_iterators() -> None:
    first = decoded([RecordSpec(b"a", b"1"), RecordSpec(b"b", b"2")], base_offset=0)
    second = decoded([RecordSpec(b"c", b"3")], base_offset=2)
    chunks = RecordChunks([first, second])
    polled = ConsumerRecords({TopicPartition("t", 3): chunks})
    from_native = both(first)[1]
    assert list(chunks) == list(polled) == [*from_native, *both(second)[1]]
    assert [r.value for r in polled] == [b"1", b"2", b"3"]


def test_the_iterator_outlives_its_columns() -> None:
    columns = decoded([RecordSpec(b"k%d" % i, b"v%d" % i) for i in range(5)])
    expected = list(columns)
    it = native_iter(columns)
    next(it)
    del columns
    gc.collect()
    assert list(it) == expected[1:]
    assert list(it) == []


def test_length_hint_and_exhaustion() -> None:
    it = native_iter(decoded([RecordSpec(None, b"%d" % i) for i in range(4)]))
    assert operator.length_hint(it) == 4
    next(it)
    assert operator.length_hint(it) == 3
    assert len(list(it)) == 3
    with pytest.raises(StopIteration):
        next(it)
    assert operator.length_hint(it) == 0


def test_a_record_type_that_is_not_a_tuple_is_refused() -> None:
    with pytest.raises(TypeError, match="tuple subclass"):
        extension().iter_records(dict, "t", 0, range(1), [0], 0, [None], [None], None, None)


def test_no_references_leak_on_full_or_partial_iteration() -> None:
    key, value, header = object(), object(), (("h", b"x"),)
    offsets = [10, 11, 12, 13]
    columns = RecordColumns("t", 0, offsets, [1, 2, 3, 4], 0, [key] * 4, [value] * 4, [header] * 4, 5)

    def counts() -> list[int]:
        return [sys.getrefcount(key), sys.getrefcount(value), sys.getrefcount(header), sys.getrefcount(offsets)]

    list(native_iter(columns))  # warm up (interned attribute names, type caches)
    before = counts()
    records = list(native_iter(columns))
    assert counts() == [before[0] + 4, before[1] + 4, before[2] + 4, before[3]]
    del records
    assert counts() == before
    it = native_iter(columns)
    assert counts()[3] == before[3] + 1  # the iterator holds the offsets list
    next(it), next(it)
    del it
    assert counts() == before
    gc.collect()
    assert counts() == before


def test_a_column_shrinking_during_iteration_stops_it_as_zip_would() -> None:
    def rest_after_shrinking(decoder: native.DecoderName) -> list[bytes]:
        values = [b"%d" % i for i in range(5)]
        columns = RecordColumns("t", 0, range(5), [0] * 5, 0, [None] * 5, values, None, None)
        native.use_decoder(decoder)
        it = iter(columns)
        next(it)
        del values[2:]
        return [r.value for r in it]

    require_native()
    before = native.decoder()
    try:
        assert rest_after_shrinking("python") == rest_after_shrinking("native") == [b"1"]
    finally:
        native.use_decoder(before)
