"""poll_arrow()'s native Avro column (avro_plan.py, avro_sink.py, native/src/avro) against the
reference path, fastavro's values built into the same Arrow type by pyarrow: the same column for
each writer/reader pair (evolution, promotions, unions, defaults, every type), the same verdict on
random bytes, and the sink's hand-out contract (a schema to prepare, a poison record)."""

from __future__ import annotations

import asyncio
import copy
import datetime
import io
import json
import math
import re
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite.protocol import native
from aiokafka_lite.protocol.records.columns import RecordChunks, RecordColumns
from aiokafka_lite.schema_registry import (
    AvroDeserializer,
    SchemaDeserializationError,
    SchemaNotPreparedError,
    SchemaRegistryClient,
    avro_plan,
)
from aiokafka_lite.schema_registry.avro_arrow import arrow_type
from aiokafka_lite.schema_registry.avro_sink import AvroArrowSink
from aiokafka_lite.schema_registry.wire import frame
from tests.unit.schema_registry.registry_schemas import registry_of, schema_body
from tests.unit.schema_registry.scripted_registry import scripted_registry
from tests.unit.schema_registry.test_avro_arrow import ORDER, value

EXTENSION = native.extension()
pytestmark = pytest.mark.skipif(EXTENSION is None, reason="the native extension is not built")

ADDRESS = {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}
V1 = {"type": "record", "name": "Item", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "gone", "type": {"type": "array", "items": ADDRESS}, "default": []}]}
V2 = {"type": "record", "name": "Item", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "qty", "type": "int", "default": 1},
    {"name": "where", "type": ADDRESS, "default": {"city": "Lyon"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}, "default": ["a", "b"]},
    {"name": "marks", "type": {"type": "map", "values": "double"}, "default": {"m": 1.5}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["X", "Y"]}, "default": "Y"},
    {"name": "flag", "type": ["boolean", "null"], "default": True}]}
WIDE = {"type": "record", "name": "Wide", "fields": [
    {"name": "a", "type": "int"}, {"name": "b", "type": "long"}, {"name": "c", "type": "float"},
    {"name": "d", "type": "bytes"}, {"name": "e", "type": "string"}, {"name": "f", "type": "int"},
    {"name": "g", "type": ["null", "int", "string"]}]}
NARROW = {"type": "record", "name": "Wide", "fields": [
    {"name": "a", "type": "long"}, {"name": "b", "type": "double"}, {"name": "c", "type": "double"},
    {"name": "d", "type": "string"}, {"name": "e", "type": "bytes"}, {"name": "f", "type": "double"},
    {"name": "g", "type": ["null", "long"]}]}
ENUM_W = {"type": "enum", "name": "Level", "symbols": ["LOW", "MID", "HIGH"]}
ENUM_R = {"type": "enum", "name": "Level", "symbols": ["HIGH", "LOW"], "default": "LOW"}
RENAMED_W = {"type": "record", "name": "P", "fields": [{"name": "old", "type": "string"}, {"name": "n", "type": "int"}]}
RENAMED_R = {"type": "record", "name": "P", "fields": [{"name": "n", "type": "long"},
                                                      {"name": "new", "type": "string", "aliases": ["old"]}]}
NESTED = {"type": "record", "name": "N", "fields": [
    {"name": "rows", "type": {"type": "array", "items": ["null", {"type": "record", "name": "Row", "fields": [
        {"name": "k", "type": "string"}, {"name": "v", "type": {"type": "map", "values": {
            "type": "array", "items": "long"}}}]}]}},
    {"name": "big", "type": {"type": "fixed", "name": "Big", "size": 20, "logicalType": "decimal",
                             "precision": 40, "scale": 3}},
    {"name": "small", "type": {"type": "fixed", "name": "Small", "size": 5, "logicalType": "decimal",
                               "precision": 10, "scale": 2}},
    {"name": "maybe", "type": ["null", "Row"], "default": None}]}


def payload(schema: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(copy.deepcopy(schema)), record)
    return out.getvalue()


def reference(writer: Any, reader: Any, payloads: list[bytes | None]) -> pa.Array:
    """The Python path: fastavro reads each value (resolving into the reader), pyarrow builds the column."""
    parsed_w, parsed_r = fastavro.parse_schema(copy.deepcopy(writer)), fastavro.parse_schema(copy.deepcopy(reader))
    values = []
    for data in payloads:
        if data is None:
            values.append(None)
            continue
        stream = io.BytesIO(data)
        values.append(fastavro.schemaless_reader(stream, parsed_w, parsed_r))
        assert stream.tell() == len(data), "bytes left over"
    return pa.array(values, type=arrow_type(pa, reader))


def native_builder(writer: Any, reader: Any, schema_id: int = 1) -> tuple[Any, dict[int, Any]]:
    assert EXTENSION is not None
    parsed_r = avro_plan.Schema(fastavro.parse_schema(copy.deepcopy(reader)))
    shape = EXTENSION.AvroShape(avro_plan.shape(parsed_r))
    op = avro_plan.plan(avro_plan.Schema(fastavro.parse_schema(copy.deepcopy(writer))), parsed_r)
    return EXTENSION.AvroArrowBuilder(shape), {schema_id: EXTENSION.AvroPlan(op, shape)}


def native_column(writer: Any, reader: Any, payloads: list[bytes | None]) -> tuple[pa.Array, tuple[int, int, str]]:
    builder, plans = native_builder(writer, reader)
    values = [None if data is None else frame(1, data) for data in payloads]
    outcome = builder.decode(values, 0, len(values), plans)
    column = pa.array(builder.finish())
    column.validate(full=True)
    return column, outcome


CASES = {
    "every type": (ORDER, ORDER, [payload(ORDER, value(i)) for i in range(12)] + [None]),
    "v1 read as v2 (defaults)": (V1, V2, [payload(V1, {"id": i, "note": None if i % 2 else "n",
                                                       "gone": [{"city": "x"}] * i}) for i in range(4)]),
    "v2 read as v1 (fields skipped)": (V2, V1, [payload(V2, {
        "id": i, "note": "n", "qty": i, "where": {"city": "c"}, "tags": ["t"] * i, "marks": {"k": 0.25},
        "kind": "X", "flag": None}) for i in range(4)]),
    "promotions and a union read as a nullable long": (WIDE, NARROW, [payload(WIDE, {
        "a": -i, "b": 2**40 + i, "c": 1.25, "d": "é".encode(), "e": "ü", "f": i, "g": None if i % 2 else 7})
        for i in range(4)]),
    "enum symbols by name, an unknown one as the reader's default": (ENUM_W, ENUM_R, [
        payload(ENUM_W, s) for s in ["LOW", "MID", "HIGH"]]),
    "a field found by its alias": (RENAMED_W, RENAMED_R, [payload(RENAMED_W, {"old": "o", "n": 3})]),
    "nested lists, maps, decimals": (NESTED, NESTED, [payload(NESTED, {
        "rows": [None, {"k": "a", "v": {"x": [1, 2], "y": []}}], "big": Decimal("-12345678901234567.891"),
        "small": Decimal("-3.07"), "maybe": {"k": "b", "v": {}}}),
        payload(NESTED, {"rows": [], "big": Decimal("0.001"),
                         "small": Decimal("99.99"), "maybe": None})]),
    "a plain long": ("long", ["null", "long"], [payload("long", -(2**63)), payload("long", 2**63 - 1), None]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_native_column_equals_the_reference(case: str) -> None:
    writer, reader, payloads = CASES[case]
    column, outcome = native_column(writer, reader, payloads)
    assert outcome == (len(payloads), 0, "")
    expected = reference(writer, reader, payloads)
    assert column.type == expected.type
    assert column.to_pylist() == expected.to_pylist()


def test_a_union_branch_the_reader_cannot_take_fails_that_value_alone() -> None:
    payloads = [payload(WIDE, {"a": 1, "b": 2, "c": 3.0, "d": b"", "e": "", "f": 0, "g": g}) for g in (5, "x", None)]
    builder, plans = native_builder(WIDE, NARROW)
    values = [frame(1, data) for data in payloads]
    done, status, why = builder.decode(values, 0, 3, plans)
    assert (done, status) == (1, 2)
    assert "union branch" in why
    with pytest.raises(fastavro.read.SchemaResolutionError):  # the reference fails it too
        reference(WIDE, NARROW, payloads[1:2])
    assert builder.decode(values, 2, 3, plans) == (1, 0, "")
    column = pa.array(builder.finish())
    column.validate(full=True)
    assert [row["g"] for row in column.to_pylist()] == [5, None]  # the failed row left nothing behind


def test_a_truncated_value_is_rolled_back_and_an_unknown_id_stops_the_decoding() -> None:
    good = [payload(ORDER, value(i)) for i in range(2)]
    builder, plans = native_builder(ORDER, ORDER)
    values = [frame(1, good[0]), frame(1, good[1][:-3]), frame(1, good[1]), frame(9, good[1]), frame(1, good[0] + b"x")]
    assert builder.decode(values, 0, 5, plans)[:2] == (1, 2)
    assert builder.decode(values, 2, 5, plans) == (1, 1, "9")
    done, status, why = builder.decode(values, 4, 5, plans)
    assert (done, status) == (0, 2)
    assert "left over" in why
    column = pa.array(builder.finish())
    column.validate(full=True)
    assert column.to_pylist() == reference(ORDER, ORDER, [good[0], good[1]]).to_pylist()


def test_pairs_the_native_decoder_does_not_read_are_said_so_for_the_python_path() -> None:
    no_default = {**V2, "fields": [*V1["fields"][:2], {"name": "qty", "type": "int"}]}
    with pytest.raises(avro_plan.NativePlanUnavailable, match="'qty' is not written and has no default"):
        native_builder(V1, no_default)
    millis = {"type": "long", "logicalType": "timestamp-millis"}
    micros = {"type": "long", "logicalType": "timestamp-micros"}
    with pytest.raises(avro_plan.NativePlanUnavailable, match="timestamp-micros value read as timestamp-millis"):
        native_builder(micros, millis)


LEAN = {"type": "record", "name": "Lean", "fields": [
    {"name": "i", "type": "int"}, {"name": "l", "type": "long"}, {"name": "d", "type": "double"},
    {"name": "f", "type": "float"}, {"name": "b", "type": "boolean"}, {"name": "s", "type": "string"},
    {"name": "raw", "type": "bytes"}, {"name": "n", "type": ["null", "string"]},
    {"name": "xs", "type": {"type": "array", "items": "long"}},
    {"name": "m", "type": {"type": "map", "values": ["null", "double"]}},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["P", "Q", "R"]}}]}
FINITE = st.floats(allow_nan=False, width=32)
LEAN_VALUES = st.fixed_dictionaries({
    "i": st.integers(-(2**31), 2**31 - 1), "l": st.integers(-(2**63), 2**63 - 1),
    "d": st.floats(allow_nan=False), "f": FINITE, "b": st.booleans(), "s": st.text(max_size=8),
    "raw": st.binary(max_size=8), "n": st.none() | st.text(max_size=4),
    "xs": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4),
    "m": st.dictionaries(st.text(max_size=3), st.none() | st.floats(allow_nan=False), max_size=3),
    "e": st.sampled_from(["P", "Q", "R"])})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LEAN_VALUES, max_size=6))
def test_random_values_decode_as_the_reference_does(records: list[dict[str, Any]]) -> None:
    payloads: list[bytes | None] = [payload(LEAN, r) for r in records]
    column, outcome = native_column(LEAN, LEAN, payloads)
    assert outcome == (len(payloads), 0, "")
    assert column.to_pylist() == reference(LEAN, LEAN, payloads).to_pylist()


def reference_verdict(data: bytes) -> Any:
    """What the Python path makes of ``data``: the value, or None when it cannot decode it."""
    try:
        return reference(LEAN, LEAN, [data]).to_pylist()[0]
    except Exception:
        return None


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=60) | LEAN_VALUES.map(lambda r: payload(LEAN, r)).flatmap(
    lambda good: st.tuples(st.integers(0, len(good)), st.binary(max_size=3)).map(
        lambda cut: good[:cut[0]] + cut[1] + good[cut[0] + len(cut[1]):])))
def test_random_bytes_get_the_reference_verdict(data: bytes) -> None:
    """Damaged and random payloads: decoded (the same value) or refused, as by the reference."""
    column, (done, status, why) = native_column(LEAN, LEAN, [data])
    if re.search(r"(union branch|enum index) -\d+ out of range", why):
        # fastavro reads a negative index as a Python list does (from the end); Avro has none
        assert (done, status, len(column)) == (0, 2, 0)
        return
    expected = reference_verdict(data)
    if expected is None:
        assert (done, status) == (0, 2), why
        assert why
        assert len(column) == 0
    else:
        assert (done, status, why) == (1, 0, "")
        assert nan_as_text(column.to_pylist()) == nan_as_text([expected])


def nan_as_text(value: Any) -> Any:
    """``value`` with each NaN a string, so that equal columns compare equal (NaN != NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, dict):
        return {key: nan_as_text(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [nan_as_text(item) for item in value]
    return value


SCHEMAS = {1: schema_body(V1), 2: schema_body(V2)}


def chunk(values: list[bytes | None], first: int = 0) -> RecordColumns:
    rows = range(first, first + len(values))
    return RecordColumns("t", 0, list(rows), [0] * len(values), 0, [None] * len(values), values, None, 0)


@pytest.mark.asyncio
async def test_the_sink_stops_where_poll_would_and_gives_the_column_of_what_it_handed_out() -> None:
    async with scripted_registry(registry_of(SCHEMAS)) as server, SchemaRegistryClient(server.url) as client:
        avro = AvroDeserializer(client, reader_schema=json.dumps(V2))
        v1 = frame(1, payload(V1, {"id": 1, "note": None, "gone": []}))
        v2 = frame(2, payload(V2, {"id": 2, "note": "n", "qty": 5, "where": {"city": "c"}, "tags": [],
                                   "marks": {}, "kind": "X", "flag": False}))
        bad = frame(2, b"\x03")  # a long cut short
        sink = avro.arrow_sink()
        assert sink is not None
        got, stop = sink.convert(RecordChunks([chunk([v1, v2])]))
        assert not got
        assert stop is not None
        assert isinstance(stop[1].cause, SchemaNotPreparedError)  # poll() prepares it, then reads again
        await avro.prepare(1)
        await avro.prepare(2)
        sink = avro.arrow_sink()
        assert sink is not None
        first, second = chunk([v1, None, v2]), chunk([v2, bad, v1])
        got, stop = sink.convert(RecordChunks([first, second]))
        assert stop is not None
        assert (stop[0], stop[1].row) == (second, 1)
        assert isinstance(stop[1].cause, SchemaDeserializationError)  # fastavro's own error, as poll() raises
        handed = [first, got.chunks[1]]
        assert [len(c) for c in got.chunks] == [3, 1]
        column = sink.column(handed)
        assert column is not None
        expected = [avro(v) for v in [v1, None, v2, v2]]
        assert pa.array(column).to_pylist() == pa.array(expected, type=avro.arrow_type(pa)).to_pylist()
        sink = avro.arrow_sink()
        assert sink is not None
        sink.convert(RecordChunks([chunk([v1])]))
        assert sink.column([chunk([v1], first=5)]) is None  # not what it decoded: the Python path builds it


MICROS = {"type": "record", "name": "T", "fields": [
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}
MILLIS = {"type": "record", "name": "T", "fields": [
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}


@pytest.mark.asyncio
async def test_a_pair_without_a_native_plan_goes_the_python_way() -> None:
    async with scripted_registry(registry_of({4: schema_body(MILLIS), 5: schema_body(MICROS)})) as server, \
            SchemaRegistryClient(server.url) as client:
        avro = AvroDeserializer(client, reader_schema=MILLIS)
        await avro.prepare(4)
        await avro.prepare(5)
        millis = frame(4, payload(MILLIS, {"at": 1_000}))
        micros = frame(5, payload(MICROS, {"at": 2_000_000}))
        sink = avro.arrow_sink()
        assert sink is not None
        got, stop = sink.convert(RecordChunks([chunk([millis, micros]), chunk([millis], first=2)]))
        assert stop is None
        assert sink.column(got.chunks) is None  # micros read as millis: fastavro's values, built by pyarrow
        values = [sink.python_value(v) for c in got.chunks for v in c.values]
        assert pa.array(values, type=avro.arrow_type(pa)).to_pylist() == [
            {"at": datetime.datetime(1970, 1, 1, 0, 0, s, tzinfo=datetime.UTC)} for s in (1, 2, 1)]


@pytest.mark.asyncio
async def test_a_program_the_native_decoder_refuses_goes_the_python_way_with_one_warning(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A defect of ours (a program that does not fit the column) costs speed, not the values."""
    monkeypatch.setattr(avro_plan, "plan", lambda writer, reader: ("record", [("field", 9, ("long",))]))
    async with scripted_registry(registry_of({4: schema_body(MILLIS)})) as server, \
            SchemaRegistryClient(server.url) as client:
        avro = AvroDeserializer(client, reader_schema=MILLIS)
        await avro.prepare(4)
        value = frame(4, payload(MILLIS, {"at": 1_000}))
        for _ in range(2):
            sink = avro.arrow_sink()
            assert sink is not None
            got, stop = sink.convert(RecordChunks([chunk([value])]))
            assert stop is None
            assert sink.column(got.chunks) is None
            assert [sink.python_value(v) for v in got.chunks[0].values] == [
                {"at": datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=datetime.UTC)}]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert "schema id 4 with fastavro: its native program could not be made (ValueError" in warnings[0]


class CancellingReader:
    """A deserializer offering a native column whose own code raises CancelledError (issue 39's rule:
    nothing cancelled it, so it is that record's failure, not a cancellation of poll())."""

    def __call__(self, data: bytes | None) -> Any:
        raise asyncio.CancelledError

    def native_plans(self) -> dict[int, Any]:
        return {}  # no program: the sink asks the deserializer itself

    def add_native_plan(self, schema_id: int) -> None:
        raise AssertionError("not reached: the deserializer failed")


def test_a_deserializers_own_cancelled_error_is_a_poison_record_in_the_sink_too() -> None:
    assert native.active is not None
    builder = native.active.AvroArrowBuilder(native.active.AvroShape(avro_plan.shape(avro_plan.Schema(MILLIS))))
    sink = AvroArrowSink(CancellingReader(), builder)
    values = [frame(4, payload(MILLIS, {"at": 1_000}))]
    got, stop = sink.convert(RecordChunks([chunk(values)]))
    assert not got.chunks
    assert stop is not None
    assert stop[1].row == 0
    assert isinstance(stop[1].cause, RuntimeError)
    assert isinstance(stop[1].cause.__cause__, asyncio.CancelledError)
    with pytest.raises(RuntimeError, match="raised CancelledError without being cancelled"):
        sink.python_value(values[0])
