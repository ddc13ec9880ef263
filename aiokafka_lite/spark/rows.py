"""The output schema of Spark's Kafka source, and ``poll_arrow()`` batches converted to it.

Handing Spark ``pyarrow.RecordBatch`` objects (rather than one tuple per row) skips its per-row
type checks; the batch schema must equal the one Spark derives from the DDL, so it is built with
pyspark's own converter. The conversion works on whole columns: no per-record Python objects.
"""

from __future__ import annotations

from typing import Any

BASE_COLUMNS = ("key binary, value binary, topic string, partition int, offset long, "
                "timestamp timestamp, timestampType int")
HEADERS_COLUMN = "headers array<struct<key:string,value:binary>>"


def schema_ddl(include_headers: bool) -> str:
    """The DDL of the output columns (headers last, as in Spark's source with includeHeaders)."""
    return f"{BASE_COLUMNS}, {HEADERS_COLUMN}" if include_headers else BASE_COLUMNS


def spark_schema(include_headers: bool, value_type: Any) -> Any:
    """The output columns as a StructType, ``value`` of ``value_type`` (a Spark DataType): the
    columns of ``schema_ddl``, built in Python since a DDL string can be parsed only by the JVM."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [StructField("key", BinaryType()), StructField("value", value_type), StructField("topic", StringType()),
              StructField("partition", IntegerType()), StructField("offset", LongType()),
              StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType())]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def arrow_schema(spark_schema: Any) -> Any:
    """The Arrow schema Spark expects for ``spark_schema`` (a StructType)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    try:
        return to_arrow_schema(spark_schema, timezone="UTC")
    except TypeError:  # pyspark < 4.1 has no timezone parameter; its timestamps are UTC already
        return to_arrow_schema(spark_schema)


def to_spark_batch(batch: Any, schema: Any) -> Any:
    """``batch`` (a ``pyarrow.RecordBatch`` of ``poll_arrow()``) in the columns of ``schema``, in its order.

    Columns are picked by name (headers only if ``schema`` has them); a column whose type differs is
    cast: Kafka's millisecond timestamps become Spark's microseconds, and the headers' list item and
    struct fields take Spark's names and nullability. Other columns are passed on without a copy.
    """
    import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]

    arrays = [_as_type(batch.column(field.name), field.type) for field in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _as_type(column: Any, target: Any) -> Any:
    return column if column.type.equals(target) else column.cast(target)
