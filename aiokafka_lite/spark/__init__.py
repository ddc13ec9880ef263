"""PySpark data source for Spark 4: ``format("aiokafka_lite")``, batch and streaming.

    from aiokafka_lite.spark import register
    register(spark)
    df = (spark.read.format("aiokafka_lite")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders")
          .load())

Options and columns are those of Spark's own Kafka source; see docs/spark.md. Needs
``pip install '.[spark]'`` in the aiokafka-lite clone (pyspark >= 4.0 and pyarrow).
"""

from __future__ import annotations

from .options import SourceOptions, parse_options
from .source import FORMAT_NAME, KafkaBatchReader, KafkaDataSource, KafkaStreamReader, register

__all__ = ["FORMAT_NAME", "KafkaBatchReader", "KafkaDataSource", "KafkaStreamReader", "SourceOptions",
           "parse_options", "register"]
