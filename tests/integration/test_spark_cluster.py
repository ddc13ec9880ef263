"""The Spark source on a Spark standalone cluster (a master and two one-core workers on loopback,
aiokafka_lite.testing.spark_standalone): executors and their Python workers in processes of their own,
importing the installed package, reading from Apache Kafka beside Spark's own Kafka source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.testing._process import ManagedProcess, wait_until
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.spark_standalone import SparkStandalone, spark_standalone

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

FORMAT = "aiokafka_lite"
# The case is 1M records (AIOKAFKA_LITE_SPARK_CLUSTER_RECORDS=1000000, minutes); the suite reads fewer.
RECORDS = int(os.environ.get("AIOKAFKA_LITE_SPARK_CLUSTER_RECORDS", "60000")) // 4 * 4
STREAM_DRIVER = Path(__file__).with_name("_spark_stream_driver.py")
STREAMED = 3_000  # 6 micro-batches of maxOffsetsPerTrigger=500
COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    with spark_standalone(tmp_path_factory.mktemp("spark-cluster")) as standalone:
        yield standalone


@pytest.fixture
def spark(cluster: SparkStandalone) -> Iterator[Any]:
    """A session on the cluster, holding both workers' cores until the test ends."""
    from benchmarks.spark_compare import spark_kafka_jars, spark_session
    _, jars = spark_kafka_jars(say=lambda line: None)
    session = spark_session(2, jars, cluster.master_url, driver_memory="768m")  # waits for both executors
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def bootstrap(apache_kafka_broker: Any) -> str:
    return str(apache_kafka_broker.bootstrap_servers)


def _load(spark: Any, source: str, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format(source).option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load().select(*COLUMNS)


def _executor_dir(cwd: str, workers: tuple[Path, ...]) -> Path:
    """The worker whose work directory holds ``cwd`` (an executor's <work-dir>/<app>/<executor>)."""
    return next(worker for worker in workers if Path(cwd).is_relative_to(worker))


def test_min_partitions_reads_one_partition_on_both_workers_with_sparks_rows(spark, cluster, bootstrap,
                                                                             unique_topic):
    create_topic(bootstrap, unique_topic, partitions=1)
    base = int(time.time() * 1000) - 60_000
    produce(bootstrap, unique_topic, ({"key": f"k{i % 97}", "value": f"value-{i}", "timestamp": base + i // 100}
                                      for i in range(RECORDS)), linger_ms=50,
            enable_idempotence=True)
    ours = _load(spark, FORMAT, bootstrap, subscribe=unique_topic, minPartitions="4")
    assert ours.rdd.getNumPartitions() == 4
    tasks = (ours.select("offset").rdd
             .mapPartitionsWithIndex(lambda index, rows: [(index, os.getcwd(), sum(1 for _ in rows))])
             .collect())
    assert sorted((index, count) for index, _, count in tasks) == [(i, RECORDS // 4) for i in range(4)]
    assert {_executor_dir(cwd, cluster.worker_dirs) for _, cwd, _ in tasks} == set(cluster.worker_dirs), tasks

    theirs = _load(spark, "kafka", bootstrap, subscribe=unique_topic, minPartitions="4")
    assert theirs.rdd.getNumPartitions() == 4
    assert ours.count() == theirs.count() == RECORDS
    # With equal counts, nothing of ours missing from theirs (duplicates counted) means the same rows.
    assert ours.exceptAll(theirs).count() == 0


def _committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return sum(1 for name in os.listdir(commits) if name.isdigit()) if commits.is_dir() else 0


def test_a_streaming_driver_killed_mid_query_resumes_from_its_checkpoint_exactly_once(cluster, bootstrap,
                                                                                      unique_topic, tmp_path):
    create_topic(bootstrap, unique_topic, partitions=3)
    produce(bootstrap, unique_topic, ({"value": f"v{i}", "partition": i % 3} for i in range(STREAMED)),
            enable_idempotence=True)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    driver = [sys.executable, str(STREAM_DRIVER), cluster.master_url, bootstrap, unique_topic, str(out),
              str(checkpoint)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    streaming = ManagedProcess([*driver, "stream"], tmp_path / "stream.log", env=env)
    try:
        wait_until(lambda: _committed_batches(checkpoint) >= 2, timeout=180, what="two micro-batches committed",
                   process=streaming, interval=0.05)
    finally:
        streaming.kill()  # SIGKILL: the driver and its JVM, mid-query
        streaming.stop()  # reaps nothing more; closes the log
    assert _committed_batches(checkpoint) < STREAMED // 500, "the query had finished before it was killed"

    finished = subprocess.run([*driver, "finish"], capture_output=True, text=True, timeout=300, env=env, check=False)
    assert '{"finished": true}' in finished.stdout, finished.stderr[-3000:]
    rows = _committed_rows(out)
    assert len(rows) == len(set(rows)) == STREAMED, "a record lost or written twice"
    assert sorted(rows) == [(p, offset) for p in range(3) for offset in range(STREAMED // 3)]


def _committed_rows(out: Path) -> list[tuple[int, int]]:
    """(partition, offset) of every row in the files Spark's file sink committed: those its log
    (``_spark_metadata``) names, not a file a killed batch left half-written. Every tenth batch's
    log is a ``.compact`` file that repeats all before it: read from the latest one on."""
    import pyarrow.parquet as pq
    logs = {int(log.name.split(".")[0]): log for log in (out / "_spark_metadata").iterdir()
            if log.name.split(".")[0].isdigit()}
    compacted = max((batch for batch, log in logs.items() if log.name.endswith(".compact")), default=0)
    files: list[str] = []
    for batch in sorted(b for b in logs if b >= compacted):
        entries = [json.loads(line) for line in logs[batch].read_text().splitlines()[1:] if line.strip()]
        files += [entry["path"] for entry in entries if entry.get("action", "add") == "add"]
    rows: list[tuple[int, int]] = []
    for path in files:
        table = pq.read_table(path.removeprefix("file:"), columns=["partition", "offset"])
        rows += zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True)
    return rows
