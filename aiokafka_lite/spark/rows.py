"""The output schema of Spark's Kafka source, and records turned into Arrow batches for it.

Handing Spark ``pyarrow.RecordBatch`` objects (rather than one tuple per row) skips its per-row
type checks; the batch schema must equal the one Spark derives from the DDL, so it is built with
pyspark's own converter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..structs import ConsumerRecord

BASE_COLUMNS = ("key binary, value binary, topic string, partition int, offset long, "
                "timestamp timestamp, timestampType int")
HEADERS_COLUMN = "headers array<struct<key:string,value:binary>>"


def schema_ddl(include_headers: bool) -> str:
    """The DDL of the output columns (headers last, as in Spark's source with includeHeaders)."""
    return f"{BASE_COLUMNS}, {HEADERS_COLUMN}" if include_headers else BASE_COLUMNS


def arrow_schema(spark_schema: Any) -> Any:
    """The Arrow schema Spark expects for ``spark_schema`` (a StructType)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    try:
        return to_arrow_schema(spark_schema, timezone="UTC")
    except TypeError:  # pyspark < 4.1 has no timezone parameter; its timestamps are UTC already
        return to_arrow_schema(spark_schema)


def to_record_batch(records: Sequence[ConsumerRecord], schema: Any) -> Any:
    """One ``pyarrow.RecordBatch`` holding ``records`` in the columns of ``schema``."""
    import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]

    columns: dict[str, list[Any]] = {
        "key": [r.key for r in records],
        "value": [r.value for r in records],
        "topic": [r.topic for r in records],
        "partition": [r.partition for r in records],
        "offset": [r.offset for r in records],
        # Kafka timestamps are milliseconds; Spark's are microseconds since the epoch.
        "timestamp": [r.timestamp * 1000 for r in records],
        "timestampType": [r.timestamp_type for r in records],
    }
    if "headers" in schema.names:
        columns["headers"] = [[{"key": k, "value": v} for k, v in r.headers] for r in records]
    arrays = [pa.array(columns[f.name], type=f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
