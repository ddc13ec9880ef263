"""The PySpark data source (``format("aiokafka_lite")``) on a local Spark against Apache Kafka.

One SparkSession for the module (local[2], small memory, no UI). Pure parts (options, offsets,
rate limiting) are checked without Spark.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.errors import ConfigError
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce

HAS_PYSPARK = importlib.util.find_spec("pyspark") is not None and importlib.util.find_spec("pyarrow") is not None
needs_spark = pytest.mark.skipif(not HAS_PYSPARK, reason="pyspark/pyarrow not installed: "
                                 "pip install '.[spark]' in the aiokafka-lite clone")

FORMAT = "aiokafka_lite"


# --- pure parts: options, checkpoint offsets, rate limiting -------------------------------------------

def _parse(**options: str) -> Any:
    from aiokafka_lite.spark.options import parse_options
    return parse_options({"kafka.bootstrap.servers": "127.0.0.1:9092", **options}, streaming=False)


@pytest.mark.parametrize(("options", "named"), [
    ({}, "subscribe, subscribePattern, assign"),
    ({"subscribe": "a", "assign": '{"a": [0]}'}, "exactly one"),
    ({"subscribe": "a", "startingOffsets": "soonest"}, "startingOffsets"),
    ({"subscribe": "a", "startingOffsets": "latest"}, "startingOffsets"),
    ({"subscribe": "a", "endingOffsets": '{"a": {"0": "x"}}'}, "endingOffsets"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets"),
    ({"assign": '{"a": "0"}'}, "assign"),
    ({"subscribePattern": "(", }, "subscribePattern"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "-3"}, "maxOffsetsPerTrigger"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"subscribe": "a", "startingOfsets": "earliest"}, "did you mean startingOffsets"),
    ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be a positive integer"),
    ({"subscribe": "a", "maxTriggerDelay": "soon"}, "maxTriggerDelay must be a duration"),
    ({"subscribe": "a", "fetchOffset.numRetries": "-1"}, "fetchOffset.numRetries must be a non-negative integer"),
    ({"subscribe": "a", "startingTimestamp": "yesterday"}, "startingTimestamp must be a timestamp"),
    ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "earliest"}, "'error' or 'latest'"),
    ({"subscribe": "a", "endingOffsetsByTimestamp": '{"a": {"0": -1}}'}, "endingOffsetsByTimestamp"),
    ({"subscribe": "a", "kafka.group.id": "g"}, "kafka.group.id"),
    ({"subscribe": "a", "kafka.max.poll.records": "0"}, r"max\.poll\.records=0"),  # as the user spelled it
])
def test_invalid_options_name_the_option(options, named):
    with pytest.raises(ConfigError, match=named):
        _parse(**options)


def test_options_are_case_insensitive_and_parsed():
    from aiokafka_lite.spark.options import EARLIEST, LATEST
    parsed = _parse(SUBSCRIBE="a, b", startingoffsets='{"a": {"0": 5, "1": -2}}',
                    **{"kafka.isolation.level": "read_committed"})
    assert parsed.subscription.topics == ("a", "b")
    assert parsed.starting.per_partition == {TopicPartition("a", 0): 5, TopicPartition("a", 1): EARLIEST}
    assert parsed.ending.default == LATEST
    assert parsed.consumer_settings()["isolation.level"] == "read_committed"
    assert parsed.consumer_settings()["auto.offset.reset"] == "none"
    with pytest.raises(ConfigError, match="a-2"):
        parsed.starting.for_partitions([TopicPartition("a", p) for p in range(3)])


# valueFormat=avro (issue 42): the reader schema of the integration test's values (V2 of
# test_schema_registry_peers: id, note, qty with a default), as the option's JSON text.
READER_SCHEMA = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "qty", "type": "int", "default": 1}]})
REGISTRY = "http://127.0.0.1:8081"


@pytest.mark.parametrize(("options", "named"), [
    ({"valueFormat": "protobuf"}, "valueFormat must be 'binary' or 'avro'"),
    ({"valueFormat": "avro", "valueAvroSchema": READER_SCHEMA}, "schemaRegistryUrl is required"),
    ({"valueFormat": "avro", "schemaRegistryUrl": REGISTRY}, "valueAvroSchema is required"),
    ({"valueFormat": "avro", "schemaRegistryUrl": " ", "valueAvroSchema": READER_SCHEMA},
     "schemaRegistryUrl is required"),
    ({"valueFormat": "avro", "schemaRegistryUrl": "ftp://127.0.0.1:8081", "valueAvroSchema": READER_SCHEMA},
     "schemaRegistryUrl must be an http"),
    ({"valueFormat": "avro", "schemaRegistryUrl": "http://127.0.0.1:99999", "valueAvroSchema": READER_SCHEMA},
     "schemaRegistryUrl 'http://127.0.0.1:99999'"),
    ({"valueFormat": "avro", "schemaRegistryUrl": REGISTRY, "valueAvroSchema": "{'type': 'int'}"},
     "valueAvroSchema is not valid JSON"),
    ({"valueFormat": "avro", "schemaRegistryUrl": REGISTRY, "valueAvroSchema": '{"type": "record", "fields": []}'},
     "valueAvroSchema is not a valid Avro schema"),
    ({"valueFormat": "avro", "schemaRegistryUrl": REGISTRY, "valueAvroSchema": '"no_such_type"'},
     "valueAvroSchema is not a valid Avro schema"),
    ({"valueFormat": "avro", "schemaRegistryUrl": REGISTRY, "valueAvroSchema": '["int", "string"]'},
     "valueAvroSchema has no column type: .*union"),
    ({"valueFormat": "avro", "schemaRegistryUrl": REGISTRY,
      "valueAvroSchema": '{"type": "string", "logicalType": "uuid"}'}, "valueAvroSchema has no column type: .*uuid"),
    ({"valueFormat": "avro", "schemaRegistryUrl": REGISTRY,
      "valueAvroSchema": '{"type": "int", "logicalType": "time-millis"}'}, "valueAvroSchema: .*no Spark type"),
    ({"valueFormat": "avro", "schemaRegistryUrl": REGISTRY,
      "valueAvroSchema": '{"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}'},
     "valueAvroSchema: a decimal of precision 40 has no Spark type"),
    ({"schemaRegistryUrl": REGISTRY}, "schemaRegistryUrl is for valueFormat=avro only"),
    ({"valueFormat": "binary", "valueAvroSchema": READER_SCHEMA}, "valueAvroSchema is for valueFormat=avro only"),
])
def test_invalid_value_format_options_name_the_option(options, named):
    with pytest.raises(ConfigError, match=named):
        _parse(subscribe="a", **options)


def test_value_format_options_are_case_insensitive_and_give_the_value_column_its_type():
    from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

    from aiokafka_lite.spark.rows import schema_ddl, spark_schema
    from aiokafka_lite.spark.value_format import value_spark_type
    assert _parse(subscribe="a").value_format.name == "binary"
    assert _parse(subscribe="a", VALUEFORMAT="Binary").value_format.name == "binary"
    parsed = _parse(subscribe="a", valueformat="AVRO", SCHEMAREGISTRYURL=REGISTRY + "/", valueavroschema=READER_SCHEMA)
    fmt = parsed.value_format
    assert (fmt.name, fmt.registry_url, fmt.reader_schema) == ("avro", REGISTRY + "/", READER_SCHEMA)
    assert value_spark_type(fmt) == StructType([
        StructField("id", LongType(), False), StructField("note", StringType(), True),
        StructField("qty", IntegerType(), False)])
    assert value_spark_type(_parse(subscribe="a").value_format) == BinaryType()
    for headers in (True, False):  # the Python-built columns are the DDL's, value aside
        built = spark_schema(headers, BinaryType()).simpleString()
        assert built == f"struct<{schema_ddl(headers).replace(' long', ' bigint')}>".replace(", ", ",").replace(
            " ", ":")


def test_avro_typed_batches_are_cast_to_the_arrow_schema_spark_expects():
    """Every Arrow type avro_arrow gives that Spark holds, in a poll_arrow()-shaped batch, cast by
    to_spark_batch into the schema Spark derives from the source's (no Spark session: the types only)."""
    import datetime
    import decimal

    import pyarrow as pa

    from aiokafka_lite.spark.rows import arrow_schema, spark_schema, to_spark_batch
    from aiokafka_lite.spark.value_format import value_spark_type
    logical = {"ts": ("long", "timestamp-millis"), "lts": ("long", "local-timestamp-micros"), "d": ("int", "date"),
               "t": ("long", "time-micros")}
    fields = [{"name": name, "type": {"type": kind, "logicalType": lt}} for name, (kind, lt) in logical.items()]
    fields += [{"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
               {"name": "m", "type": {"type": "map", "values": "long"}},
               {"name": "a", "type": {"type": "array", "items": ["null", "string"]}},
               {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
               {"name": "f", "type": {"type": "fixed", "name": "F", "size": 4}}, {"name": "b", "type": "boolean"}]
    fmt = _parse(subscribe="a", valueFormat="avro", schemaRegistryUrl=REGISTRY,
                 valueAvroSchema=json.dumps({"type": "record", "name": "All", "fields": fields})).value_format
    target = arrow_schema(spark_schema(False, value_spark_type(fmt)))
    value = {"ts": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), "lts": datetime.datetime(2026, 1, 1, 1, 2, 3, 4),
             "d": datetime.date(2026, 1, 2), "t": datetime.time(1, 2, 3, 4), "dec": decimal.Decimal("1.25"),
             "m": {"x": 1}, "a": ["s", None], "e": "B", "f": b"abcd", "b": True}
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"k", None]), pa.array([value, None], type=fmt.arrow_type()), pa.array(["t", "t"]),
         pa.array([0, 0], pa.int32()), pa.array([0, 1], pa.int64()), pa.array([0, 1], pa.timestamp("ms")),
         pa.array([0, 0], pa.int32())],
        names=["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"])
    out = to_spark_batch(batch, target)
    assert out.schema == target
    got = out.column("value").to_pylist()
    assert got[1] is None  # a tombstone stays null
    assert {**got[0], "m": dict(got[0]["m"])} == value


def test_checkpoint_offsets_are_canonical_json():
    from aiokafka_lite.spark.offsets import from_json, to_json
    offsets = {TopicPartition("b", 10): 1, TopicPartition("a", 2): 7, TopicPartition("b", 9): 3}
    as_json = to_json(offsets)
    assert json.dumps(as_json) == '{"a": {"2": 7}, "b": {"9": 3, "10": 1}}'
    assert from_json(json.loads(json.dumps(as_json))) == offsets


def test_rate_limit_is_proportional_and_exact():
    from aiokafka_lite.spark.offsets import cap
    t0, t1, t2 = (TopicPartition("t", p) for p in range(3))
    start = {t0: 0, t1: 100, t2: 50}
    latest = {t0: 600, t1: 400, t2: 50}  # backlogs 600, 300, 0
    assert cap(start, latest, 90) == {t0: 60, t1: 130, t2: 50}
    assert cap(start, latest, 10_000) == latest
    tiny = cap(start, latest, 1)  # a limit below the partition count still moves forward
    assert sum(tiny[tp] - start[tp] for tp in latest) == 1
    odd = cap({t0: 0, t1: 0, t2: 0}, {t0: 10, t1: 10, t2: 10}, 20)
    assert sum(odd.values()) == 20
    assert all(6 <= v <= 7 for v in odd.values())


# --- Spark against a real broker ------------------------------------------------------------------------

def _spark_kafka_jars() -> tuple[str | None, list[str]]:
    """Spark's own Kafka source, the version benchmarks/spark_compare.py picks; none without Maven."""
    from benchmarks.spark_compare import spark_kafka_jars
    try:
        return spark_kafka_jars(say=lambda line: None)
    except (SystemExit, OSError, subprocess.SubprocessError) as exc:
        return f"unavailable: {exc}", []


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    if not HAS_PYSPARK:
        pytest.skip("pyspark/pyarrow not installed: pip install '.[spark]' in the aiokafka-lite clone")
    from benchmarks.spark_compare import spark_session
    kafka_source, jars = _spark_kafka_jars()
    session = spark_session(2, jars, driver_memory="768m")
    session.conf.set("aiokafka_lite.tests.spark_kafka", kafka_source if jars else "")
    yield session
    session.stop()


@pytest.fixture
def spark_kafka_source(spark: Any) -> str:
    """The version of Spark's own Kafka source loaded in ``spark`` (skips when it could not be fetched)."""
    version = spark.conf.get("aiokafka_lite.tests.spark_kafka")
    if not version:
        pytest.skip(f"Spark's Kafka source (spark-sql-kafka-0-10) is not loaded: {_spark_kafka_jars()[0]}")
    return str(version)


@pytest.fixture(scope="module")
def bootstrap(apache_kafka_broker: Any) -> str:
    return str(apache_kafka_broker.bootstrap_servers)


def _records(prefix: str, count: int, partitions: int) -> list[dict[str, Any]]:
    # Recent timestamps: the broker's retention would delete records stamped long ago.
    base = int(time.time() * 1000) - 60_000
    return [{"key": None if i % 7 == 0 else f"{prefix}-k{i}", "value": f"{prefix}-v{i}",
             "partition": i % partitions, "timestamp": base + i,
             "headers": [("n", str(i).encode()), ("empty", None)] if i % 3 == 0 else []}
            for i in range(count)]


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format(FORMAT).option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


@needs_spark
def test_batch_read_returns_every_record_with_its_columns(spark, bootstrap, unique_topic):
    create_topic(bootstrap, unique_topic, partitions=3)
    sent = _records("b", 90, 3)
    produce(bootstrap, unique_topic, sent)
    df = _read(spark, bootstrap, subscribe=unique_topic)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"),
        ("offset", "bigint"), ("timestamp", "timestamp"), ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>")]
    rows = df.collect()
    assert len(rows) == 90
    by_value = {bytes(r.value).decode(): r for r in rows}
    for i, record in enumerate(sent):
        row = by_value[record["value"]]
        assert row.key == (None if record["key"] is None else record["key"].encode())
        assert (row.topic, row.partition, row.timestampType) == (unique_topic, i % 3, 0)
        assert row.offset == i // 3
        assert int(row.timestamp.timestamp() * 1000) == record["timestamp"]
        assert [(h.key, h.value) for h in row.headers] == record["headers"]


@needs_spark
def test_batch_read_honours_json_offsets_and_assign(spark, bootstrap, unique_topic):
    create_topic(bootstrap, unique_topic, partitions=3)
    produce(bootstrap, unique_topic, _records("o", 30, 3))  # ten records per partition
    starting = json.dumps({unique_topic: {"0": 2, "1": -2, "2": 9}})
    ending = json.dumps({unique_topic: {"0": 5, "1": 3, "2": -1}})
    rows = _read(spark, bootstrap, subscribe=unique_topic, startingOffsets=starting,
                 endingOffsets=ending).select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, 2), (0, 3), (0, 4), (1, 0), (1, 1), (1, 2), (2, 9)]
    assigned = _read(spark, bootstrap, assign=json.dumps({unique_topic: [1]}), endingOffsets="latest")
    assert sorted(r.offset for r in assigned.select("offset").collect()) == list(range(10))
    assert assigned.where("partition != 1").count() == 0


@needs_spark
def test_bad_option_fails_at_load_naming_it(spark, bootstrap):
    with pytest.raises(Exception, match="startingOffsets"):
        _read(spark, bootstrap, subscribe="x", startingOffsets="yesterday").collect()


@needs_spark
def test_avro_values_read_as_a_struct_column_as_docs_spark_md_shows(spark, bootstrap, schema_registry, unique_topic,
                                                                      capsys):
    """Values written by confluent-kafka's AvroSerializer (v1 and v2 schemas in turn) read with
    valueFormat=avro and the v2 reader schema: one struct column holding both, v1's values with
    qty's default. The read is docs/spark.md's block as written (run-by), addresses and topic replaced."""
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    from ._doc_blocks import DOC_ADDRESS, blocks_run_by
    from .test_schema_registry_poll import avro_records

    records, expected = avro_records(schema_registry.url, unique_topic, 40, 2)
    create_topic(bootstrap, unique_topic, partitions=2)
    produce(bootstrap, unique_topic, records)
    [block] = blocks_run_by("docs/spark.md", "tests/integration/test_spark.py")
    code = (block.replace(DOC_ADDRESS, bootstrap).replace("http://127.0.0.1:8081", schema_registry.url)
            .replace('"orders"', json.dumps(unique_topic)))
    scope: dict[str, Any] = {"spark": spark}
    exec(compile(code, "docs/spark.md", "exec"), scope)
    assert json.loads(scope["reader_schema"]) == json.loads(READER_SCHEMA)
    df = scope["df"]
    value = df.schema["value"]
    assert value.dataType == StructType([StructField("id", LongType(), False), StructField("note", StringType(), True),
                                         StructField("qty", IntegerType(), False)])
    assert value.nullable
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                  "timestampType", "headers"]
    rows = df.collect()
    assert sorted((r.value.asDict() for r in rows), key=lambda v: v["id"]) == expected
    assert sorted((r.partition, r.offset) for r in rows) == sorted((i % 2, i // 2) for i in range(40))
    assert all(isinstance(r.key, bytearray | bytes) for r in rows)  # keys stay bytes
    shown = capsys.readouterr().out
    assert "|-- value: struct (nullable = true)" in shown
    with pytest.raises(Exception, match="schemaRegistryUrl"):  # a bad combination fails at load
        _read(spark, bootstrap, subscribe=unique_topic, valueFormat="avro", valueAvroSchema=READER_SCHEMA).collect()


def _stream_to_parquet(spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path) -> None:
    query = (spark.readStream.format(FORMAT)
             .option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic)
             .option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "25")
             .load()
             .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
             .writeStream.format("parquet")
             .option("path", str(out))
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True)
             .start())
    try:
        assert query.awaitTermination(timeout=90), "the availableNow query did not finish in 90 s"
    finally:
        query.stop()
    assert query.exception() is None


@needs_spark
def test_streaming_restart_from_checkpoint_reads_exactly_the_new_records(spark, bootstrap, unique_topic,
                                                                         tmp_path):
    create_topic(bootstrap, unique_topic, partitions=3)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    produce(bootstrap, unique_topic, _records("s1", 60, 3))
    _stream_to_parquet(spark, bootstrap, unique_topic, out, checkpoint)
    first = spark.read.parquet(str(out)).collect()
    assert len(first) == 60
    batches = len(list((checkpoint / "commits").iterdir()))
    assert batches >= 3, "maxOffsetsPerTrigger=25 should split 60 records into at least 3 micro-batches"

    produce(bootstrap, unique_topic, _records("s2", 45, 3))
    _stream_to_parquet(spark, bootstrap, unique_topic, out, checkpoint)  # a new query, same checkpoint
    rows = spark.read.parquet(str(out)).collect()
    seen = [(r.partition, r.offset) for r in rows]
    assert len(seen) == len(set(seen)) == 105, "a restarted query must neither lose nor repeat records"
    for partition in range(3):
        offsets = sorted(o for p, o in seen if p == partition)
        assert offsets == list(range(35)), f"gap in partition {partition}"
    new_values = {r.value for r in rows} - {r.value for r in first}
    assert new_values == {f"s2-v{i}" for i in range(45)}


# --- a topic that does not exist: as Spark's own Kafka source -----------------------------------------

def _missing(option: str, topic: str) -> str:
    return {"subscribe": topic, "assign": json.dumps({topic: [0]}), "subscribePattern": f"{topic}.*"}[option]


def _outcome(spark: Any, source: str, bootstrap: str, option: str, value: str, streaming: bool,
             where: Path) -> tuple[str, str]:
    """("error", text) or ("rows", count) of one read of ``source``, batch or availableNow stream."""
    try:
        reader = spark.readStream if streaming else spark.read
        df = (reader.format(source).option("kafka.bootstrap.servers", bootstrap).option(option, value)
              .option("startingOffsets", "earliest").load())
        if not streaming:
            return "rows", str(df.count())
        query = (df.writeStream.format("parquet").option("path", str(where / "out"))
                 .option("checkpointLocation", str(where / "checkpoint")).trigger(availableNow=True).start())
        try:
            assert query.awaitTermination(timeout=90), "the availableNow query did not finish in 90 s"
        finally:
            query.stop()
        written = list((where / "out").glob("*.parquet"))
        return "rows", str(spark.read.parquet(*map(str, written)).count() if written else 0)
    except Exception as exc:  # Py4J and Spark's own errors: only their text matters here
        return "error", str(exc)


@needs_spark
@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "stream"])
@pytest.mark.parametrize("option", ["subscribe", "assign", "subscribePattern"])
def test_a_missing_topic_is_met_as_sparks_kafka_source_meets_it(spark, spark_kafka_source, bootstrap,
                                                                 unique_topic, option, streaming, tmp_path):
    theirs = _outcome(spark, "kafka", bootstrap, option, _missing(option, unique_topic + "-k"), streaming,
                      tmp_path / "kafka")
    ours = _outcome(spark, FORMAT, bootstrap, option, _missing(option, unique_topic + "-a"), streaming,
                    tmp_path / "ours")
    if option == "subscribePattern":  # a pattern may match nothing yet: no rows, no error
        assert theirs == ours == ("rows", "0")
        return
    assert theirs[0] == "error", theirs
    assert "UnknownTopicOrPartitionException" in theirs[1], theirs[1][:3000]
    assert ours[0] == "error", ours
    said = f"UnknownTopicError: topic '{unique_topic}-a' does not exist on {bootstrap} ({option}="
    assert said in ours[1], ours[1][:3000]


@needs_spark
def test_driver_names_what_is_missing_logs_an_empty_pattern_once_and_creates_no_topic(bootstrap, unique_topic,
                                                                                      caplog):
    from aiokafka_lite.spark.kafka_io import DriverLookups, UnknownTopicError
    from aiokafka_lite.spark.options import parse_options

    def lookups(**options: str) -> DriverLookups:
        return DriverLookups(parse_options({"kafka.bootstrap.servers": bootstrap, **options}, streaming=False))

    create_topic(bootstrap, unique_topic, partitions=2)
    absent = unique_topic + "-absent"
    with lookups(subscribe=f"{unique_topic},{absent}") as driver, \
            pytest.raises(UnknownTopicError, match=f"topic '{absent}' does not exist on {bootstrap} "):
        driver.partitions()
    with lookups(assign=json.dumps({unique_topic: [1, 2, 3]})) as driver, \
            pytest.raises(UnknownTopicError, match=f"partitions '{unique_topic}-2', '{unique_topic}-3' do not"):
        driver.partitions()
    with lookups(assign=json.dumps({unique_topic: [1]})) as driver:
        assert driver.partitions() == [TopicPartition(unique_topic, 1)]
    with caplog.at_level(logging.WARNING, logger="aiokafka_lite.spark"), \
            lookups(subscribePattern=f"{absent}.*") as driver:
        assert driver.partitions() == []
        assert driver.partitions() == []  # a streaming query asks on every trigger: said once
    assert [r.getMessage() for r in caplog.records if r.name == "aiokafka_lite.spark"] == [
        f"subscribePattern '{absent}.*' matches no topic on {bootstrap}: the read returns no rows"]
    with lookups(subscribePattern=f"{unique_topic}|{absent}") as driver:  # asking created nothing
        assert driver.partitions() == [TopicPartition(unique_topic, p) for p in range(2)]


# --- Spark's read options, side by side with Spark's own Kafka source --------------------------------

ROW_COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp")


def _rows_of(spark: Any, source: str, bootstrap: str, options: dict[str, str]) -> tuple[str, Any]:
    """("rows", sorted row tuples, number of Spark partitions) or ("error", text) of one batch read."""
    try:
        reader = spark.read.format(source).option("kafka.bootstrap.servers", bootstrap)
        for name, value in options.items():
            reader = reader.option(name, value)
        df = reader.load().select(*ROW_COLUMNS)
        rows = sorted(tuple(r) for r in df.collect())
        return "rows", (rows, df.rdd.getNumPartitions())
    except Exception as exc:  # Py4J and Spark's own errors: only their text matters here
        return "error", str(exc)


def _timestamp_cases(topic: str, base: int) -> dict[str, dict[str, str]]:
    """Options with timestamps of the records _records() stamps (record i at base + i, partition i % 3)."""
    past_end = str(base + 10_000)
    return {
        "startingTimestamp": {"startingTimestamp": str(base + 40)},
        "startingOffsetsByTimestamp": {"startingOffsetsByTimestamp": json.dumps(
            {topic: {"0": base + 10, "1": base + 50, "2": base + 89}})},
        "endingTimestamp": {"endingTimestamp": str(base + 61)},
        "endingOffsetsByTimestamp": {"startingOffsets": "earliest", "endingOffsetsByTimestamp": json.dumps(
            {topic: {"0": base + 30, "1": base + 1, "2": base + 10_000}})},
        "both-ends": {"startingTimestamp": str(base + 20), "endingTimestamp": str(base + 70)},
        "start-past-end-latest": {"startingTimestamp": past_end, "startingOffsetsByTimestampStrategy": "latest"},
        "start-past-end-error": {"startingTimestamp": past_end},
        "end-past-end": {"endingTimestamp": past_end},
    }


@needs_spark
def test_timestamp_options_return_the_rows_sparks_source_returns(spark, spark_kafka_source, bootstrap,
                                                                  unique_topic):
    create_topic(bootstrap, unique_topic, partitions=3)
    sent = _records("t", 90, 3)
    produce(bootstrap, unique_topic, sent, enable_idempotence=True)
    for case, options in _timestamp_cases(unique_topic, sent[0]["timestamp"]).items():
        options = {"subscribe": unique_topic, **options}
        theirs = _rows_of(spark, "kafka", bootstrap, options)
        ours = _rows_of(spark, FORMAT, bootstrap, options)
        if case == "start-past-end-error":
            assert theirs[0] == ours[0] == "error", (theirs, ours)
            assert "startingOffsetsByTimestampStrategy=latest" in ours[1], ours[1][:3000]
            continue
        assert theirs[0] == ours[0] == "rows", (case, theirs, ours)
        assert ours[1][0] == theirs[1][0], case
        if case == "startingTimestamp":
            assert len(ours[1][0]) == 50, "records 40..89"
        if case == "start-past-end-latest":
            assert ours[1][0] == []
        if case == "end-past-end":
            assert len(ours[1][0]) == 90


@needs_spark
def test_min_partitions_and_max_records_split_one_partition_as_sparks_source_does(spark, spark_kafka_source,
                                                                                  bootstrap, unique_topic):
    create_topic(bootstrap, unique_topic, partitions=1)
    produce(bootstrap, unique_topic, [(None, f"v{i}") for i in range(2000)], enable_idempotence=True)
    whole = _rows_of(spark, FORMAT, bootstrap, {"subscribe": unique_topic})
    assert whole[0] == "rows", whole
    assert whole[1][1] == 1
    for options, tasks in [({"minPartitions": "4"}, 4), ({"maxRecordsPerPartition": "300"}, 7),
                           ({"minPartitions": "2", "startingOffsets": json.dumps({unique_topic: {"0": 1999}})}, 1)]:
        options = {"subscribe": unique_topic, **options}
        ours = _rows_of(spark, FORMAT, bootstrap, options)
        theirs = _rows_of(spark, "kafka", bootstrap, options)
        assert ours[0] == theirs[0] == "rows", (options, ours, theirs)
        assert ours[1][1] == tasks, options
        assert ours[1][0] == theirs[1][0], options
        # Spark's source plans as many tasks, but for maxRecordsPerPartition, which its guide lists for
        # batch reads too and which spark-sql-kafka-0-10 4.2.0 ignores in them (one task here).
        assert theirs[1][1] == (1 if "maxRecordsPerPartition" in options else tasks), options
    assert _rows_of(spark, FORMAT, bootstrap, {"subscribe": unique_topic, "minPartitions": "4"})[1][0] == whole[1][0]


def _parquet_rows(spark: Any, out: Path) -> int:
    """Rows in the files the streaming sink committed (reading the directory goes by its log; a file
    being written is not one of them)."""
    if not out.is_dir():
        return 0
    return int(spark.read.schema("partition INT, offset BIGINT").parquet(str(out)).count())


@needs_spark
def test_min_offsets_per_trigger_waits_for_enough_records_or_the_trigger_delay(spark, bootstrap, unique_topic,
                                                                               tmp_path):
    create_topic(bootstrap, unique_topic, partitions=2)
    produce(bootstrap, unique_topic, _records("m1", 10, 2), enable_idempotence=True)
    out = tmp_path / "out"
    query = (spark.readStream.format(FORMAT).option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", unique_topic).option("startingOffsets", "earliest")
             .option("minOffsetsPerTrigger", "50").option("maxTriggerDelay", "10s")
             .load().select("partition", "offset")
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="500 milliseconds").start())
    try:
        deadline = time.monotonic() + 60
        while _parquet_rows(spark, out) < 10 and time.monotonic() < deadline:  # the first trigger runs
            time.sleep(0.2)
        assert _parquet_rows(spark, out) == 10
        first_batch_at = time.monotonic()
        produce(bootstrap, unique_topic, _records("m2", 20, 2))  # 20 < 50: no batch yet
        time.sleep(3)
        assert _parquet_rows(spark, out) == 10, "a batch ran with fewer than minOffsetsPerTrigger records"
        produce(bootstrap, unique_topic, _records("m3", 40, 2))  # 60 waiting: the next trigger runs
        while _parquet_rows(spark, out) < 70 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _parquet_rows(spark, out) == 70
        assert time.monotonic() - first_batch_at < 10, "the batch waited for the delay, not for the records"
        produce(bootstrap, unique_topic, _records("m4", 5, 2))  # too few, until maxTriggerDelay passes
        enough_at = time.monotonic()
        while _parquet_rows(spark, out) < 75 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _parquet_rows(spark, out) == 75
        assert time.monotonic() - enough_at > 5, "5 records ran a batch long before maxTriggerDelay"
    finally:
        query.stop()
    assert query.exception() is None


# --- failOnDataLoss: a checkpoint that points at records retention deleted -------------------------------

def _delete_records_before(bootstrap: str, topic: str, offset: int) -> None:
    from confluent_kafka import TopicPartition as KafkaPartition
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([KafkaPartition(topic, 0, offset)]).values():
        assert future.result(timeout=30).low_watermark == offset


def _stream_once(spark: Any, source: str, bootstrap: str, topic: str, where: Path, **options: str
                 ) -> tuple[str, Any]:
    """("error", text) or ("offsets", sorted offsets written so far) of one availableNow run."""
    reader = (spark.readStream.format(source).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (reader.load().selectExpr("offset").writeStream.format("parquet")
             .option("path", str(where / "out")).option("checkpointLocation", str(where / "checkpoint"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(timeout=90), "the availableNow query did not finish in 90 s"
    except Exception as exc:  # Py4J's StreamingQueryException: only its text matters here
        return "error", str(exc)
    finally:
        query.stop()
    return "offsets", sorted(r.offset for r in spark.read.parquet(str(where / "out")).collect())


@needs_spark
def test_a_checkpoint_behind_the_log_start_fails_or_skips_as_sparks_source_does(spark, spark_kafka_source,
                                                                                 bootstrap, unique_topic, tmp_path):
    create_topic(bootstrap, unique_topic, partitions=1)
    produce(bootstrap, unique_topic, _records("l1", 20, 1))
    sources = {"kafka": tmp_path / "kafka", FORMAT: tmp_path / "ours"}
    for source, where in sources.items():
        assert _stream_once(spark, source, bootstrap, unique_topic, where) == ("offsets", list(range(20)))
    produce(bootstrap, unique_topic, _records("l2", 20, 1))
    _delete_records_before(bootstrap, unique_topic, 30)  # the checkpoints point at 20: 20..29 are gone

    theirs = _stream_once(spark, "kafka", bootstrap, unique_topic, sources["kafka"])
    ours = _stream_once(spark, FORMAT, bootstrap, unique_topic, sources[FORMAT])
    assert theirs[0] == "error", str(theirs)[:3000]
    assert "failOnDataLoss" in theirs[1], theirs[1][:3000]
    assert ours[0] == "error", str(ours)[:3000]
    assert f"DataLossError: records of {unique_topic}-0 from offset 20 are no longer in Kafka" in ours[1], \
        ours[1][:3000]
    assert "set failOnDataLoss=false" in ours[1], ours[1][:3000]
    for source, where in sources.items():
        assert _stream_once(spark, source, bootstrap, unique_topic, where, failOnDataLoss="false") == \
            ("offsets", list(range(20)) + list(range(30, 40))), source

