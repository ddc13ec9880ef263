"""Which Apache Kafka the fixtures start: the newest supported release, or the one
AIOKAFKA_LITE_KAFKA_VERSION names (CI's compatibility run on 4.3.1); a version the fixtures cannot
start is refused when the module loads, naming the ones they can."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from aiokafka_lite.testing import apache_kafka

PRINT_DEFAULT = "from aiokafka_lite.testing.apache_kafka import DEFAULT_VERSION; print(DEFAULT_VERSION)"


def _default_with(value: str | None) -> subprocess.CompletedProcess[str]:
    # The package under test, wherever the subprocess starts.
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(apache_kafka.__file__).parents[2])}
    if value is not None:
        env[apache_kafka.VERSION_VARIABLE] = value
    return subprocess.run([sys.executable, "-c", PRINT_DEFAULT], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def test_the_newest_release_unless_the_variable_names_another() -> None:
    assert apache_kafka.NEWEST_VERSION == "4.4.0"
    assert _default_with(None).stdout.strip() == "4.4.0"
    assert _default_with("").stdout.strip() == "4.4.0"
    assert _default_with("4.3.1").stdout.strip() == "4.3.1"


def test_a_version_the_fixtures_cannot_start_is_refused_naming_those_they_can() -> None:
    done = _default_with("4.2.0")
    assert done.returncode != 0
    assert "ValueError: AIOKAFKA_LITE_KAFKA_VERSION='4.2.0': the fixtures start one of 4.4.0, 4.3.1, 3.9.2" \
        in done.stderr, done.stderr
