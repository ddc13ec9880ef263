"""avro_arrow.py: an Avro schema's Arrow type, checked by decoding values with fastavro (as the
AvroDeserializer does) into that type; and poll_arrow()'s rules for typed values (arrow.py)."""

from __future__ import annotations

import datetime
import decimal
import io
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from aiokafka_lite import arrow
from aiokafka_lite.errors import InvalidArgumentError
from aiokafka_lite.schema_registry.avro_arrow import arrow_type

ORDER = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "price", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "paid", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "blob", "type": "bytes"},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "DONE"]}},
        {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 2}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
        {"name": "ship_to", "type": {"type": "record", "name": "Address",
                                     "fields": [{"name": "city", "type": "string"}]}},
        {"name": "bill_to", "type": ["null", "Address"], "default": None},  # a reference by name
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "clock", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    ],
}

ADDRESS = pa.struct([pa.field("city", pa.utf8(), nullable=False)])
EXPECTED = pa.struct([
    pa.field("id", pa.int64(), nullable=False), pa.field("qty", pa.int32(), nullable=False),
    pa.field("price", pa.float64(), nullable=False), pa.field("ratio", pa.float32(), nullable=False),
    pa.field("paid", pa.bool_(), nullable=False), pa.field("note", pa.utf8()),
    pa.field("blob", pa.binary(), nullable=False), pa.field("state", pa.utf8(), nullable=False),
    pa.field("code", pa.binary(2), nullable=False),
    pa.field("tags", pa.list_(pa.field("item", pa.utf8(), nullable=False)), nullable=False),
    pa.field("attrs", pa.map_(pa.utf8(), pa.field("value", pa.int64())), nullable=False),
    pa.field("ship_to", ADDRESS, nullable=False), pa.field("bill_to", ADDRESS),
    pa.field("day", pa.date32(), nullable=False), pa.field("at", pa.timestamp("ms", tz="UTC"), nullable=False),
    pa.field("local", pa.timestamp("us"), nullable=False), pa.field("clock", pa.time32("ms"), nullable=False),
    pa.field("amount", pa.decimal128(9, 2), nullable=False),
])


def value(i: int) -> dict[str, Any]:
    return {"id": i, "qty": i % 7, "price": i / 4, "ratio": 0.5, "paid": i % 2 == 0,
            "note": None if i % 3 else f"n{i}", "blob": bytes([i % 256]), "state": "DONE" if i % 2 else "NEW",
            "code": b"ab", "tags": [f"t{i}"] * (i % 3), "attrs": {"k": i, "gone": None},
            "ship_to": {"city": "Lyon"}, "bill_to": None if i % 2 else {"city": "Nice"},
            "day": datetime.date(2026, 11, 29), "at": datetime.datetime(2026, 11, 29, 1, 2, 3, tzinfo=datetime.UTC),
            "local": datetime.datetime(2026, 11, 29, 1, 2, 3, 456789), "clock": datetime.time(1, 2, 3),
            "amount": decimal.Decimal("12.34")}


def decoded(schema: dict[str, Any], values: list[dict[str, Any]]) -> list[Any]:
    """The values as the AvroDeserializer hands them out: written, then read back by fastavro."""
    parsed = fastavro.parse_schema(schema)
    out = []
    for v in values:
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, v)
        buffer.seek(0)
        out.append(fastavro.schemaless_reader(buffer, parsed, None))
    return out


def test_every_type_maps_and_the_decoded_values_fit_it() -> None:
    typed = arrow_type(pa, ORDER)
    assert typed == EXPECTED
    values = decoded(ORDER, [value(i) for i in range(5)])
    column = pa.array(values, type=typed)
    assert column.type == EXPECTED
    assert column.to_pylist()[1]["attrs"] == [("k", 1), ("gone", None)]
    assert [row["id"] for row in column.to_pylist()] == list(range(5))
    assert column.to_pylist()[0]["bill_to"] == {"city": "Nice"}


def test_a_union_of_two_types_has_no_column_type_and_says_where() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "either", "type": ["int", "string"]}]}
    with pytest.raises(InvalidArgumentError, match=r"field 'either' of the schema: the union \['int', 'string'\]"):
        arrow_type(pa, schema)
    uuid = {"type": "string", "logicalType": "uuid"}
    uuids = {"type": "record", "name": "R", "fields": [{"name": "u", "type": uuid}]}
    with pytest.raises(InvalidArgumentError, match="read it as a string in the reader schema"):
        arrow_type(pa, uuids)
    with pytest.raises(InvalidArgumentError, match="unknown Avro type name 'Nowhere'"):
        arrow_type(pa, {"type": "record", "name": "R", "fields": [{"name": "x", "type": "Nowhere"}]})


class Typed:
    def __init__(self, typed: Any) -> None:
        self.typed = typed

    def __call__(self, data: bytes | None) -> Any:
        return data

    def arrow_type(self, pyarrow: Any) -> Any:
        return self.typed


def test_poll_arrow_takes_only_deserializers_that_give_their_arrow_type() -> None:
    assert arrow.decoded_value_type(None, None) is None
    assert arrow.decoded_value_type(None, Typed(EXPECTED)) == EXPECTED
    with pytest.raises(InvalidArgumentError, match="raw bytes, or values typed by a deserializer"):
        arrow.decoded_value_type(None, bytes.decode)
    with pytest.raises(InvalidArgumentError, match="raw bytes, or values typed"):
        arrow.decoded_value_type(bytes.decode, Typed(EXPECTED))
    with pytest.raises(InvalidArgumentError, match="reader_schema: give it one"):
        arrow.decoded_value_type(None, Typed(None))
