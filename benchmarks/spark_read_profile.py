"""What one Spark task of the aiokafka_lite source costs in Python, measured in-process without Spark.

    python benchmarks/spark_read_profile.py                  # starts Apache Kafka 4.3.1, 2,000,000 x 100 B

Fills a topic as ``spark_compare.py`` does (4 partitions) and reads partition 0's whole range, as one
Spark task of that benchmark does: ``source._read`` (poll_arrow, the slice at the end, the cast to
Spark's schema), then the same batches written as an Arrow IPC stream to a null sink, which is what
Spark's Python worker does with them before the JVM sees them. Each stage's records/s, then a
cProfile of ``_read`` (top functions by own time).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from typing import Any

from spark_compare import fill_topic  # type: ignore[import-not-found, unused-ignore]

from aiokafka_lite.protocol import native
from aiokafka_lite.spark import rows
from aiokafka_lite.structs import TopicPartition


def spark_schema(include_headers: bool) -> Any:
    from pyspark.sql.types import BinaryType

    return rows.spark_schema(include_headers, BinaryType())  # the source's own columns, value as bytes


def timed(label: str, run: Any) -> list[Any]:
    began = time.perf_counter()
    batches = list(run())
    seconds = time.perf_counter() - began
    rows = sum(b.num_rows for b in batches)
    print(f"  {label:34} {seconds:6.2f} s  {rows / seconds:12,.0f} records/s  ({len(batches)} batches)",
          flush=True)
    return batches


def ipc_write(batches: list[Any]) -> list[Any]:
    import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
    with pa.ipc.new_stream(pa.BufferOutputStream(), batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return batches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="an existing broker (default: start Apache Kafka 4.3.1 here)")
    parser.add_argument("--records", type=int, default=2_000_000, help="records in the topic (4 partitions)")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)

    from aiokafka_lite.spark.kafka_io import DriverLookups, read_range
    from aiokafka_lite.spark.offsets import OffsetRange
    from aiokafka_lite.spark.options import parse_options
    from aiokafka_lite.spark.source import KafkaRangePartition, _read
    broker = None
    if args.bootstrap is None:
        from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker
        broker = ApacheKafkaBroker("4.3.1").start()
    bootstrap = args.bootstrap if broker is None else broker.bootstrap_servers
    try:
        topic = fill_topic(bootstrap, args.records, args.size)
        options = parse_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False)
        tp = TopicPartition(topic, 0)
        with DriverLookups(options) as lookups:
            start, end = lookups.beginning([tp])[tp], lookups.end([tp])[tp]
        schema = spark_schema(options.include_headers)
        partition = KafkaRangePartition(OffsetRange(topic, 0, start, end))
        print(f"partition 0: offsets {start}..{end}, decoder {native.decoder()}, headers "
              f"{options.include_headers}", flush=True)
        timed("_read (warm-up)", lambda: _read(options, schema, partition))
        timed("poll_arrow + slice (read_range)", lambda: read_range(options, tp, start, end))
        spark_batches = timed("_read (+ cast to Spark's schema)", lambda: _read(options, schema, partition))
        timed("Arrow IPC write of those batches", lambda: ipc_write(spark_batches))
        profile = cProfile.Profile()
        profile.enable()
        timed("_read under cProfile", lambda: _read(options, schema, partition))
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
    finally:
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
