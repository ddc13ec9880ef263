"""benchmarks/spark_compare.py picks the version of Spark's own Kafka source (spark-sql-kafka-0-10):
pyspark's when Maven fetches it, else the newest served release below it, said once and remembered.

Maven is replaced by a script that "serves" only the versions a test names.
"""

from __future__ import annotations

import stat
import sys
import types
from pathlib import Path

import pytest

from benchmarks import spark_compare

FAKE_MVN = """#!/bin/sh
# Serves spark-sql-kafka-0-10 only in the versions listed in $SERVED; records every version asked for.
pom="" out=""
for arg in "$@"; do
  case "$arg" in
    -DoutputDirectory=*) out="${arg#-DoutputDirectory=}" ;;
    *.xml) pom="$arg" ;;
  esac
done
version=$(sed -n 's:.*<version>\\(.*\\)</version>.*:\\1:p' "$pom" | sed -n 2p)
echo "$version" >> "$ASKED"
case " $SERVED " in *" $version "*) ;; *) exit 1 ;; esac
mkdir -p "$out"
for jar in spark-sql-kafka-0-10_2.13 spark-token-provider-kafka-0-10_2.13; do touch "$out/$jar-$version.jar"; done
touch "$out/kafka-clients-3.9.2.jar" "$out/scala-library-2.13.16.jar"
"""


@pytest.fixture
def maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    mvn = tmp_path / "mvn"
    mvn.write_text(FAKE_MVN)
    mvn.chmod(mvn.stat().st_mode | stat.S_IXUSR)
    asked = tmp_path / "asked"
    monkeypatch.setattr(spark_compare.shutil, "which", lambda name: str(mvn))
    monkeypatch.setattr(spark_compare, "CACHE", tmp_path / "cache")
    monkeypatch.setenv("ASKED", str(asked))
    monkeypatch.setitem(sys.modules, "pyspark", types.SimpleNamespace(__version__="4.3.0"))
    return asked


def test_newest_served_release_below_pysparks_is_used_said_and_remembered(maven, monkeypatch):
    monkeypatch.setenv("SERVED", "4.1.1 4.2.0")
    said: list[str] = []
    version, jars = spark_compare.spark_kafka_jars(say=said.append)
    assert version == "4.2.0"
    assert [Path(jar).name for jar in jars] == [
        "kafka-clients-3.9.2.jar", "spark-sql-kafka-0-10_2.13-4.2.0.jar",
        "spark-token-provider-kafka-0-10_2.13-4.2.0.jar"]
    [line] = said
    assert line.startswith("spark-sql-kafka-0-10 4.3.0 (pyspark's version) is not on Maven Central; using 4.2.0")
    assert maven.read_text().split() == ["4.3.0", "4.2.0"]
    # A second run asks Maven nothing and says the same.
    assert spark_compare.spark_kafka_jars(say=said.append) == (version, jars)
    assert maven.read_text().split() == ["4.3.0", "4.2.0"]
    assert said == [line, line]


def test_pysparks_own_version_when_served_silently(maven, monkeypatch):
    monkeypatch.setenv("SERVED", "4.2.0 4.3.0")
    said: list[str] = []
    version, _ = spark_compare.spark_kafka_jars(say=said.append)
    assert (version, said) == ("4.3.0", [])


def test_an_explicit_version_is_taken_as_given(maven, monkeypatch):
    monkeypatch.setenv("SERVED", "4.1.1")
    assert spark_compare.spark_kafka_jars("4.1.1", say=print)[0] == "4.1.1"
    assert maven.read_text().split() == ["4.1.1"]
    with pytest.raises(SystemExit, match=r"Maven could not fetch spark-sql-kafka-0-10 4\.3\.0"):
        spark_compare.spark_kafka_jars("4.3.0", say=print)


def test_nothing_served_is_a_clear_error(maven, monkeypatch):
    monkeypatch.setenv("SERVED", "")
    with pytest.raises(SystemExit, match="give one with --spark-kafka-version"):
        spark_compare.spark_kafka_jars(say=print)
