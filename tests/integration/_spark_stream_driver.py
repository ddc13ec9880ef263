"""A Spark driver in a process of its own, for the test that kills one with SIGKILL mid-query.

    python _spark_stream_driver.py MASTER BOOTSTRAP TOPIC OUT CHECKPOINT MODE
      MODE stream: a streaming query (maxOffsetsPerTrigger=500, a trigger every 200 ms) from the
                   topic to Parquet files in OUT, until killed
      MODE finish: the same query with Trigger.AvailableNow, restarted from CHECKPOINT, to its end
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession

from aiokafka_lite.spark import register


def main(master: str, bootstrap: str, topic: str, out: str, checkpoint: str, mode: str) -> None:
    # Spark's Python workers (the driver's and the executors') run this interpreter, which has the package.
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master(master).appName(f"aiokafka-lite-stream-{mode}")
             .config("spark.driver.memory", "512m").config("spark.executor.memory", "1g")
             .config("spark.executor.cores", "1").config("spark.cores.max", "2")
             .config("spark.pyspark.python", sys.executable).config("spark.ui.enabled", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    writer = (spark.readStream.format("aiokafka_lite").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "500").load()
              .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
              .writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint))
    if mode == "stream":
        query = writer.trigger(processingTime="200 milliseconds").start()
        print("started", flush=True)
        query.awaitTermination()  # until SIGKILL
    else:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        print(json.dumps({"finished": query.exception() is None}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:7])
