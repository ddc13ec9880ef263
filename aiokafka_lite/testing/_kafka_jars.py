"""Fetch the jars of an Apache Kafka broker from Maven Central once, into a per-user cache.

``~/.cache/aiokafka-lite/kafka-<version>/`` (or ``$AIOKAFKA_LITE_CACHE/kafka-<version>/``) holds the
jars; a marker file is written only after a complete download, and a file lock keeps parallel test
processes (pytest-xdist, two terminals) from downloading into the same directory at once.
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
    if (target / _MARKER).exists():
        return target
    with _file_lock(root / f"kafka-{version}.lock"):
        if (target / _MARKER).exists():  # another process finished while we waited
            return target
        _download(version, target, timeout)
    return target


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
    if result.returncode != 0 or not any(staging.glob(f"kafka_*-{version}.jar")):
        shutil.rmtree(staging, ignore_errors=True)
        raise BrokerUnavailable(
            f"could not download Kafka {version} with Maven (exit {result.returncode}):\n"
            f"{(result.stdout + result.stderr)[-3000:]}")
    shutil.rmtree(target, ignore_errors=True)  # a leftover from an interrupted run, if any
    staging.rename(target)
    (target / _MARKER).write_text(version + "\n")


def is_cached(version: str) -> bool:
    """Whether the jars of Kafka ``version`` are already downloaded (no Maven needed to start it)."""
    return (cache_root() / f"kafka-{version}" / _MARKER).exists()
