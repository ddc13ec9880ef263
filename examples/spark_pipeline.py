"""Kafka topic -> parse JSON -> 10-second windowed sums -> Parquet, with the aiokafka_lite data source.

    python examples/spark_pipeline.py 127.0.0.1:9092 orders /tmp/orders-out --once
    python examples/spark_pipeline.py 127.0.0.1:9092 orders /tmp/orders-out --produce-sample 5000 --once

Each record's value is JSON like ``{"user": "u3", "amount": 12.5}``; the event time is the Kafka
record timestamp. The query sums ``amount`` per user over 10-second tumbling windows and appends
each window to Parquet once the watermark (10 s) has passed it, so the newest windows are written
by a later run. ``--once`` processes what is in the topic now and stops (``availableNow``); without
it the query runs until Ctrl-C. The checkpoint (``OUT/_checkpoint`` unless ``--checkpoint``) makes a
rerun continue exactly where the last one stopped.

Needs ``pip install '.[spark]'`` in the aiokafka-lite clone and Java 17; ``--produce-sample`` also needs
the ``testing`` extra (it writes sample records with confluent-kafka).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import Any

VALUE_SCHEMA = "user STRING, amount DOUBLE"
WINDOW = "10 seconds"


def build_query(spark: Any, bootstrap: str, topic: str, out: str, checkpoint: str, once: bool) -> Any:
    from pyspark.sql import functions as F

    records = (spark.readStream.format("aiokafka_lite")
               .option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", topic)
               .option("startingOffsets", "earliest")
               .option("maxOffsetsPerTrigger", "100000")
               .load())
    orders = (records
              .select(F.from_json(F.col("value").cast("string"), VALUE_SCHEMA).alias("order"), "timestamp")
              .select("order.*", "timestamp")
              .where(F.col("user").isNotNull()))          # values that are not JSON parse to nulls
    sums = (orders
            .withWatermark("timestamp", WINDOW)
            .groupBy(F.window("timestamp", WINDOW), "user")
            .agg(F.round(F.sum("amount"), 2).alias("total"), F.count("*").alias("orders"))
            .select(F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"),
                    "user", "total", "orders"))
    writer = (sums.writeStream.format("parquet").outputMode("append")
              .option("path", out).option("checkpointLocation", checkpoint))
    writer = writer.trigger(availableNow=True) if once else writer.trigger(processingTime="5 seconds")
    return writer.start()


def produce_sample(bootstrap: str, topic: str, count: int) -> None:
    """``count`` orders spread over the last two minutes, so several windows close."""
    from aiokafka_lite.testing.helpers import create_topic, produce
    try:
        create_topic(bootstrap, topic, partitions=3)
    except Exception as exc:  # an existing topic is fine
        if "exist" not in str(exc).lower():
            raise
    now_ms = int(time.time() * 1000)
    rng = random.Random(7)
    records = [{"value": json.dumps({"user": f"u{rng.randrange(5)}", "amount": round(rng.uniform(1, 100), 2)}),
                "timestamp": now_ms - 120_000 + i * 120_000 // count} for i in range(count)]
    produce(bootstrap, topic, records)
    print(f"produced {count} sample orders to {topic}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap", help="Kafka bootstrap servers, e.g. 127.0.0.1:9092")
    parser.add_argument("topic")
    parser.add_argument("out", help="Parquet output directory")
    parser.add_argument("--checkpoint", help="checkpoint directory (default: OUT/_checkpoint)")
    parser.add_argument("--once", action="store_true", help="process what is there now, then stop")
    parser.add_argument("--produce-sample", type=int, metavar="N", help="first write N sample orders")
    args = parser.parse_args(argv)

    if args.produce_sample:
        produce_sample(args.bootstrap, args.topic, args.produce_sample)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from aiokafka_lite.spark import register
    spark = (SparkSession.builder.master("local[2]").appName("aiokafka-lite-pipeline")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    checkpoint = args.checkpoint or os.path.join(args.out, "_checkpoint")
    query = build_query(spark, args.bootstrap, args.topic, args.out, checkpoint, args.once)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    windows = spark.read.parquet(args.out) if os.path.exists(args.out) else None
    if windows is not None and windows.columns:
        print(f"{windows.count()} (window, user) sums in {args.out}; the first ones:")
        windows.orderBy("window_start", "user").show(10, truncate=False)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
