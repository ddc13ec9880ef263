"""The aiokafka_lite Spark source beside Spark's own Kafka source, on the same topic.

    python benchmarks/spark_compare.py                       # starts Apache Kafka 4.3.1, 500,000 x 100 B
    python benchmarks/spark_compare.py --bootstrap 127.0.0.1:9092 --records 200000 --runs 3
    python benchmarks/spark_compare.py --cluster 2 --partitions 1 --records 1000000 --min-partitions 4

Spark's source is ``org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>`` when Maven Central
serves it, else the newest served release below it (said in one line), or ``--spark-kafka-version``;
fetched with Maven into ~/.cache/aiokafka-lite. Both read the
whole topic in one batch query on ``local[N]``, or with ``--cluster N`` on a Spark standalone cluster
of N one-core workers on loopback (aiokafka_lite.testing.spark_standalone: executors in processes
of their own), and compute ``count(*)`` and ``sum(length(value))``,
so every value is materialised in Spark. ``--check-rows`` then compares the two sources' rows and
records which executors ran our tasks. With ``--min-partitions M`` each source also
reads with ``minPartitions=M``, which splits large Kafka partitions into M tasks. The first run of
each source is a warm-up (JVM JIT,
Python workers); the best of the timed runs is reported, as records/s, with the ratio of ours to
Spark's. The record decoder the Python workers ran (native, or python with AIOKAFKA_LITE_NO_NATIVE=1)
is asked from a worker and recorded; the figures go to ``benchmarks/results/spark_compare_<decoder>.json``
(or ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

PARTITIONS = 4  # the topic's partitions unless --partitions says otherwise
RESULTS = Path(__file__).parent / "results"


def _values(count: int, size: int, partitions: int) -> Iterator[dict[str, Any]]:
    noise = os.urandom(size).hex().encode()
    for i in range(count):
        head = b'{"seq":%09d,"k":"' % i
        start = (i * 7) % size
        body = (noise[start:] + noise)[:size - len(head) - 2]
        yield {"value": head + body + b'"}', "partition": i % partitions}


def fill_topic(bootstrap: str, records: int, size: int, partitions: int = PARTITIONS) -> str:
    from aiokafka_lite.testing.helpers import create_topic, produce
    topic = f"spark-bench-{uuid.uuid4().hex[:6]}"
    began = time.monotonic()
    create_topic(bootstrap, topic, partitions=partitions)
    produce(bootstrap, topic, _values(records, size, partitions), linger_ms=20, batch_size=1_000_000,
            enable_idempotence=True)
    print(f"produced {records:,} x {size} B to {topic} ({partitions} partitions) in "
          f"{time.monotonic() - began:.1f} s", flush=True)
    return topic


POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>aiokafka-lite</groupId><artifactId>spark-kafka-bench</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_2.13</artifactId>
      <version>{kafka}</version>
      <exclusions><exclusion>
        <groupId>org.apache.spark</groupId><artifactId>spark-token-provider-kafka-0-10_2.13</artifactId>
      </exclusion></exclusions>
    </dependency>
    <dependency>
      <groupId>org.apache.spark</groupId><artifactId>spark-token-provider-kafka-0-10_2.13</artifactId>
      <version>{token}</version>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>
    </dependency>
  </dependencies>
</project>
"""


CACHE = Path.home() / ".cache" / "aiokafka-lite"
# Releases of spark-sql-kafka-0-10_2.13 seen on Maven Central, newest first: the fall-backs when pyspark's
# own version is not there yet (a Maven version range is no help: it drags in previews that are not).
SERVED_RELEASES = ("4.2.0", "4.1.1", "4.0.1")
WANTED_JARS = ("spark-sql-kafka-", "spark-token-provider-kafka-", "kafka-clients-", "commons-pool2-")


def spark_kafka_jars(kafka_version: str | None = None, token_version: str | None = None,
                     say: Callable[[str], None] = print) -> tuple[str, list[str]]:
    """(version, jars) of Spark's Kafka source and its runtime dependencies, fetched once with Maven.

    Without ``kafka_version``: pyspark's own version when Maven Central serves it, else the newest
    of ``SERVED_RELEASES`` below it that Maven fetches, said in one line (``say``); the choice is
    remembered beside the jars, so Maven is asked once per pyspark version. Maven rather
    than ``spark.jars.packages`` (Ivy) so that ``spark-token-provider-kafka-0-10``, only used for
    delegation tokens, can be pinned to another version when a repository lacks the matching one.
    """
    if kafka_version is not None:
        try:
            return kafka_version, _fetched(kafka_version, token_version or kafka_version)
        except subprocess.CalledProcessError:
            raise SystemExit(f"Maven could not fetch spark-sql-kafka-0-10 {kafka_version} (with "
                             f"spark-token-provider-kafka-0-10 {token_version or kafka_version})") from None
    import pyspark
    wanted = pyspark.__version__.split("+")[0]
    CACHE.mkdir(parents=True, exist_ok=True)
    choice = CACHE / f"spark-sql-kafka-for-pyspark-{wanted}"
    if choice.exists():
        version = choice.read_text().strip()
        jars = _fetched(version, version)
    else:
        version, jars = _first_fetched(wanted)
        choice.write_text(version + "\n")
    if version != wanted:
        say(f"spark-sql-kafka-0-10 {wanted} (pyspark's version) is not on Maven Central; using {version}, "
            f"the newest release below it that Maven fetched (remembered in {choice})")
    return version, jars


def _first_fetched(wanted: str) -> tuple[str, list[str]]:
    for version in (wanted, *(v for v in SERVED_RELEASES if _release(v) < _release(wanted))):
        try:
            return version, _fetched(version, version)
        except subprocess.CalledProcessError:
            continue
    raise SystemExit(f"Maven could not fetch spark-sql-kafka-0-10 {wanted} nor any of {SERVED_RELEASES}: "
                     "give one with --spark-kafka-version")


def _fetched(kafka: str, token: str) -> list[str]:
    target = CACHE / f"spark-sql-kafka-{kafka}-{token}"
    if not any(target.glob("spark-sql-kafka-*.jar")):
        mvn = shutil.which("mvn")
        if mvn is None:
            raise SystemExit("Maven (mvn) is needed to download spark-sql-kafka-0-10 from Maven Central")
        with tempfile.TemporaryDirectory() as tmp:
            pom = Path(tmp) / "pom.xml"
            pom.write_text(POM.format(kafka=kafka, token=token))
            subprocess.run([mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                            f"-DoutputDirectory={target}", "-DincludeScope=runtime"], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900)
    # Spark already ships scala-library, slf4j, lz4, snappy...: only the source and its Kafka client.
    return sorted(str(jar) for jar in target.glob("*.jar") if jar.name.startswith(WANTED_JARS))


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("-")[0].split("."))


def spark_session(cores: int, jars: list[str], master: str | None = None, driver_memory: str = "2g") -> Any:
    """A session on ``local[cores]``, or on the standalone ``master`` with ``cores`` one-core executors;
    loopback only, no UI, times in UTC, the aiokafka_lite source registered. The tests use it too."""
    from pyspark.sql import SparkSession

    from aiokafka_lite.spark import register
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, and no warning about the host name
    # The Python workers (the driver's, which create and plan the source, and the executors') import
    # aiokafka_lite from this interpreter: the driver JVM reads these when it starts them.
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (SparkSession.builder.master(master or f"local[{cores}]").appName("aiokafka-lite-spark")
               .config("spark.jars", ",".join(jars))
               .config("spark.driver.memory", driver_memory)
               .config("spark.pyspark.python", sys.executable)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(cores))
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1"))
    if master is not None:
        builder = (builder.config("spark.executor.memory", "1g").config("spark.executor.cores", "1")
                   .config("spark.cores.max", str(cores)))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    if master is not None:
        _wait_for_executors(spark, cores)
    return spark


def _wait_for_executors(spark: Any, count: int, timeout: float = 120.0) -> None:
    """Executors register a moment after the session starts; a read before then would run on fewer."""
    deadline = time.monotonic() + timeout
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < count + 1:  # + the driver's entry
        if time.monotonic() > deadline:
            raise SystemExit(f"fewer than {count} executors registered with the cluster in {timeout:.0f} s")
        time.sleep(0.2)


def worker_decoder(spark: Any) -> str:
    """The record decoder of a Spark Python worker ("native" or "python"), with why when python."""
    def probe(_: Any) -> str:
        from aiokafka_lite.protocol import native
        why = native.why_python()
        return f"{native.decoder()} ({why})" if why else native.decoder()
    return str(spark.sparkContext.parallelize([0], 1).map(probe).collect()[0])


def read_all(spark: Any, source: str, bootstrap: str, topic: str, min_partitions: int | None = None
             ) -> tuple[int, int, float]:
    """(records, value bytes, seconds) for one full batch read of ``topic``."""
    from pyspark.sql import functions as F
    began = time.monotonic()
    reader = (spark.read.format(source)
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("endingOffsets", "latest"))
    if min_partitions is not None:
        reader = reader.option("minPartitions", str(min_partitions))
    row = reader.load().agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).collect()[0]
    return int(row.n), int(row.bytes or 0), time.monotonic() - began


def measure(spark: Any, source: str, bootstrap: str, topic: str, expected: int, runs: int,
            min_partitions: int | None = None) -> list[float]:
    """Records/s of ``runs`` timed reads after one warm-up."""
    rates: list[float] = []
    name = _variant(source, min_partitions)
    for attempt in range(runs + 1):
        count, _, seconds = read_all(spark, source, bootstrap, topic, min_partitions)
        if count != expected:
            raise SystemExit(f"{name}: read {count:,} records, expected {expected:,}")
        label = "warm-up" if attempt == 0 else f"run {attempt}"
        print(f"  {name:30} {label:8} {seconds:6.2f} s  {count / seconds:12,.0f} records/s", flush=True)
        if attempt:
            rates.append(count / seconds)
    return rates


def same_rows(spark: Any, bootstrap: str, topic: str, min_partitions: int | None) -> dict[str, Any]:
    """Ours and Spark's rows of the same read compared, and where our tasks ran: the rows of each
    missing from the other (duplicates counted, so with equal counts 0 and 0 mean the same rows),
    and per task its record count and its executor's directory (<worker work dir>/<app>/<executor>
    on a cluster; the driver's directory on local[N])."""
    def load(source: str) -> Any:
        reader = (spark.read.format(source).option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("endingOffsets", "latest"))
        if min_partitions is not None:
            reader = reader.option("minPartitions", str(min_partitions))
        return reader.load().select("topic", "partition", "offset", "key", "value", "timestamp")

    ours, theirs = load("aiokafka_lite"), load("kafka")
    tasks = (ours.select("offset").rdd
             .mapPartitionsWithIndex(lambda index, rows: [(index, os.getcwd(), sum(1 for _ in rows))])
             .collect())
    return {"records": {"aiokafka_lite": ours.count(), "kafka": theirs.count()},
            "aiokafka_lite_rows_not_in_kafka": ours.exceptAll(theirs).count(),
            "kafka_rows_not_in_aiokafka_lite": theirs.exceptAll(ours).count(),
            "aiokafka_lite_tasks": [{"task": index, "records": count, "executor_dir": cwd}
                                    for index, cwd, count in sorted(tasks)]}


def _variant(source: str, min_partitions: int | None) -> str:
    return source if min_partitions is None else f"{source} minPartitions={min_partitions}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="an existing broker (default: start Apache Kafka 4.3.1 here)")
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--partitions", type=int, default=PARTITIONS, help="the topic's partitions")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per source (after one warm-up)")
    parser.add_argument("--cores", type=int, default=2, help="local[N]")
    parser.add_argument("--cluster", type=int, metavar="N", help="a Spark standalone cluster of N one-core "
                        "workers on loopback instead of local[--cores]")
    parser.add_argument("--min-partitions", type=int, help="also read with minPartitions=M")
    parser.add_argument("--check-rows", action="store_true", help="after timing, compare both sources' "
                        "rows (sorted topic, partition, offset, key, value, timestamp) and record where "
                        "our tasks ran (with --min-partitions, for that read)")
    parser.add_argument("--spark-kafka-version", help="version of spark-sql-kafka-0-10 (default: pyspark's "
                        "when Maven Central serves it, else the newest served one below it)")
    parser.add_argument("--token-provider-version", help="version of spark-token-provider-kafka-0-10 "
                        "(default: the same as --spark-kafka-version)")
    parser.add_argument("--json", help="write the figures to this file (default: "
                        "benchmarks/results/spark_compare_<decoder>[_cluster].json)")
    args = parser.parse_args(argv)

    kafka_version, jars = spark_kafka_jars(args.spark_kafka_version, args.token_provider_version)
    cores = args.cluster or args.cores
    splits = [None] if args.min_partitions is None else [None, args.min_partitions]
    variants = [(source, split) for split in splits for source in ("kafka", "aiokafka_lite")]
    with ExitStack() as stack:
        bootstrap = args.bootstrap
        if bootstrap is None:
            from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker
            broker = ApacheKafkaBroker("4.3.1").start()
            stack.callback(broker.stop)
            bootstrap = broker.bootstrap_servers
        master = None
        if args.cluster:
            from aiokafka_lite.testing.spark_standalone import spark_standalone
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="spark-standalone-")))
            master = stack.enter_context(spark_standalone(workdir, workers=args.cluster)).master_url
        topic = fill_topic(bootstrap, args.records, args.size, args.partitions)
        spark = spark_session(cores, jars, master)
        stack.callback(spark.stop)
        decoder = worker_decoder(spark)
        print(f"aiokafka_lite record decoder in the Python workers: {decoder}", flush=True)
        runs = {_variant(source, split): measure(spark, source, bootstrap, topic, args.records, args.runs, split)
                for source, split in variants}
        version = spark.version
        rows = None
        if args.check_rows:
            rows = same_rows(spark, bootstrap, topic, args.min_partitions)
            print(f"rows compared: {json.dumps(rows, indent=2)}", flush=True)
    results = {name: max(rates) for name, rates in runs.items()}
    ratios = {_variant("aiokafka_lite / kafka", split): results[_variant("aiokafka_lite", split)]
              / results[_variant("kafka", split)] for split in splits}
    where = f"standalone, {args.cluster} one-core workers" if args.cluster else f"local[{args.cores}]"
    print(f"\nSpark {version}, {where}, {args.records:,} records x {args.size} B, {args.partitions} "
          f"partitions, best of {args.runs} (spark-sql-kafka-0-10 {kafka_version}; aiokafka_lite decoder "
          f"{decoder.split()[0]}):")
    for name, rate in results.items():
        print(f"  {name:40} {rate:12,.0f} records/s")
    for name, ratio in ratios.items():
        print(f"  ratio {name:34} {ratio:12.2f}")
    suffix = "_cluster" if args.cluster else ""
    path = Path(args.json) if args.json else RESULTS / f"spark_compare_{decoder.split()[0]}{suffix}.json"
    path.write_text(json.dumps({
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "spark": version,
        "spark_sql_kafka": kafka_version, "broker": args.bootstrap or "apache-kafka-4.3.1",
        "master": where, "records": args.records, "size": args.size, "partitions": args.partitions,
        "min_partitions": args.min_partitions, "decoder": decoder, "runs": args.runs,
        "records_per_s_runs": runs, "records_per_s": results,
        "ratio": ratios[_variant("aiokafka_lite / kafka", None)], "ratios": ratios, "rows_compared": rows},
        indent=2) + "\n")
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
