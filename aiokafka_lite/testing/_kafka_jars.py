"""Fetch the jars of an Apache Kafka broker from Maven Central once, into a per-user cache.

``~/.cache/aiokafka-lite/kafka-<version>/`` (or ``$AIOKAFKA_LITE_CACHE/kafka-<version>/``) holds the
jars; a marker file is written only after a complete download, and a file lock keeps parallel test
processes (pytest-xdist, two terminals) from downloading into the same directory at once.

A cache is complete when it has the marker *and* every artifact in ``REQUIRED_JARS``: when the pom
gains an artifact (``kafka-tools`` was added for the Java ``VerifiableConsumer``), caches made
before then are resolved again on next use instead of failing with a missing class.

The first download (some 65 MB with Maven's own plugins, a quarter of a minute to a minute) tells its
progress on stderr (see _download_progress); a complete cache is used without a word.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TextIO

from aiokafka_lite.testing._download_progress import DownloadProgress, is_transfer_line
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


# What to install when a tool is not on PATH.
HOW_TO_GET = {
    "java": "install a Java 17+ runtime (e.g. apt-get install openjdk-17-jre-headless, or Temurin 17)",
    "mvn": "install Apache Maven (e.g. apt-get install maven)",
}


def require_tool(name: str, purpose: str) -> str:
    path = shutil.which(name)
    if path is None:
        hint = f": {HOW_TO_GET[name]}" if name in HOW_TO_GET else ""
        raise BrokerUnavailable(f"`{name}` is not on PATH; it is needed to {purpose}{hint}")
    return path


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def kafka_jars(version: str, *, timeout: float = 900.0, progress: TextIO | None = None) -> Path:
    """The directory holding every runtime jar of Kafka ``version``; downloads it on first use,
    telling ``progress`` (default: ``sys.stderr`` as it is at the call, so pytest captures it)."""
    root = cache_root()
    target = root / f"kafka-{version}"
    if _is_complete(target, version):
        return target
    with file_lock(root / f"kafka-{version}.lock"):
        if _is_complete(target, version):  # another process finished while we waited
            return target
        _download(version, target, timeout, sys.stderr if progress is None else progress)
    return target


def missing_jars(directory: Path, version: str) -> list[str]:
    """The ``REQUIRED_JARS`` artifacts of ``version`` that ``directory`` lacks."""
    return [name for name in REQUIRED_JARS if not (directory / f"{name}-{version}.jar").exists()]


def _is_complete(directory: Path, version: str) -> bool:
    return (directory / _MARKER).exists() and not missing_jars(directory, version)


def _download(version: str, target: Path, timeout: float, stream: TextIO) -> None:
    mvn = require_tool("mvn", f"download the Kafka {version} jars from Maven Central")
    staging = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    progress = DownloadProgress(f"Apache Kafka {version}'s jars from Maven Central", stream)
    pom = resources.files("aiokafka_lite.testing").joinpath("kafka/pom.xml")
    with resources.as_file(pom) as pom_path:
        # Not -q: the "Downloaded from" lines are the progress. -B keeps them one per file.
        argv = [mvn, "-B", "-Dstyle.color=never", "-f", str(pom_path),
                f"-Dkafka.version={version}", "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
        progress.start(str(target))
        returncode, timed_out, tail = run_maven(argv, progress, timeout)
    missing = missing_jars(staging, version)
    progress.finish(ok=returncode == 0 and not missing)
    if returncode != 0 or missing:
        shutil.rmtree(staging, ignore_errors=True)
        why = f"timed out after {timeout:.0f} s" if timed_out else f"exit {returncode}"
        raise BrokerUnavailable(
            f"could not download Kafka {version} with Maven ({why}"
            f"{', missing ' + ', '.join(missing) if missing else ''}):\n{''.join(tail)[-3000:]}")
    (staging / _MARKER).write_text(version + "\n")
    replace_directory(target, staging)


def run_maven(argv: list[str], progress: DownloadProgress, timeout: float) -> tuple[int, bool, list[str]]:
    """Run Maven, feeding each output line to ``progress``: (exit code, whether it was killed for
    ``timeout``, its last lines other than per-file transfers, for an error report)."""
    tail: deque[str] = deque(maxlen=60)
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace") as proc:
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                progress.feed(line)
                if not is_transfer_line(line):
                    tail.append(line)
            returncode = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:  # interrupted (Ctrl-C): leave no Maven behind, no counter on the line
                proc.kill()
                proc.wait()
                progress.finish(ok=False)
    return returncode, killed.is_set(), list(tail)


def replace_directory(target: Path, staging: Path) -> None:
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


# A log4j2 configuration sending everything to one file ({log_file}), for the broker and the tools
# started from these jars (so a tool's stdout holds nothing but what it prints).
LOG4J2_TO_FILE = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""
