"""Without --kafka-broker the plugin picks Apache Kafka where Java 17+ can run it, Tansu elsewhere, and says so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiokafka_lite.testing._default_broker import choose, parse_java_major


@pytest.mark.parametrize(("output", "major"), [
    ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment', 17),
    ('java version "1.8.0_292"', 8),
    ('openjdk version "21" 2023-09-19', 21),
    ('openjdk version "11.0.2" 2019-01-15', 11),
    ("command not found", None),
])
def test_java_major_version_is_read_from_java_dash_version(output: str, major: int | None) -> None:
    assert parse_java_major(output) == major


def test_kafka_is_chosen_only_where_it_can_run() -> None:
    assert choose(17, jars_available=True).name == "kafka"
    assert choose(21, jars_available=True).name == "kafka"
    assert choose(None, jars_available=True).name == "tansu"
    assert choose(11, jars_available=True).name == "tansu"
    assert choose(17, jars_available=False).name == "tansu"


def test_every_choice_says_why() -> None:
    assert choose(None, jars_available=False).reason == "no java on PATH"
    assert "needs 17+" in choose(11, jars_available=True).reason
    assert "mvn" in choose(17, jars_available=False).reason
    assert choose(17, jars_available=True).reason == "java 17 on PATH"


def _fake_tool(bin_dir: Path, name: str, stderr: str) -> None:
    script = bin_dir / name
    script.write_text(f"#!/bin/sh\necho '{stderr}' >&2\n")
    script.chmod(0o755)


def _report_header(tmp_path: Path, bin_dir: Path, *args: str) -> str:
    """The header lines of a pytest run in ``tmp_path`` whose PATH is only ``bin_dir``."""
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    assert True\n")
    env = {**os.environ, "PATH": str(bin_dir), "AIOKAFKA_LITE_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return "\n".join(line for line in done.stdout.splitlines() if line.startswith("aiokafka-lite:"))


def test_default_is_apache_kafka_with_java_17_on_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_tool(bin_dir, "java", 'openjdk version "17.0.15" 2025-04-15')
    _fake_tool(bin_dir, "mvn", "Apache Maven 3.8.7")
    header = _report_header(tmp_path, bin_dir)
    assert "kafka_broker is kafka (java 17 on PATH)" in header
    assert "DEVIATIONS" not in header


def test_default_is_tansu_without_java_and_the_header_points_at_its_deviations(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    header = _report_header(tmp_path, bin_dir)
    assert "kafka_broker is tansu (no java on PATH)" in header
    assert "aiokafka_lite.testing.tansu.DEVIATIONS" in header


def test_default_is_tansu_with_an_old_java(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_tool(bin_dir, "java", 'openjdk version "11.0.2" 2019-01-15')
    assert "kafka_broker is tansu (java 11 on PATH, Apache Kafka needs 17+)" in _report_header(tmp_path, bin_dir)


def test_the_option_overrides_the_default(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    assert "kafka_broker is mock (--kafka-broker)" in _report_header(tmp_path, bin_dir, "--kafka-broker=mock")


def testnew_cluster_ids_never_start_with_a_dash():
    # kafka-storage would read "-t -abc..." as a missing value followed by an option.
    from aiokafka_lite.testing.apache_kafka import new_cluster_id

    ids = [new_cluster_id() for _ in range(2000)]  # about 31 of them would start with "-" unfiltered
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 for i in ids)
