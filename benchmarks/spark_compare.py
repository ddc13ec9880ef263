"""The aiokafka_lite Spark source beside Spark's own Kafka source, on the same topic.

    python benchmarks/spark_compare.py                       # starts Apache Kafka 4.3.1, 500,000 x 100 B
    python benchmarks/spark_compare.py --bootstrap 127.0.0.1:9092 --records 200000 --runs 3

Spark's source is ``org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>`` when Maven Central
serves it, else the newest served release below it (said in one line), or ``--spark-kafka-version``;
fetched with Maven into ~/.cache/aiokafka-lite. Both read the
whole topic in one batch query on ``local[N]`` and compute ``count(*)`` and ``sum(length(value))``,
so every value is materialised in Spark. The first run of each source is a warm-up (JVM JIT,
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
from pathlib import Path
from typing import Any

PARTITIONS = 4
RESULTS = Path(__file__).parent / "results"


def _values(count: int, size: int) -> Iterator[dict[str, Any]]:
    noise = os.urandom(size).hex().encode()
    for i in range(count):
        head = b'{"seq":%09d,"k":"' % i
        start = (i * 7) % size
        body = (noise[start:] + noise)[:size - len(head) - 2]
        yield {"value": head + body + b'"}', "partition": i % PARTITIONS}


def fill_topic(bootstrap: str, records: int, size: int) -> str:
    from aiokafka_lite.testing.helpers import create_topic, produce
    topic = f"spark-bench-{uuid.uuid4().hex[:6]}"
    began = time.monotonic()
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    produce(bootstrap, topic, _values(records, size), linger_ms=20, batch_size=1_000_000, enable_idempotence=True)
    print(f"produced {records:,} x {size} B to {topic} ({PARTITIONS} partitions) in "
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


def spark_session(cores: int, jars: list[str]) -> Any:
    from pyspark.sql import SparkSession

    from aiokafka_lite.spark import register
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(f"local[{cores}]").appName("aiokafka-lite-spark-bench")
             .config("spark.jars", ",".join(jars))
             .config("spark.driver.memory", "2g")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", str(cores))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def worker_decoder(spark: Any) -> str:
    """The record decoder of a Spark Python worker ("native" or "python"), with why when python."""
    def probe(_: Any) -> str:
        from aiokafka_lite.protocol import native
        why = native.why_python()
        return f"{native.decoder()} ({why})" if why else native.decoder()
    return str(spark.sparkContext.parallelize([0], 1).map(probe).collect()[0])


def read_all(spark: Any, source: str, bootstrap: str, topic: str) -> tuple[int, int, float]:
    """(records, value bytes, seconds) for one full batch read of ``topic``."""
    from pyspark.sql import functions as F
    began = time.monotonic()
    row = (spark.read.format(source)
           .option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic)
           .option("startingOffsets", "earliest")
           .option("endingOffsets", "latest")
           .load()
           .agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes"))
           .collect()[0])
    return int(row.n), int(row.bytes or 0), time.monotonic() - began


def measure(spark: Any, source: str, bootstrap: str, topic: str, expected: int, runs: int) -> list[float]:
    """Records/s of ``runs`` timed reads after one warm-up."""
    rates: list[float] = []
    for attempt in range(runs + 1):
        count, _, seconds = read_all(spark, source, bootstrap, topic)
        if count != expected:
            raise SystemExit(f"{source}: read {count:,} records, expected {expected:,}")
        label = "warm-up" if attempt == 0 else f"run {attempt}"
        print(f"  {source:13} {label:8} {seconds:6.2f} s  {count / seconds:12,.0f} records/s", flush=True)
        if attempt:
            rates.append(count / seconds)
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="an existing broker (default: start Apache Kafka 4.3.1 here)")
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per source (after one warm-up)")
    parser.add_argument("--cores", type=int, default=2, help="local[N]")
    parser.add_argument("--spark-kafka-version", help="version of spark-sql-kafka-0-10 (default: pyspark's "
                        "when Maven Central serves it, else the newest served one below it)")
    parser.add_argument("--token-provider-version", help="version of spark-token-provider-kafka-0-10 "
                        "(default: the same as --spark-kafka-version)")
    parser.add_argument("--json", help="write the figures to this file (default: "
                        "benchmarks/results/spark_compare_<decoder>.json)")
    args = parser.parse_args(argv)

    kafka_version, jars = spark_kafka_jars(args.spark_kafka_version, args.token_provider_version)
    broker = None
    if args.bootstrap is None:
        from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker
        broker = ApacheKafkaBroker("4.3.1").start()
    bootstrap = args.bootstrap if broker is None else broker.bootstrap_servers
    try:
        topic = fill_topic(bootstrap, args.records, args.size)
        spark = spark_session(args.cores, jars)
        try:
            decoder = worker_decoder(spark)
            print(f"aiokafka_lite record decoder in the Python workers: {decoder}", flush=True)
            runs = {source: measure(spark, source, bootstrap, topic, args.records, args.runs)
                    for source in ("kafka", "aiokafka_lite")}
            version = spark.version
        finally:
            spark.stop()
    finally:
        if broker is not None:
            broker.stop()
    results = {source: max(rates) for source, rates in runs.items()}
    ratio = results["aiokafka_lite"] / results["kafka"]
    print(f"\nSpark {version}, local[{args.cores}], {args.records:,} records x {args.size} B, "
          f"{PARTITIONS} partitions, best of {args.runs}:")
    print(f"  Spark's Kafka source (spark-sql-kafka-0-10 {kafka_version}): {results['kafka']:12,.0f} records/s")
    print(f"  aiokafka_lite Python data source ({decoder.split()[0]:6}):   {results['aiokafka_lite']:12,.0f} records/s")
    print(f"  ratio aiokafka_lite / kafka:                 {ratio:12.2f}")
    path = Path(args.json) if args.json else RESULTS / f"spark_compare_{decoder.split()[0]}.json"
    path.write_text(json.dumps({
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "spark": version,
        "spark_sql_kafka": kafka_version, "broker": args.bootstrap or "apache-kafka-4.3.1",
        "master": f"local[{args.cores}]", "records": args.records, "size": args.size, "partitions": PARTITIONS,
        "decoder": decoder, "runs": args.runs, "records_per_s_runs": runs, "records_per_s": results,
        "ratio": ratio}, indent=2) + "\n")
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
