"""Fetch the jars of an Apache Kafka broker from Maven Central once, into a per-user cache.

``~/.cache/aiokafka-lite/kafka-<version>/`` (or ``$AIOKAFKA_LITE_CACHE/kafka-<version>/``) holds the
jars; a marker file is written only after a complete download, and a file lock keeps parallel test
processes (pytest-xdist, two terminals) from downloading into the same directory at once.

A cache is complete when it has the marker *and* every artifact in ``REQUIRED_JARS``: when the pom
gains an artifact (``kafka-tools`` was added for the Java ``VerifiableConsumer``), caches made
before then are resolved again on next use instead of failing with a missing class.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from aiokafka_lite.testing._process import BrokerUnavailable

CACHE_ENV = "AIOKAFKA_LITE_CACHE"
_MARKER = ".complete"

# The artifacts named in kafka/pom.xml whose jars must be present (``<artifact>-<version>.jar``):
# the broker (kafka_2.13, kafka-server) and the command-line tools (kafka-tools).
REQUIRED_JARS = ("kafka_2.13", "kafka-server", "kafka-tools")


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    root = Path(configured) if configured else Path.home() / ".cache" / "aiokafka-lite"
    root.mkdir(parents=True, exist_ok=True)
    return root


def require_tool(name: str, purpose: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise BrokerUnavailable(f"`{name}` is not on PATH; it is needed to {purpose}")
    return path


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def kafka_jars(version: str, *, timeout: float = 900.0) -> Path:
    """The directory holding every runtime jar of Kafka ``version``; downloads it on first use."""
    root = cache_root()
    target = root / f"kafka-{version}"
    if _is_complete(target, version):
        return target
    with _file_lock(root / f"kafka-{version}.lock"):
        if _is_complete(target, version):  # another process finished while we waited
            return target
        _download(version, target, timeout)
    return target


def missing_jars(directory: Path, version: str) -> list[str]:
    """The ``REQUIRED_JARS`` artifacts of ``version`` that ``directory`` lacks."""
    return [name for name in REQUIRED_JARS if not (directory / f"{name}-{version}.jar").exists()]


def _is_complete(directory: Path, version: str) -> bool:
    return (directory / _MARKER).exists() and not missing_jars(directory, version)


def _download(version: str, target: Path, timeout: float) -> None:
    mvn = require_tool("mvn", f"download the Kafka {version} jars from Maven Central")
    staging = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    pom = resources.files("aiokafka_lite.testing").joinpath("kafka/pom.xml")
    with resources.as_file(pom) as pom_path:
        argv = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(pom_path),
                f"-Dkafka.version={version}", "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    missing = missing_jars(staging, version)
    if result.returncode != 0 or missing:
        shutil.rmtree(staging, ignore_errors=True)
        raise BrokerUnavailable(
            f"could not download Kafka {version} with Maven (exit {result.returncode}"
            f"{', missing ' + ', '.join(missing) if missing else ''}):\n"
            f"{(result.stdout + result.stderr)[-3000:]}")
    (staging / _MARKER).write_text(version + "\n")
    _replace(target, staging)


def _replace(target: Path, staging: Path) -> None:
    """Put the fresh ``staging`` directory where ``target`` is (an older, incomplete cache or an
    interrupted download). The old one is renamed aside rather than deleted in place, so a JVM
    started from it earlier keeps its open jars while ``target`` is never a half-deleted mix."""
    stale = target.with_name(f"{target.name}.stale-{os.getpid()}")
    if target.exists():
        target.rename(stale)
    staging.rename(target)
    shutil.rmtree(stale, ignore_errors=True)


def is_cached(version: str) -> bool:
    """Whether the jars of Kafka ``version`` are already downloaded (no Maven needed to start it)."""
    return _is_complete(cache_root() / f"kafka-{version}", version)
