"""Which broker the plugin's ``kafka_broker`` fixture starts when ``--kafka-broker`` is not given.

Apache Kafka is the reference, so it is the default wherever it can run: ``java`` 17+ on PATH and
its jars either cached or downloadable with ``mvn``. Elsewhere Tansu, which needs no Java but
deviates from Kafka in ways listed in ``aiokafka_lite.testing.tansu.DEVIATIONS``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from aiokafka_lite.testing._kafka_jars import is_cached
from aiokafka_lite.testing.apache_kafka import DEFAULT_VERSION

JAVA_MIN_MAJOR = 17  # Apache Kafka 4.x brokers need Java 17
JAVA_VERSION_TIMEOUT = 30.0
_JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


@dataclass(frozen=True)
class BrokerChoice:
    """A ``--kafka-broker`` value and why it was chosen."""

    name: str
    reason: str


def parse_java_major(version_output: str) -> int | None:
    """The major version in ``java -version`` output: "17.0.15" -> 17, "1.8.0_292" -> 8."""
    match = _JAVA_VERSION.search(version_output)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def java_major_version() -> int | None:
    """The major version of the ``java`` on PATH, or None when there is none (or it does not say)."""
    java = shutil.which("java")
    if java is None:
        return None
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True,
                              timeout=JAVA_VERSION_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_java_major(done.stderr + done.stdout)


def choose(java_major: int | None, jars_available: bool) -> BrokerChoice:
    """Apache Kafka when it can run here, Tansu otherwise (pure, for the tests)."""
    if java_major is None:
        return BrokerChoice("tansu", "no java on PATH")
    if java_major < JAVA_MIN_MAJOR:
        return BrokerChoice("tansu", f"java {java_major} on PATH, Apache Kafka needs {JAVA_MIN_MAJOR}+")
    if not jars_available:
        return BrokerChoice("tansu", f"java {java_major} on PATH, but the Kafka {DEFAULT_VERSION} jars are "
                                     "not cached and mvn is not on PATH to download them")
    return BrokerChoice("kafka", f"java {java_major} on PATH")


def default_broker() -> BrokerChoice:
    """What ``--kafka-broker`` means when it is not given, on this machine."""
    java_major = java_major_version()
    # Only look for the jars where Kafka could run: the check creates the cache directory.
    jars = (java_major is not None and java_major >= JAVA_MIN_MAJOR
            and (is_cached(DEFAULT_VERSION) or shutil.which("mvn") is not None))
    return choose(java_major, jars)
