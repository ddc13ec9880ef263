"""The native raw decode (``decode_v2_raw``): Arrow batches straight from spans, columns made lazily.

Arrow batches built from a batch's raw spans must equal the ones built from its Python columns
(same schema, same values) over every codec, headers, nulls, offset gaps, LogAppendTime, slices and
``from_offset``; the lazily made columns must equal ``decode_v2_batch``'s and the Python decoder's;
and damaged input must fail in ``decode_v2_raw`` exactly as in ``decode_v2_batch`` (same type,
same message), at decode time.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from aiokafka_lite.arrow import build_arrow_batch
from aiokafka_lite.errors import KafkaError
from aiokafka_lite.protocol import native
from aiokafka_lite.protocol.compression import Codec
from aiokafka_lite.protocol.records.build import RecordSpec, build_record_batch
from aiokafka_lite.protocol.records.columns import RecordColumns
from aiokafka_lite.protocol.records.decode import PartitionRecords, RecordBatch, iter_batches
from aiokafka_lite.protocol.records.v2 import LOG_OVERHEAD
from tests.decoders import converted, require_native
from tests.unit.protocol.records.test_records_parity import corpus, damaged

pa = pytest.importorskip("pyarrow")


@pytest.fixture(autouse=True)
def _native_decoder() -> Iterator[None]:
    require_native()
    before = native.decoder()
    native.use_decoder("native")
    yield
    native.use_decoder(before)


def _chunks(data: bytes, fetch_offset: int = 0, take: int | None = None) -> list[RecordColumns]:
    reader = PartitionRecords("topic-é", 3, data, fetch_offset)
    out: list[RecordColumns] = []
    while held := reader.take(take):
        out.extend(held.chunks)
    return out


def _made(chunk: RecordColumns) -> RecordColumns:
    """A copy of ``chunk`` with its columns made (so the Arrow builder reads Python objects)."""
    copy = chunk[0:len(chunk)]
    assert copy.keys is not None
    assert copy.raw_rows() is None
    return copy


def _python_chunks(data: bytes, fetch_offset: int = 0, take: int | None = None) -> list[RecordColumns]:
    native.use_decoder("python")
    try:
        return _chunks(data, fetch_offset, take)
    finally:
        native.use_decoder("native")


def _table(chunks: list[RecordColumns]) -> Any:
    return pa.record_batch(build_arrow_batch(chunks))


V2_ONLY = 8  # the first inputs: v2 batches only (the corpus mixes in legacy message sets)


def _inputs() -> list[bytes]:
    specs = [RecordSpec(None, b"v0", [], 1_700_000_000_000),
             RecordSpec(b"k1", None, [("h", b"x"), ("\u00e9", None)], 1_700_000_000_005),
             RecordSpec(b"", b"", [], 1_600_000_000_000),
             RecordSpec(b"k3", b"v" * 300, [("only", b"")], 1_700_000_000_009)]
    made = [build_record_batch(specs, codec=codec, base_offset=40) for codec in Codec]
    made.append(build_record_batch(specs, timestamp_type=1, base_offset=7))  # LogAppendTime
    gaps = [RecordSpec(s.key, s.value, s.headers, s.timestamp, offset_delta=2 * i) for i, s in enumerate(specs)]
    made.append(build_record_batch(gaps, codec=Codec.LZ4, base_offset=100))
    plain = [RecordSpec(s.key, s.value, [], s.timestamp) for s in specs]  # no headers at all
    made.append(build_record_batch(plain) + build_record_batch(plain, base_offset=4, codec=Codec.ZSTD))
    return made + corpus()


@pytest.mark.parametrize("take", [None, 1, 3])
def test_arrow_from_raw_spans_equals_arrow_from_columns(take: int | None) -> None:
    for number, data in enumerate(_inputs()):
        for fetch_offset in (0, 2, 41, 104):
            chunks = _chunks(data, fetch_offset, take)
            if number < V2_ONLY:
                assert all(c.raw_rows() is not None for c in chunks)
            from_raw = _table(chunks)
            from_columns = _table([_made(c) for c in chunks])
            python = _python_chunks(data, fetch_offset, take)
            native.use_decoder("python")
            from_pyarrow = _table(python)
            native.use_decoder("native")
            assert from_raw.schema == from_columns.schema == from_pyarrow.schema
            assert from_raw.equals(from_columns)
            assert from_raw.equals(from_pyarrow)
            assert from_raw.num_rows == sum(map(len, python))
            if number < V2_ONLY:
                assert all(c.raw_rows() is not None for c in chunks)  # building made no columns


def test_raw_and_made_chunks_mix_in_one_batch() -> None:
    data = _inputs()[0]
    chunks = _chunks(data, take=1)
    mixed = [c if i % 2 else _made(c) for i, c in enumerate(chunks)]
    legacy = RecordColumns("legacy", 1, [0], [-1], -1, [b"x"], [None], [()], None)
    assert _table([*mixed, legacy]).equals(_table([*(_made(c) for c in chunks), legacy]))


def test_without_values_the_value_column_is_null_typed_and_the_rest_equal() -> None:
    """poll_arrow() with decoded values asks for no raw value column (it would be thrown away)."""
    for data in _inputs()[:V2_ONLY]:
        for chunks in (_chunks(data, take=3), [_made(c) for c in _chunks(data)]):
            whole = _table(chunks)
            without = pa.record_batch(build_arrow_batch(chunks, values=False))
            assert without.schema.field("value").type == pa.null()
            assert without.column("value").null_count == without.num_rows == whole.num_rows
            assert without.drop_columns(["value"]).equals(whole.drop_columns(["value"]))


def test_columns_are_made_on_first_access_and_equal_the_python_decoders() -> None:
    for data in _inputs():
        for fetch_offset in (0, 2, 41):
            chunks = _chunks(data, fetch_offset, take=3)
            python = _python_chunks(data, fetch_offset, take=3)
            assert [len(c) for c in chunks] == [len(c) for c in python]
            for raw, expected in zip(chunks, python, strict=True):
                assert list(raw.offsets) == list(expected.offsets)
                assert raw.raw_rows() is not None or isinstance(raw.keys, list)
                assert list(raw.timestamps) == list(expected.timestamps)
                assert raw.raw_rows() is None  # made once, then kept
                assert raw.keys == expected.keys
                assert raw.values == expected.values
                assert (None if raw.headers is None else list(raw.headers)) == (
                    None if expected.headers is None else list(expected.headers))
                assert list(raw) == list(expected)


def test_lazy_columns_equal_decode_v2_batch() -> None:
    data = build_record_batch([RecordSpec(b"k", b"v", [("a", b"1")], 5), RecordSpec(None, None, [], 6)])
    eager = native.active.decode_v2_batch(data, 0, len(data), True, 1 << 20)
    offsets, timestamp_type, raw = native.active.decode_v2_raw(data, 0, len(data), True, 1 << 20)
    assert (offsets, timestamp_type) == (eager[0], eager[2])
    assert len(raw) == 2
    assert raw.narrow
    assert raw.columns(0, 2) == (eager[1], eager[3], eager[4], eager[5])
    assert raw.columns(1, 2) == (eager[1][1:], eager[3][1:], eager[4][1:], eager[5][1:])
    with pytest.raises(ValueError, match="out of range"):
        raw.columns(1, 3)


def test_slices_keep_the_raw_source() -> None:
    chunk = _chunks(build_record_batch([RecordSpec(None, bytes([i]), [], i) for i in range(10)]))[0]
    part = chunk[2:7]
    assert part.raw_rows() is not None
    assert len(part) == 5
    assert part.from_offset(4).raw_rows() is not None
    assert part.from_offset(4).values == [bytes([i]) for i in range(4, 7)]
    empty = chunk[8:3]
    assert empty.raw_rows() is not None
    assert len(empty) == 0
    assert empty.values == []
    assert chunk[::2].values == [bytes([i]) for i in range(0, 10, 2)]  # a step: made, then sliced
    assert converted(chunk, lambda k: k, bytes.hex).values == [bytes([i]).hex() for i in range(10)]
    assert chunk[3].value == b"\x03"


def _v2_batches(data: bytes, batches: list[RecordBatch], check_crcs: bool) -> Iterator[tuple[Any, ...]]:
    """``decode_v2_*`` arguments for each v2 user batch of ``batches`` (the batches of ``data``)."""
    start = 0
    for batch in batches:
        end = start + LOG_OVERHEAD + batch.header.batch_length
        if batch.magic == 2 and not batch.is_control:
            yield data, start, end, check_crcs, 64 * 1024
        start = end


def _outcome(call: Any) -> tuple[str, str] | tuple[Any, ...]:
    try:
        return call()  # type: ignore[no-any-return]
    except KafkaError as exc:
        return type(exc).__name__, str(exc)


def test_damaged_batches_fail_in_decode_v2_raw_as_in_decode_v2_batch() -> None:
    rng = random.Random(99)
    bases = corpus()
    failures = 0
    for _ in range(4000):
        data, check_crcs = damaged(rng, bases)
        try:
            batches = list(iter_batches(data, "t", 0, check_crcs=check_crcs))
        except KafkaError:
            continue
        for args in _v2_batches(data, batches, check_crcs):
            eager = _outcome(lambda args=args: native.active.decode_v2_batch(*args))

            def raw_columns(args: tuple[Any, ...] = args) -> tuple[Any, ...]:
                offsets, timestamp_type, raw = native.active.decode_v2_raw(*args)
                stamps, keys, values, headers = raw.columns(0, len(raw))  # only after a clean decode
                return offsets, stamps, timestamp_type, keys, values, headers

            assert _outcome(raw_columns) == eager
            failures += isinstance(eager[0], str)
    assert failures > 500


def test_errors_are_raised_when_the_batch_is_decoded() -> None:
    data = bytearray(build_record_batch([RecordSpec(None, b"v", [], 1)] * 3))
    data[-1] ^= 0xFF  # damage the last record, CRCs unchecked
    batch = next(iter_batches(bytes(data), "t", 0, check_crcs=False))
    with pytest.raises(KafkaError) as raw_error:
        batch.records()
    native.use_decoder("python")
    with pytest.raises(KafkaError) as python_error:
        batch.records()
    assert (type(raw_error.value), str(raw_error.value)) == (type(python_error.value), str(python_error.value))


def test_timestamps_past_int64_fall_back_to_the_python_columns() -> None:
    specs = [RecordSpec(None, b"a", [], 2**63 - 1), RecordSpec(None, b"b", [], 2**63 + 5)]
    data = build_record_batch(specs, base_timestamp=2**63 - 1, max_timestamp=0)
    chunk = _chunks(data)[0]
    assert chunk.raw_rows() is None  # not narrow: Arrow gets the made columns (and fails as before)
    assert list(chunk.timestamps) == [2**63 - 1, 2**63 + 5] == list(_python_chunks(data)[0].timestamps)
    with pytest.raises(OverflowError):
        build_arrow_batch([chunk])
