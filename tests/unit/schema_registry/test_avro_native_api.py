"""The native Avro-to-Arrow decoder's own API (_native.AvroShape, AvroPlan, AvroArrowBuilder), driven
with shapes and ops written by hand; values are encoded by fastavro and the expected columns are
written out independently."""

from __future__ import annotations

import datetime
import decimal
import io
import struct
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite import _native

LONG, STRING, DOUBLE, BOOL, INT, FLOAT, NULL = (
    ("long",), ("string",), ("double",), ("bool",), ("int",), ("float",), ("null",)
)


def framed(schema_id: int, schema: Any, value: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return b"\0" + struct.pack(">I", schema_id) + out.getvalue()


def run(shape: Any, op: Any, values: list[Any], schema_id: int = 1) -> pa.Array:
    """Decodes all of `values` (asserting they all decode) and returns the column."""
    avro_shape = _native.AvroShape(shape)
    builder = _native.AvroArrowBuilder(avro_shape)
    plans = {schema_id: _native.AvroPlan(op, avro_shape)}
    assert builder.decode(values, 0, len(values), plans) == (len(values), 0, "")
    assert len(builder) == len(values)
    column = pa.array(builder.finish())
    column.validate(full=True)
    assert len(builder) == 0
    return column


def status(shape: Any, op: Any, value: bytes) -> tuple[int, int, str]:
    avro_shape = _native.AvroShape(shape)
    builder = _native.AvroArrowBuilder(avro_shape)
    result = builder.decode([value], 0, 1, {1: _native.AvroPlan(op, avro_shape)})
    assert len(builder) == 0 or result[1] == 0
    return result


# A 10-field record, as in the benchmark.
WIDE_SCHEMA = {
    "type": "record", "name": "Wide",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "score", "type": "double"},
        {"name": "nick", "type": ["null", "string"]},
        {"name": "active", "type": "boolean"},
        {"name": "count", "type": "int"},
        {"name": "ratio", "type": "float"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
        {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B", "C"]}},
    ],
}
WIDE_SHAPE = ("struct", "+s", [
    ("id", False, ("i64", "l")),
    ("name", False, ("var", "u")),
    ("score", False, ("f64", "g")),
    ("nick", True, ("var", "u")),
    ("active", False, ("bool", "b")),
    ("count", False, ("i32", "i")),
    ("ratio", False, ("f64", "g")),  # float promoted to double
    ("tags", False, ("list", "+l", False, ("var", "u"))),
    ("attrs", False, ("map", "+m", True, ("i64", "l"))),
    ("kind", False, ("var", "u")),
])
WIDE_OP = ("record", [
    ("field", 0, LONG),
    ("field", 1, STRING),
    ("field", 2, DOUBLE),
    ("field", 3, ("union", [NULL, STRING])),
    ("field", 4, BOOL),
    ("field", 5, INT),
    ("field", 6, FLOAT),
    ("field", 7, ("array", STRING)),
    ("field", 8, ("map", ("union", [NULL, LONG]))),
    ("field", 9, ("enum", ["A", "B", "C"], ["A", "B", "C"])),
])
WIDE_ROWS = [
    {"id": 1, "name": "ada", "score": 1.5, "nick": None, "active": True, "count": -3,
     "ratio": 0.25, "tags": ["x", "y"], "attrs": {"a": 1, "b": None}, "kind": "B"},
    {"id": -(2**63), "name": "é" * 40, "score": -0.0, "nick": "n", "active": False,
     "count": 2**31 - 1, "ratio": -2.5, "tags": [], "attrs": {}, "kind": "C"},
]


def wide_expected(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "attrs": list(row["attrs"].items())}


def test_a_ten_field_record_decodes_to_its_columns() -> None:
    values = [framed(1, WIDE_SCHEMA, row) for row in WIDE_ROWS] + [None]
    column = run(WIDE_SHAPE, WIDE_OP, values)
    assert column.to_pylist() == [wide_expected(r) for r in WIDE_ROWS] + [None]
    assert column.null_count == 1
    assert column.type == pa.struct([
        pa.field("id", pa.int64(), False), pa.field("name", pa.utf8(), False),
        pa.field("score", pa.float64(), False), pa.field("nick", pa.utf8()),
        pa.field("active", pa.bool_(), False), pa.field("count", pa.int32(), False),
        pa.field("ratio", pa.float64(), False),
        pa.field("tags", pa.list_(pa.field("item", pa.utf8(), False)), False),
        pa.field("attrs", pa.map_(pa.utf8(), pa.int64()), False),
        pa.field("kind", pa.utf8(), False),
    ])
    # The null row's non-nullable children hold zero values; nullable ones are null.
    assert column.field("id").to_pylist()[2] == 0
    assert column.field("nick").to_pylist() == [None, "n", None]


def test_a_null_value_alone_exports_no_child_nulls_but_its_own() -> None:
    column = run(WIDE_SHAPE, WIDE_OP, [None, None])
    assert column.to_pylist() == [None, None]
    assert column.field("nick").null_count == 2
    assert column.field("id").null_count == 0


def test_a_nullable_union_of_a_nested_record() -> None:
    inner = {"type": "record", "name": "In", "fields": [
        {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"]}]}
    schema = {"type": "record", "name": "Out", "fields": [
        {"name": "where", "type": ["null", inner]}, {"name": "n", "type": "int"}]}
    shape = ("struct", "+s", [
        ("where", True, ("struct", "+s", [
            ("city", False, ("var", "u")), ("zip", True, ("i32", "i"))])),
        ("n", False, ("i64", "l")),  # int promoted to long
    ])
    op = ("record", [
        ("field", 0, ("union", [NULL, ("record", [
            ("field", 0, STRING), ("field", 1, ("union", [NULL, INT]))])])),
        ("field", 1, INT),
    ])
    rows = [{"where": None, "n": 1}, {"where": {"city": "Oslo", "zip": 150}, "n": 2},
            {"where": {"city": "", "zip": None}, "n": -3}]
    column = run(shape, op, [framed(1, schema, r) for r in rows])
    assert column.to_pylist() == rows


def test_lists_and_maps_nest() -> None:
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "grid", "type": {"type": "array", "items": {"type": "array", "items": "long"}}},
        {"name": "index", "type": {"type": "map", "values": {"type": "array", "items": "string"}}},
        {"name": "nothing", "type": {"type": "array", "items": "null"}},
    ]}
    shape = ("struct", "+s", [
        ("grid", False, ("list", "+l", False, ("list", "+l", True, ("i64", "l")))),
        ("index", True, ("map", "+m", False, ("list", "+l", False, ("var", "z")))),
        ("nothing", False, ("list", "+l", True, ("null", "n"))),
    ])
    op = ("record", [
        ("field", 0, ("array", ("array", LONG))),
        ("field", 1, ("map", ("array", STRING))),  # string read as binary
        ("field", 2, ("array", NULL)),
    ])
    rows = [
        {"grid": [[1, 2], [], [3]], "index": {"k": ["a", "b"], "": []}, "nothing": [None, None]},
        {"grid": [], "index": {}, "nothing": []},
    ]
    column = run(shape, op, [framed(1, schema, r) for r in rows])
    assert column.to_pylist() == [
        {"grid": [[1, 2], [], [3]], "index": [("k", [b"a", b"b"]), ("", [])],
         "nothing": [None, None]},
        {"grid": [], "index": [], "nothing": []},
    ]


def test_enum_fixed_decimal_and_temporal_columns() -> None:
    money = {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}
    big = {"type": "fixed", "name": "Big", "size": 20, "logicalType": "decimal",
           "precision": 40, "scale": 2}
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "state", "type": {"type": "enum", "name": "S", "symbols": ["NEW", "OLD", "GONE"]}},
        {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 3}},
        {"name": "amount", "type": money},
        {"name": "big", "type": big},
        {"name": "day", "type": "int"},
        {"name": "clock", "type": "int"},
        {"name": "at", "type": "long"},
        {"name": "micros", "type": "long"},
    ]}
    shape = ("struct", "+s", [
        ("state", False, ("var", "u")),
        ("code", False, ("fixed", "w:3", 3)),
        ("amount", False, ("decimal", "d:9,2", 16)),
        ("big", False, ("decimal", "d:40,2,256", 32)),
        ("day", False, ("i32", "tdD")),
        ("clock", False, ("i32", "ttm")),
        ("at", False, ("i64", "tsm:UTC")),
        ("micros", False, ("i64", "tsu:")),
    ])
    op = ("record", [
        # The reader renamed OLD to OLDER; GONE is not among its symbols.
        ("field", 0, ("enum", ["NEW", "OLDER", None], ["NEW", "OLD", "GONE"])),
        ("field", 1, ("fixed", 3)),
        ("field", 2, ("decimal_bytes",)),
        ("field", 3, ("decimal_fixed", 20)),
        ("field", 4, INT), ("field", 5, INT), ("field", 6, LONG), ("field", 7, LONG),
    ])
    row = {"state": "OLD", "code": b"abc", "amount": decimal.Decimal("-1234567.89"),
           "big": decimal.Decimal("-" + "9" * 38 + ".99"), "day": 19000,
           "clock": 3_600_000, "at": 1_700_000_000_123, "micros": -1}
    column = run(shape, op, [framed(1, schema, row)])
    epoch = datetime.datetime(1970, 1, 1)
    assert column.to_pylist() == [{
        "state": "OLDER", "code": b"abc", "amount": decimal.Decimal("-1234567.89"),
        "big": decimal.Decimal("-" + "9" * 38 + ".99"),
        "day": datetime.date(1970, 1, 1) + datetime.timedelta(days=19000),
        "clock": datetime.time(1, 0),
        "at": (epoch + datetime.timedelta(milliseconds=1_700_000_000_123)).replace(
            tzinfo=datetime.UTC),
        "micros": epoch - datetime.timedelta(microseconds=1),
    }]
    gone = framed(1, schema, {**row, "state": "GONE"})
    assert status(shape, op, gone) == (0, 2, "writer symbol 'GONE' is not in the reader's enum")


def test_decimals_that_do_not_fit_fail_the_row() -> None:
    shape = ("decimal", "d:4,0", 16)
    assert status(shape, ("decimal_bytes",), b"\0\0\0\0\1" + b"\x04\x27\x0f") == (1, 0, "")  # 9999
    assert status(shape, ("decimal_bytes",), b"\0\0\0\0\1" + b"\x04\x27\x10")[1:] == (
        2, "decimal 10000 exceeds precision 4")
    # 17 bytes whose first is only a sign extension fit 16; a 17th significant byte does not.
    assert status(shape, ("decimal_fixed", 17), b"\0\0\0\0\1" + b"\xff" * 17) == (1, 0, "")
    assert status(shape, ("decimal_fixed", 17), b"\0\0\0\0\1" + b"\x00\x80" + b"\0" * 15)[1:] == (
        2, "decimal of 17 bytes does not fit 16 bytes")


def test_promotions() -> None:
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": "int"}, {"name": "c", "type": "long"},
        {"name": "d", "type": "float"}, {"name": "e", "type": "bytes"},
        {"name": "f", "type": "string"}, {"name": "g", "type": "long"}]}
    shape = ("struct", "+s", [
        ("a", False, ("i64", "l")), ("b", False, ("f64", "g")), ("c", False, ("f32", "f")),
        ("d", False, ("f64", "g")), ("e", False, ("var", "u")), ("f", False, ("var", "z")),
        ("g", False, ("f64", "g"))])
    op = ("record", [("field", 0, INT), ("field", 1, INT), ("field", 2, LONG),
                     ("field", 3, FLOAT), ("field", 4, ("bytes",)), ("field", 5, STRING),
                     ("field", 6, LONG)])
    row = {"a": -7, "b": 3, "c": 16, "d": 1.5, "e": "ü".encode(), "f": "ü", "g": 2**53}
    column = run(shape, op, [framed(1, schema, row)])
    assert column.to_pylist() == [{"a": -7, "b": 3.0, "c": 16.0, "d": 1.5, "e": "ü",
                                   "f": "ü".encode(), "g": float(2**53)}]
    bad = framed(1, schema, {**row, "e": b"\xff"})
    assert status(shape, op, bad)[1:] == (2, "string at byte 12 is not UTF-8")


def test_defaults_and_skipped_writer_fields() -> None:
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "gone1", "type": {"type": "array", "items": {"type": "record", "name": "G",
                                                             "fields": [{"name": "x", "type": "string"}]}}},
        {"name": "keep", "type": "string"},
        {"name": "gone2", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "gone3", "type": {"type": "fixed", "name": "F", "size": 4}},
        {"name": "gone4", "type": {"type": "enum", "name": "E", "symbols": ["P", "Q"]}},
        {"name": "gone5", "type": ["null", "boolean", "float", "bytes"]},
    ]}
    shape = ("struct", "+s", [
        ("keep", False, ("var", "u")),
        ("added", False, ("i64", "l")),
        ("maybe", True, ("var", "u")),
    ])
    op = ("record", [
        ("skip", ("array", ("record", [("field", 7, STRING)]))),
        ("field", 0, STRING),
        ("skip", ("map", ("union", [NULL, DOUBLE]))),
        ("skip", ("fixed", 4)),
        ("skip", ("enum", ["P", "Q"], ["P", "Q"])),
        ("skip", ("union", [NULL, BOOL, FLOAT, ("bytes",)])),
        ("default", 1, b"\x0e", LONG),  # 7
        ("default", 2, b"", NULL),
    ])
    rows = [
        {"gone1": [{"x": "a"}, {"x": "bc"}], "keep": "k", "gone2": {"m": 1.0, "n": None},
         "gone3": b"1234", "gone4": "Q", "gone5": b"zz"},
        {"gone1": [], "keep": "", "gone2": {}, "gone3": b"\0" * 4, "gone4": "P", "gone5": 2.5},
    ]
    column = run(shape, op, [framed(1, writer, r) for r in rows])
    assert column.to_pylist() == [
        {"keep": "k", "added": 7, "maybe": None}, {"keep": "", "added": 7, "maybe": None}]


def test_null_type_column() -> None:
    column = run(("null", "n"), NULL, [framed(1, "null", None), None])
    assert column.type == pa.null()
    assert column.to_pylist() == [None, None]


def rollback_values() -> list[Any]:
    good = [framed(1, WIDE_SCHEMA, r) for r in WIDE_ROWS]
    cut = good[0][: len(good[0]) - 6]  # ends inside the map, after the list was appended
    return [good[0], cut, good[1]]


def test_a_failed_row_leaves_nothing_behind() -> None:
    shape = _native.AvroShape(WIDE_SHAPE)
    plans = {1: _native.AvroPlan(WIDE_OP, shape)}
    builder = _native.AvroArrowBuilder(shape)
    values = rollback_values()
    done, code, message = builder.decode(values, 0, 3, plans)
    assert (done, code) == (1, 2)
    assert "runs past the end" in message
    assert len(builder) == 1
    assert builder.decode(values, 2, 3, plans) == (1, 0, "")
    column = pa.array(builder.finish())
    column.validate(full=True)
    assert column.to_pylist() == [wide_expected(r) for r in WIDE_ROWS]
    # The builder is empty and reusable after finish().
    assert builder.decode(values, 0, 1, plans) == (1, 0, "")
    assert pa.array(builder.finish()).to_pylist() == [wide_expected(WIDE_ROWS[0])]


def test_rollback_of_a_row_failing_after_a_null_row() -> None:
    shape = _native.AvroShape(WIDE_SHAPE)
    plans = {1: _native.AvroPlan(WIDE_OP, shape)}
    builder = _native.AvroArrowBuilder(shape)
    good = framed(1, WIDE_SCHEMA, WIDE_ROWS[1])
    for cut in range(5, len(good) + 1):
        values = [None, good[:cut] + (b"\0" if cut == len(good) else b"")]
        assert builder.decode(values, 0, 2, plans)[:2] == (1, 2)
    column = pa.array(builder.finish())
    column.validate(full=True)
    assert column.to_pylist() == [None] * (len(good) - 4)


def test_unknown_schema_id_stops_before_the_value() -> None:
    shape = _native.AvroShape(("i64", "l"))
    builder = _native.AvroArrowBuilder(shape)
    plans = {1: _native.AvroPlan(LONG, shape)}
    values = [b"\0\0\0\0\1\2", None, b"\0\0\0\1\0\2", b"\0\0\0\0\1\4"]
    assert builder.decode(values, 0, 4, plans) == (2, 1, "256")
    plans[256] = _native.AvroPlan(INT, shape)
    assert builder.decode(values, 2, 4, plans) == (2, 0, "")
    assert pa.array(builder.finish()).to_pylist() == [1, None, 1, 2]


@pytest.mark.parametrize(("shape", "op", "payload", "message"), [
    (("i64", "l"), LONG, b"", "varint at byte 5 runs past the end"),
    (("i64", "l"), LONG, b"\x80" * 11, "varint at byte 5 is longer than 10 bytes"),
    (("i64", "l"), LONG, b"\2\0\0\0", "3 bytes left over after the value"),
    (("i32", "i"), INT, b"\x80\x80\x80\x80\x10", "int 2147483648 out of range"),
    (("var", "u"), ("enum", ["A"], ["A"]), b"\2", "enum index 1 out of range (1 symbols)"),
    (("i64", "l"), ("union", [NULL, LONG]), b"\6", "union branch 3 out of range (2 branches)"),
    (("i64", "l"), ("union", [("fail", "the reader has no int"), LONG]), b"\0",
     "the reader has no int"),
    (("var", "z"), ("bytes",), b"\3", "bytes at byte 5 has length -2"),
    (("var", "z"), ("bytes",), b"\4a", "bytes at byte 6 runs past the end"),
    (("list", "+l", False, ("i64", "l")), ("array", LONG), b"\x80\x10",
     "block of 1024 items at byte 5 does not fit the 0 bytes left"),
    (("list", "+l", False, ("i64", "l")), ("array", LONG), b"\1\1", "block at byte 5 has byte size -1"),
    (("list", "+l", True, ("null", "n")), ("array", NULL), b"\xfe\xff\xff\xff\x0f\0",
     "too many items for the value's 6 bytes"),
])
def test_undecodable_values(shape: Any, op: Any, payload: bytes, message: str) -> None:
    assert status(shape, op, b"\0\0\0\0\1" + payload) == (0, 2, message)


def test_framing_errors() -> None:
    assert status(("i64", "l"), LONG, b"\0\0\1") == (0, 2, "value too short: 3 bytes")
    assert status(("i64", "l"), LONG, b"\7\0\0\0\1\2") == (0, 2, "unknown magic byte 7")


def test_argument_errors() -> None:
    shape = _native.AvroShape(("i64", "l"))
    builder = _native.AvroArrowBuilder(shape)
    plans = {1: _native.AvroPlan(LONG, shape)}
    with pytest.raises(TypeError):
        builder.decode([b"\0\0\0\0\1\2", "text"], 0, 2, plans)
    with pytest.raises(ValueError, match="not a range of the 1 values"):
        builder.decode([None], 0, 2, plans)
    with pytest.raises(ValueError, match="not a range of the 1 values"):
        builder.decode([None], 1, 0, plans)
    with pytest.raises(ValueError, match="must not be negative"):
        builder.decode([None], -1, 1, plans)
    other = _native.AvroShape(("i32", "i"))
    with pytest.raises(ValueError, match="another shape"):
        builder.decode([b"\0\0\0\0\2\2"], 0, 1, {2: _native.AvroPlan(INT, other)})


@pytest.mark.parametrize(("shape", "op", "message"), [
    (("i64", "l"), STRING, "op string cannot write into value, a nullable i64"),
    (("i32", "i"), LONG, "op long cannot write into value, a nullable i32"),
    (("struct", "+s", [("a", False, ("i64", "l"))]), ("record", [("field", 0, NULL)]),
     "op null cannot write into value.a, a non-nullable i64"),
    (("struct", "+s", [("a", False, ("i64", "l"))]), ("record", []),
     "value.a is filled 0 times by the record op, not once"),
    (("struct", "+s", [("a", False, ("i64", "l"))]),
     ("record", [("field", 0, LONG), ("default", 0, b"\0", LONG)]),
     "value.a is filled 2 times by the record op, not once"),
    (("struct", "+s", []), ("record", [("field", 1, LONG)]), "value has 0 fields, no field 1"),
    (("fixed", "w:4", 4), ("fixed", 3), "op fixed cannot write into value"),
    (("list", "+l", False, ("i64", "l")), ("array", DOUBLE), "value.item, a non-nullable i64"),
])
def test_plans_that_do_not_fit_their_shape(shape: Any, op: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        _native.AvroPlan(op, _native.AvroShape(shape))


@pytest.mark.parametrize(("shape", "message"), [
    (("i64", "i"), 'unknown shape kind "i64" with format "i"'),
    (("decimal", "d:10,2", 32), 'decimal of 32 bytes with format "d:10,2"'),
    (("fixed", "w:3", 4), 'fixed of 4 bytes with format "w:3"'),
    (("nope", "n"), 'unknown shape kind "nope"'),
    (("list", "+m", True, ("null", "n")), 'unknown shape kind "list" with format "\\+m"'),
])
def test_bad_shapes(shape: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _native.AvroShape(shape)


MIXED_SCHEMA = {"type": "record", "name": "M", "fields": [
    {"name": "parts", "type": {"type": "array", "items": ["null", {
        "type": "record", "name": "P", "fields": [
            {"name": "code", "type": {"type": "fixed", "name": "C", "size": 2}},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y", "Z"]}}]}]}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 1}},
    {"name": "blanks", "type": {"type": "array", "items": "null"}},
    {"name": "gone", "type": {"type": "map", "values": "bytes"}},
]}
MIXED_SHAPE = ("struct", "+s", [
    ("parts", True, ("list", "+l", True, ("struct", "+s", [
        ("code", False, ("fixed", "w:2", 2)), ("e", True, ("var", "u"))]))),
    ("amount", False, ("decimal", "d:5,1", 16)),
    ("blanks", False, ("list", "+l", True, ("null", "n"))),
    ("extra", False, ("var", "z")),
])
MIXED_OP = ("record", [
    ("field", 0, ("array", ("union", [NULL, ("record", [
        ("field", 0, ("fixed", 2)), ("field", 1, ("enum", ["X", None, "Z"], ["X", "Y", "Z"]))])]))),
    ("field", 1, ("decimal_bytes",)),
    ("field", 2, ("array", NULL)),
    ("skip", ("map", ("bytes",))),
    ("default", 3, b"\x04hi", ("bytes",)),
])
MIXED_ROW = {"parts": [None, {"code": b"ab", "e": "Z"}], "amount": decimal.Decimal("-12.5"),
             "blanks": [None] * 3, "gone": {"k": b"v"}}
MIXED_EXPECTED = {"parts": [None, {"code": b"ab", "e": "Z"}], "amount": decimal.Decimal("-12.5"),
                  "blanks": [None] * 3, "extra": b"hi"}


def test_a_mixed_record() -> None:
    column = run(MIXED_SHAPE, MIXED_OP, [framed(1, MIXED_SCHEMA, MIXED_ROW)])
    assert column.to_pylist() == [MIXED_EXPECTED]


FUZZ_CASES = {
    "wide": (WIDE_SHAPE, WIDE_OP, framed(1, WIDE_SCHEMA, WIDE_ROWS[0]), wide_expected(WIDE_ROWS[0])),
    "mixed": (MIXED_SHAPE, MIXED_OP, framed(1, MIXED_SCHEMA, MIXED_ROW), MIXED_EXPECTED),
}


@pytest.mark.parametrize("case", sorted(FUZZ_CASES))
@settings(max_examples=300, deadline=None)
@given(payloads=st.lists(st.binary(max_size=60), max_size=8))
def test_random_payloads_only_ever_give_a_status(case: str, payloads: list[bytes]) -> None:
    shape_tuple, op, good, expected = FUZZ_CASES[case]
    shape = _native.AvroShape(shape_tuple)
    plans = {1: _native.AvroPlan(op, shape)}
    builder = _native.AvroArrowBuilder(shape)
    # Random payloads, and good values' prefixes, each followed by a good value.
    cuts = [b"\0\0\0\0\1" + p for p in payloads] + [good[: 5 + len(p) % (len(good) - 5)] for p in payloads]
    values = [v for cut in cuts for v in (cut, good)]
    start = 0
    while start < len(values):
        done, code, _ = builder.decode(values, start, len(values), plans)
        assert code in (0, 2)
        start += done + (code != 0)
    column = pa.array(builder.finish())
    column.validate(full=True)
    assert column.to_pylist().count(expected) >= len(cuts)
