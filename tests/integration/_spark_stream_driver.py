"""A Spark driver in a process of its own, for the test that kills one with SIGKILL mid-query.

    python _spark_stream_driver.py MASTER BOOTSTRAP TOPIC OUT CHECKPOINT MODE
      MODE stream: a streaming query (maxOffsetsPerTrigger=500, a trigger every 200 ms) from the
                   topic to Parquet files in OUT, until killed
      MODE finish: the same query with Trigger.AvailableNow, restarted from CHECKPOINT, to its end
"""

from __future__ import annotations

import json
import sys

from benchmarks.spark_compare import spark_session


def main(master: str, bootstrap: str, topic: str, out: str, checkpoint: str, mode: str) -> None:
    spark = spark_session(2, [], master, driver_memory="512m")  # Spark's own Kafka source is not needed
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
