"""The ``aiokafka_lite`` data source: Spark 4's Python Data Source API over this package's consumer.

The driver resolves offsets and plans one Spark partition per Kafka partition range (or several,
with ``minPartitions`` / ``maxRecordsPerPartition``); each executor task reads its range with a
manually assigned, group-less consumer. A streaming query's offsets are
``{"topic": {"partition": offset}}`` dicts that Spark writes to its checkpoint, so a restarted query
resumes exactly where the last committed micro-batch ended.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from ..errors import ConfigError
from ..structs import TopicPartition
from .kafka_io import DataLossError, DriverLookups, read_range
from .offsets import (
    JsonOffsets,
    OffsetRange,
    cap,
    check_batch_bounds,
    from_json,
    plan_ranges,
    split_ranges,
    to_json,
)
from .options import EARLIEST, SourceOptions, parse_options
from .rows import arrow_schema, schema_ddl, spark_schema, to_spark_batch
from .value_format import BINARY, value_spark_type
from .worker_python import check_spark

try:  # Spark >= 4.2: admission control (maxOffsetsPerTrigger) and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
    HAS_ADMISSION_CONTROL = True
except ImportError:  # pragma: no cover - older Spark
    HAS_ADMISSION_CONTROL = False
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

FORMAT_NAME = "aiokafka_lite"


class KafkaRangePartition(InputPartition):
    """One Spark task's work: an offset range of one Kafka partition."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.range = offset_range


class KafkaDataSource(DataSource):
    """``spark.read.format("aiokafka_lite")`` / ``spark.readStream.format("aiokafka_lite")``."""

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        parse_options(self.options, streaming=None)  # fail at load() on a bad option, not in a task

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType | str:
        options = parse_options(self.options, streaming=None)
        if options.value_format.name == BINARY:  # Spark's Kafka source's columns, as before
            return schema_ddl(options.include_headers)
        typed: StructType = spark_schema(options.include_headers, value_spark_type(options.value_format))
        return typed

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(parse_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_options(self.options, streaming=True)
        limits = {"maxOffsetsPerTrigger": options.max_offsets_per_trigger,
                  "minOffsetsPerTrigger": options.min_offsets_per_trigger}
        for option, value in limits.items():
            if value is not None and not HAS_ADMISSION_CONTROL:
                raise ConfigError(f"option {option} needs Spark 4.2 or later (admission control for Python "
                                  "data sources)")
        return KafkaStreamReader(options, schema)


def _tasks(options: SourceOptions, ranges: list[OffsetRange],
           beginning: Callable[[list[TopicPartition]], dict[TopicPartition, int]]) -> list[InputPartition]:
    """One Spark partition per range, after the ranges are split as the options ask (``beginning``
    looks up the log start of partitions that appeared since the start: a split needs numbers)."""
    if options.min_partitions is not None or options.max_records_per_partition is not None:
        new = [r.tp for r in ranges if r.start == EARLIEST]
        starts = beginning(new) if new else {}
        ranges = [OffsetRange(r.topic, r.partition, starts[r.tp], r.end) if r.start == EARLIEST else r
                  for r in ranges]
        ranges = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    return [KafkaRangePartition(r) for r in ranges]


def _read(options: SourceOptions, schema: StructType, partition: InputPartition) -> Iterator[Any]:
    """Arrow batches of one range; the placeholder partition Spark adds to an empty plan reads nothing."""
    if not isinstance(partition, KafkaRangePartition):
        return
    target = arrow_schema(schema)
    r = partition.range
    for batch in read_range(options, r.tp, r.start, r.end):
        yield to_spark_batch(batch, target)


class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self._options = options
        self._schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        with DriverLookups(self._options) as lookups:
            tps = lookups.partitions()
            start = lookups.resolve(tps, self._options.starting)
            end = lookups.resolve(tps, self._options.ending)
            check_batch_bounds(start, end, self._options.starting.option, self._options.ending.option)
            return _tasks(self._options, plan_ranges(start, end), lookups.beginning)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self._options, self._schema, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are checkpointed by Spark; ``commit`` has nothing to do (no group, no broker state)."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self._options = options
        self._schema = schema
        self._lookups: DriverLookups | None = None  # opened on first use: the reader is pickled first
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow's end point
        self._last_batch = -math.inf  # monotonic time of the last trigger that ran a batch

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_lookups": None}

    def _driver(self) -> DriverLookups:
        if self._lookups is None:
            self._lookups = DriverLookups(self._options)
        return self._lookups

    def initialOffset(self) -> JsonOffsets:
        lookups = self._driver()
        return to_json(lookups.resolve(lookups.partitions(), self._options.starting))

    def latestOffset(self, start: JsonOffsets | None = None, limit: Any = None) -> JsonOffsets:
        available = self._available()
        if start is None:  # Spark < 4.2 calls latestOffset() without admission control
            return to_json(available)
        begin = from_json(start)
        begin.update(self._driver().beginning([tp for tp in available if tp not in begin]))
        end = self._checked(begin, available)
        if self._delayed(begin, end):
            return to_json(from_json(start))  # the start again: no batch this trigger
        max_rows = limit.max_rows if HAS_ADMISSION_CONTROL and isinstance(limit, ReadMaxRows) else None
        if max_rows is not None:
            end = cap(begin, end, max_rows)
        # Partitions that vanished keep their offset; new ones appear from their log start.
        return to_json({**begin, **end})

    def _delayed(self, begin: dict[TopicPartition, int], end: dict[TopicPartition, int]) -> bool:
        """minOffsetsPerTrigger: skip triggers while fewer offsets wait, until maxTriggerDelay has passed
        since the last batch (as Spark's source does). Never under Trigger.AvailableNow, which must
        reach its end rather than wait for records that may never come."""
        minimum = self._options.min_offsets_per_trigger
        if minimum is None or self._target is not None:
            return False
        now = time.monotonic()
        waiting = sum(max(end[tp] - begin.get(tp, end[tp]), 0) for tp in end)
        if waiting < minimum and now - self._last_batch < self._options.max_trigger_delay:
            return True
        self._last_batch = now
        return False

    def _available(self) -> dict[TopicPartition, int]:
        if self._target is not None:
            return dict(self._target)
        lookups = self._driver()
        return lookups.end(lookups.partitions())

    def _checked(self, begin: dict[TopicPartition, int], available: dict[TopicPartition, int]
                 ) -> dict[TopicPartition, int]:
        """End offsets never behind the start, unless the log really went backwards."""
        behind = sorted(tp for tp, end in available.items() if end < begin[tp])
        if behind and self._options.fail_on_data_loss:
            lost = ", ".join(f"{tp.topic}-{tp.partition} ({begin[tp]} -> {available[tp]})" for tp in behind)
            raise DataLossError(f"offsets went backwards for {lost}: records may have been lost; set "
                                "failOnDataLoss=false to continue from the new end")
        return available

    def getDefaultReadLimit(self) -> Any:
        if self._options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        lookups = self._driver()
        self._target = lookups.end(lookups.partitions())

    def reportLatestOffset(self) -> JsonOffsets | None:
        lookups = self._driver()
        return to_json(lookups.end(lookups.partitions()))

    def partitions(self, start: JsonOffsets, end: JsonOffsets) -> Sequence[InputPartition]:
        return _tasks(self._options, plan_ranges(from_json(start), from_json(end)),
                      lambda tps: self._driver().beginning(tps))

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self._options, self._schema, partition)

    def commit(self, end: JsonOffsets) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in a consumer group."""

    def stop(self) -> None:
        if self._lookups is not None:
            self._lookups.close()
            self._lookups = None


def register(spark: Any) -> None:
    """Make ``format("aiokafka_lite")`` available in ``spark`` (a SparkSession). On a local Spark whose
    Python workers cannot import this package (``PYSPARK_PYTHON`` unset and ``python3`` on PATH another
    Python), raises ``ConfigError`` naming that Python and the fix (``worker_python``)."""
    check_spark(spark)
    spark.dataSource.register(KafkaDataSource)
