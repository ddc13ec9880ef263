"""poll_arrow() batches for the Spark source: cut at the range's end, converted to Spark's schema.

Runs with both batch builders (native and pyarrow); no broker, no SparkSession.
"""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite.arrow import build_arrow_batch
from aiokafka_lite.protocol.records.columns import RecordColumns

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from pyspark.sql.types import (  # noqa: E402 - after the skips
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from aiokafka_lite.spark.kafka_io import before  # noqa: E402
from aiokafka_lite.spark.rows import arrow_schema, to_spark_batch  # noqa: E402

pytestmark = pytest.mark.usefixtures("record_decoder")

HEADERS = StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                       StructField("value", BinaryType())])))
BASE = [StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
        StructField("partition", IntegerType()), StructField("offset", LongType()),
        StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType())]
OFFSETS = [5, 6, 9, 10, 14]  # gaps, as after transaction markers or compaction


def _batch(offsets: list[int] = OFFSETS) -> Any:
    headers = [((("trace", b"t%d" % o), ("empty", None)) if o % 2 else ()) for o in offsets]
    columns = RecordColumns("orders", 2, offsets, [1_700_000_000_000 + o for o in offsets], 1,
                            [None if o % 3 == 0 else b"k%d" % o for o in offsets],
                            [b"v%d" % o for o in offsets], headers, 0)
    return build_arrow_batch([columns]).to_pyarrow()


@pytest.mark.parametrize(("end", "kept"), [(0, 0), (5, 0), (6, 1), (7, 2), (9, 2), (10, 3), (14, 4), (15, 5),
                                           (99, 5)])
def test_before_keeps_the_offsets_below_end(end: int, kept: int) -> None:
    batch = _batch()
    cut = before(batch, end)
    assert cut.column("offset").to_pylist() == OFFSETS[:kept]
    if kept == len(OFFSETS):
        assert cut is batch


def test_before_an_empty_batch_is_that_batch() -> None:
    empty = _batch([])
    assert before(empty, 10) is empty


@pytest.mark.parametrize("with_headers", [True, False])
def test_spark_batch_has_sparks_schema_and_the_values(with_headers: bool) -> None:
    schema = arrow_schema(StructType([*BASE, HEADERS] if with_headers else BASE))
    converted = to_spark_batch(before(_batch(), 14), schema)
    assert converted.schema.equals(schema)
    rows = converted.to_pylist()
    assert [r["offset"] for r in rows] == OFFSETS[:4]
    first, second = rows[0], rows[1]
    assert (first["key"], first["value"], first["topic"], first["partition"]) == (b"k5", b"v5", "orders", 2)
    assert (first["timestampType"], rows[2]["key"]) == (1, None)  # offset 9
    micros = converted.column("timestamp").cast(pa.int64()).to_pylist()
    assert micros == [(1_700_000_000_000 + o) * 1000 for o in OFFSETS[:4]]
    if with_headers:
        assert first["headers"] == [{"key": "trace", "value": b"t5"}, {"key": "empty", "value": None}]
        assert second["headers"] == []
    else:
        assert "headers" not in converted.schema.names


def test_spark_batch_follows_the_schema_order() -> None:
    schema = arrow_schema(StructType([StructField("offset", LongType()), StructField("value", BinaryType())]))
    converted = to_spark_batch(_batch(), schema)
    assert converted.schema.names == ["offset", "value"]
    assert converted.column("value").to_pylist() == [b"v%d" % o for o in OFFSETS]


def test_uncast_columns_are_not_copied() -> None:
    batch = _batch()
    converted = to_spark_batch(batch, arrow_schema(StructType(BASE)))
    assert converted.column("value").buffers()[2].address == batch.column("value").buffers()[2].address
