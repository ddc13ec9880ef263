"""Record columns as one Arrow record batch: the native builder and its pyarrow twin, side by side."""

from __future__ import annotations

import ctypes
import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from aiokafka_lite.arrow import ArrowBatch, arrow_schema, build_arrow_batch
from aiokafka_lite.errors import ArrowUnavailableError, KafkaError, NativeError
from aiokafka_lite.protocol import native
from aiokafka_lite.protocol.records.columns import RecordColumns
from tests.decoders import require_native

pa = pytest.importorskip("pyarrow")

SPARK_KAFKA_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string(), nullable=False),
    pa.field("partition", pa.int32(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", pa.timestamp("ms", tz="UTC"), nullable=False),
    pa.field("timestampType", pa.int32(), nullable=False),
    pa.field("headers", pa.list_(pa.field("item", pa.struct([
        pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())]), nullable=False)),
        nullable=False),
])


@contextmanager
def _use(name: native.DecoderName) -> Iterator[None]:
    if name == "native":
        require_native()
    saved = native.decoder()
    native.use_decoder(name)
    try:
        yield
    finally:
        native.use_decoder(saved)


@pytest.fixture(params=["native", "python"])
def builder(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs the test once with the native builder and once with the pyarrow one."""
    with _use(request.param):
        yield request.param


def _sample() -> list[RecordColumns]:
    return [
        RecordColumns("orders", 3, range(100, 104), [1_700_000_000_000] * 4, 0,
                      [b"k0", None, b"", b"k3"], [b"v0", b"", None, b"\x00\xff"], None, 5),
        RecordColumns("payments-ü", 0, [7, 9, 12], [10, 11, 12], 1, [None, None, None], [b"a", b"b", b"c"],
                      [(), (("trace", b"1"), ("größe", None)), (("", b""),)], 2),
        RecordColumns("legacy", 1, [0], [-1], -1, [b"x"], [None], [()], None),
    ]


def _build(chunks: list[RecordColumns]) -> Any:
    return pa.record_batch(build_arrow_batch(chunks))


def test_schema_is_sparks_kafka_columns(builder: str) -> None:
    assert _build(_sample()).schema.equals(SPARK_KAFKA_SCHEMA)
    assert arrow_schema().equals(SPARK_KAFKA_SCHEMA)


def test_values_are_the_input_columns(builder: str) -> None:
    chunks = _sample()
    batch = _build(chunks)
    batch.validate(full=True)
    records = [record for chunk in chunks for record in chunk]
    assert batch.column("key").to_pylist() == [r.key for r in records]
    assert batch.column("value").to_pylist() == [r.value for r in records]
    assert batch.column("topic").to_pylist() == [r.topic for r in records]
    assert batch.column("partition").to_pylist() == [r.partition for r in records]
    assert batch.column("offset").to_pylist() == [r.offset for r in records]
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [r.timestamp for r in records]
    assert batch.column("timestampType").to_pylist() == [r.timestamp_type for r in records]
    headers = [[(h["key"], h["value"]) for h in row] for row in batch.column("headers").to_pylist()]
    assert headers == [list(r.headers) for r in records]
    assert batch.column("key").null_count == 4
    assert batch.column("value").null_count == 2


def test_native_and_python_batches_are_equal() -> None:
    big = RecordColumns("big", 7, range(50_000), list(range(50_000)), 0,
                        [None if i % 3 else b"k%d" % i for i in range(50_000)],
                        [b"v" * (i % 50) for i in range(50_000)], None, 0)
    chunks = [*_sample(), big]
    batches = {}
    names: tuple[native.DecoderName, ...] = ("native", "python")
    for name in names:
        with _use(name):
            batches[name] = _build(chunks)
    assert batches["native"].equals(batches["python"])


@pytest.mark.parametrize("chunks", [[], [RecordColumns("t", 0, range(5, 5), [], 0, [], [], None, None)]],
                         ids=["no-chunks", "empty-chunk"])
def test_empty_input_gives_an_empty_batch_with_the_full_schema(builder: str, chunks: list[RecordColumns]) -> None:
    arrow = build_arrow_batch(chunks)
    assert (arrow.num_rows, len(arrow)) == (0, 0)
    batch = pa.record_batch(arrow)
    batch.validate(full=True)
    assert batch.schema.equals(SPARK_KAFKA_SCHEMA)
    assert batch.num_rows == 0


def test_many_rows(builder: str) -> None:
    chunks = [RecordColumns(f"topic-{c}", c, range(c * 10_000, (c + 1) * 10_000), [c] * 10_000, 1,
                            [None] * 10_000, [b"%07d" % i for i in range(10_000)], None, 0) for c in range(10)]
    arrow = build_arrow_batch(chunks)
    assert arrow.num_rows == 100_000
    batch = arrow.to_pyarrow()
    batch.validate(full=True)
    assert batch.column("offset").to_pylist() == list(range(100_000))
    assert batch.column("value")[54_321].as_py() == b"0004321"
    assert batch.column("topic")[99_999].as_py() == "topic-9"
    assert batch.column("headers").to_pylist()[::25_000] == [[]] * 4


def test_pyarrow_takes_the_requested_schema_when_it_is_the_batch_schema(builder: str) -> None:
    batch = pa.record_batch(build_arrow_batch(_sample()), schema=SPARK_KAFKA_SCHEMA)
    assert batch.schema.equals(SPARK_KAFKA_SCHEMA)


def test_the_imported_batch_outlives_the_arrow_batch(builder: str) -> None:
    arrow = build_arrow_batch(_sample())
    batch = arrow.to_pyarrow()
    values = batch.column("value")
    del arrow, batch
    gc.collect()
    assert values.to_pylist() == [b"v0", b"", None, b"\x00\xff", b"a", b"b", b"c", None]


def test_a_capsule_is_consumed_once(builder: str) -> None:
    schema_capsule, array_capsule = build_arrow_batch(_sample()).__arrow_c_array__()
    batch = pa.RecordBatch._import_from_c_capsule(schema_capsule, array_capsule)
    with pytest.raises(ValueError, match="released"):
        pa.RecordBatch._import_from_c_capsule(schema_capsule, array_capsule)
    batch.validate(full=True)


def test_capsules_released_unconsumed_or_partly_consumed_do_not_leak(builder: str) -> None:
    before = _held_mb(builder)
    arrow = build_arrow_batch([RecordColumns("t", 0, range(1000), [0] * 1000, 0, [None] * 1000,
                                             [b"x" * 65536] * 1000, None, None)])  # 64 MB of values
    for i in range(3000):
        schema_capsule, array_capsule = arrow.__arrow_c_array__()
        if i % 3 == 1:  # the schema alone is imported, the array capsule dropped unused
            assert pa.Schema._import_from_c_capsule(schema_capsule).equals(SPARK_KAFKA_SCHEMA)
        elif i % 3 == 2:
            pa.RecordBatch._import_from_c_capsule(schema_capsule, array_capsule)
        del schema_capsule, array_capsule
        arrow.__arrow_c_schema__()
    del arrow  # the last owner of the buffers: they are freed (too big to stay in malloc's pools)
    gc.collect()
    assert _held_mb(builder) - before < 32


def test_batches_built_and_dropped_do_not_leak(builder: str) -> None:
    chunks = [RecordColumns("t", 0, range(100), [0] * 100, 0, [b"k"] * 100, [b"x" * 10_000] * 100,
                            [(("h", b"v"),)] * 100, None)]  # 1 MB of values
    before = _held_mb(builder)
    for _ in range(3000):
        build_arrow_batch(chunks).to_pyarrow()
    gc.collect()
    assert _held_mb(builder) - before < 100


def _held_mb(builder: str) -> float:
    """Memory the builder holds: pyarrow's pool for the python one, the process's RSS for the native one."""
    if builder == "python":
        return float(pa.total_allocated_bytes()) / 2**20
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


@pytest.mark.parametrize(("values", "error"), [([1], TypeError), ([b"a", b"b"], ValueError)],
                         ids=["not-bytes", "length-mismatch"])
def test_bad_columns_raise(builder: str, values: list[Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        build_arrow_batch([RecordColumns("t", 0, [0], [0], 0, [None], values, None, None)])


class _Bytes(bytes):
    pass


@pytest.mark.parametrize(("keys", "values", "headers", "message"), [
    ([None], ["text"], None, "values must be bytes or None, not str"),
    (["text"], [None], None, "keys must be bytes or None, not str"),
    ([None], [bytearray(b"x")], None, "values must be bytes or None, not bytearray"),
    ([None], [None], [((None, b"v"),)], "header keys must be str, not NoneType"),
    ([None], [None], [((b"k", b"v"),)], "header keys must be str, not bytes"),
    ([None], [None], [(("k", "v"),)], "header values must be bytes or None, not str"),
], ids=["str-value", "str-key", "bytearray-value", "none-header-key", "bytes-header-key", "str-header-value"])
def test_both_builders_refuse_the_same_bad_items(builder: str, keys: list[Any], values: list[Any],
                                                headers: list[Any] | None, message: str) -> None:
    """pyarrow alone would take a str as binary and a None header key as a null in a non-null field."""
    good = RecordColumns("t", 0, [0], [0], 0, [b"k"], [b"v"], [(("h", b"v"),)], None)
    bad = RecordColumns("t", 0, [1], [0], 0, keys, values, headers, None)
    with pytest.raises(TypeError, match=f"^{message}$"):
        build_arrow_batch([good, bad])


def test_bytes_and_str_subclasses_are_taken_by_both_builders(builder: str) -> None:
    chunk = RecordColumns("t", 0, [0], [0], 0, [_Bytes(b"k")], [_Bytes(b"v")], [((_Str("h"), _Bytes(b"x")),)], None)
    batch = _build([chunk])
    assert batch.column("value").to_pylist() == [b"v"]
    assert batch.column("headers").to_pylist() == [[{"key": "h", "value": b"x"}]]


class _Str(str):
    __slots__ = ()


def test_arrow_batch_wraps_a_pyarrow_batch_too() -> None:
    batch = pa.RecordBatch.from_pylist([], schema=SPARK_KAFKA_SCHEMA)
    wrapped = ArrowBatch(batch)
    assert wrapped.to_pyarrow() is batch
    assert pa.record_batch(wrapped).equals(batch)
    assert repr(wrapped) == "ArrowBatch(0 rows)"


def test_without_pyarrow_or_native_a_typed_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setattr(native, "active", None)
    with pytest.raises(ArrowUnavailableError, match=r"pip install '\.\[arrow\]' in the aiokafka-lite clone") as caught:
        build_arrow_batch(_sample())
    assert isinstance(caught.value, ImportError)
    assert isinstance(caught.value, KafkaError)


def test_native_batch_to_pyarrow_without_pyarrow_raises_the_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    require_native()
    monkeypatch.setattr(native, "active", native._built)
    arrow = build_arrow_batch(_sample())
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert arrow.num_rows == 8
    with pytest.raises(ArrowUnavailableError):
        arrow.to_pyarrow()


def test_a_panic_in_the_exporter_is_a_native_error() -> None:
    require_native()
    with pytest.raises(NativeError, match=r"failed in _arrow_panic_probe: probe .*AIOKAFKA_LITE_NO_NATIVE=1"):
        native._built._arrow_panic_probe()
    assert issubclass(NativeError, KafkaError)


def test_a_stream_of_the_one_batch(builder: str) -> None:
    arrow = build_arrow_batch(_sample())
    reader = pa.RecordBatchReader.from_stream(arrow)
    assert reader.schema.equals(SPARK_KAFKA_SCHEMA)
    batches = list(reader)
    assert len(batches) == 1
    batches[0].validate(full=True)
    assert batches[0].equals(pa.record_batch(arrow))
    with pytest.raises(StopIteration):
        reader.read_next_batch()


def test_pyarrow_table_takes_the_batch(builder: str) -> None:
    arrow = build_arrow_batch(_sample())
    table = pa.table(arrow)
    table.validate(full=True)
    assert table.schema.equals(SPARK_KAFKA_SCHEMA)
    assert table.to_batches()[0].equals(pa.record_batch(arrow))


def test_every_stream_call_is_a_new_stream_and_each_is_consumed_once(builder: str) -> None:
    arrow = build_arrow_batch(_sample())
    first, second = arrow.__arrow_c_stream__(), arrow.__arrow_c_stream__()
    assert pa.RecordBatchReader._import_from_c_capsule(first).read_all().num_rows == 8
    with pytest.raises(ValueError, match="released"):
        pa.RecordBatchReader._import_from_c_capsule(first)
    assert pa.RecordBatchReader._import_from_c_capsule(second).read_all().num_rows == 8


def test_a_batch_read_from_the_stream_outlives_the_stream_and_the_arrow_batch(builder: str) -> None:
    arrow = build_arrow_batch(_sample())
    reader = pa.RecordBatchReader.from_stream(arrow)
    batch = reader.read_next_batch()
    del arrow, reader
    gc.collect()
    assert batch.column("value").to_pylist() == [b"v0", b"", None, b"\x00\xff", b"a", b"b", b"c", None]


def test_streams_released_unread_or_partly_read_do_not_leak(builder: str) -> None:
    before = _held_mb(builder)
    arrow = build_arrow_batch([RecordColumns("t", 0, range(1000), [0] * 1000, 0, [None] * 1000,
                                             [b"x" * 65536] * 1000, None, None)])  # 64 MB of values
    for i in range(3000):
        stream = arrow.__arrow_c_stream__()
        if i % 3 == 1:  # imported, the schema read, no batch
            assert pa.RecordBatchReader._import_from_c_capsule(stream).schema.equals(SPARK_KAFKA_SCHEMA)
        elif i % 3 == 2:
            assert pa.RecordBatchReader._import_from_c_capsule(stream).read_all().num_rows == 1000
        del stream
    del arrow
    gc.collect()
    assert _held_mb(builder) - before < 32


class _CSchema(ctypes.Structure):
    pass


_SchemaRelease = ctypes.CFUNCTYPE(None, ctypes.POINTER(_CSchema))
_CSchema._fields_ = [
    ("format", ctypes.c_char_p), ("name", ctypes.c_char_p), ("metadata", ctypes.c_char_p),
    ("flags", ctypes.c_int64), ("n_children", ctypes.c_int64), ("children", ctypes.c_void_p),
    ("dictionary", ctypes.c_void_p), ("release", _SchemaRelease), ("private_data", ctypes.c_void_p),
]


class _CArray(ctypes.Structure):
    pass


_Release = ctypes.CFUNCTYPE(None, ctypes.POINTER(_CArray))
_CArray._fields_ = [
    ("length", ctypes.c_int64), ("null_count", ctypes.c_int64), ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64), ("n_children", ctypes.c_int64), ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(_CArray))), ("dictionary", ctypes.POINTER(_CArray)),
    ("release", _Release), ("private_data", ctypes.c_void_p),
]


def _capsule_pointer(capsule: Any, name: bytes) -> Any:
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return ctypes.cast(get_pointer(capsule, name), ctypes.POINTER(_CArray))


def test_a_child_moved_out_of_the_array_is_released_on_its_own(builder: str) -> None:
    """The C data interface lets a consumer move a child out and release it after its parent."""
    _, array_capsule = build_arrow_batch(_sample()).__arrow_c_array__()
    root = _capsule_pointer(array_capsule, b"arrow_array").contents
    assert (root.length, root.n_children) == (8, 8)
    value_column = root.children[1].contents
    moved = _CArray()
    ctypes.pointer(moved)[0] = value_column  # a bitwise move, then the source is marked released
    value_column.release = _Release()
    del array_capsule, root, value_column
    gc.collect()  # the parent is released: the moved child must still be valid
    offsets = ctypes.cast(moved.buffers[1], ctypes.POINTER(ctypes.c_int32))
    data = ctypes.string_at(moved.buffers[2], offsets[moved.length])
    assert data == b"v0\x00\xffabc"
    moved.release(ctypes.pointer(moved))
    assert not moved.release


class _CStream(ctypes.Structure):
    pass


_CStream._fields_ = [
    ("get_schema", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_CStream), ctypes.POINTER(_CSchema))),
    ("get_next", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_CStream), ctypes.POINTER(_CArray))),
    ("get_last_error", ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.POINTER(_CStream))),
    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_CStream))), ("private_data", ctypes.c_void_p),
]


def test_the_stream_hands_out_the_batch_once_then_the_end_of_the_stream(builder: str) -> None:
    """The C stream interface: get_next gives the batch, then arrays whose release is NULL."""
    capsule = build_arrow_batch(_sample()).__arrow_c_stream__()
    stream_pointer = ctypes.cast(_capsule_pointer(capsule, b"arrow_array_stream"), ctypes.POINTER(_CStream))
    stream = stream_pointer.contents
    schema = _CSchema()
    assert stream.get_schema(stream_pointer, ctypes.pointer(schema)) == 0
    assert (schema.format, schema.n_children) == (b"+s", 8)
    schema.release(ctypes.pointer(schema))
    arrays = [_CArray() for _ in range(3)]
    assert [stream.get_next(stream_pointer, ctypes.pointer(a)) for a in arrays] == [0, 0, 0]
    assert (arrays[0].length, arrays[0].n_children) == (8, 8)
    assert [bool(a.release) for a in arrays] == [True, False, False]
    assert stream.get_last_error(stream_pointer) is None
    stream.release(stream_pointer)  # the stream first: the batch it handed out stays valid
    assert not stream.release
    del capsule, stream, stream_pointer
    gc.collect()
    offsets = ctypes.cast(arrays[0].children[1].contents.buffers[1], ctypes.POINTER(ctypes.c_int32))
    assert offsets[8] == len(b"v0\x00\xffabc")
    arrays[0].release(ctypes.pointer(arrays[0]))
    assert not arrays[0].release
