"""Apicurio Registry as a test schema registry: its Confluent-compatible API on 127.0.0.1.

``ApicurioRegistry`` runs Apicurio Registry (``io.apicurio:apicurio-registry-app``, the ``all``
tar.gz from Maven Central, some 159 MB, fetched once with Maven into the cache the Kafka jars use,
``~/.cache/aiokafka-lite/apicurio-registry-<version>/``) on a Java 21+ runtime, in-memory storage and
no authentication. ``.url`` is the Confluent-compatible base (``.../apis/ccompat/v7``). Its
HTTP and management ports are chosen by the OS (port 0) and read from its log.

Java 21+ is looked for in ``$AIOKAFKA_LITE_JAVA21_HOME``, then ``$JAVA_HOME``, then ``/usr/lib/jvm/*``
(the newest first), then ``java`` on PATH; without one ``start()`` raises ``BrokerUnavailable``
(the fixture skips). A failed download or start raises ``BrokerStartError`` (the fixture fails).
On Java 17 Apicurio 3.x exits with UnsupportedClassVersionError.

Where Apicurio 3.3.3's ccompat API differs from Confluent's Schema Registry (the one place this is
written; ``test_apicurio_deviations_still_hold`` in tests/integration/test_schema_registry_apicurio.py
fails when one of them no longer holds):

- A version that is not a positive number (``versions/0``, ``versions/abc``) is 404 with error_code
  40402 "Version 0 not found."; Confluent's registry answers 422 with 42202 (invalid version).
- A schema id that is not a number (``schemas/ids/abc``) is 404 with an empty body, no error_code.
- A schema that does not parse is 422 with 42201 "Failed to discover artifact type from content.",
  without the parser's reason that Confluent's message gives.
- It starts in some 9 s on a loaded 2-core machine (3-4 s idle), on Java 21+ only.
- ``associations/resources/...`` (which confluent-kafka's serializers ask first, for a topic's
  subject) is 404, and now and then a request to a path without a route (that one included) is
  read and never answered: no log line, the connection left open (about 1 in 500 on fresh
  keep-alive connections on a 2-core machine; none on some machines; the paths our client uses lost
  none). confluent-kafka's registry client waits for an answer forever unless given a ``timeout``,
  then retries: ``confluent_client_config()`` gives it one. Our client bounds every request anyway.

The same as Confluent's, which clients may rely on: ids name content (the same schema under two
subjects has one id, registering it again returns that id and adds no version), Avro schemas come
back compacted (``{"type":"record",...}``, whitespace gone) while Protobuf and JSON Schema text comes
back as registered, ``schemaType`` is left out for Avro, ``versions/latest`` and ``versions/-1`` both
work, a subject with ``/`` works percent-encoded, 40401/40402/40403 mean what Confluent's do.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Self, TextIO

from aiokafka_lite.testing._download_progress import DownloadProgress
from aiokafka_lite.testing._kafka_jars import cache_root, file_lock, replace_directory, require_tool, run_maven
from aiokafka_lite.testing._process import LOCALHOST, BrokerStartError, BrokerUnavailable, ManagedProcess, wait_until

APICURIO_VERSION = "3.3.3"
JAVA21_HOME_ENV = "AIOKAFKA_LITE_JAVA21_HOME"
CCOMPAT_PATH = "/apis/ccompat/v7"
MINIMUM_JAVA = 21
JVM_DIRECTORIES = [Path("/usr/lib/jvm")]  # where distributions install JDKs side by side
_MARKER = ".complete"
_MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
# Quarkus's start line says "Listening on: http://127.0.0.1:PORT." and then, for the management
# interface, "Management interface listening on http://...": the capital and the colon tell them apart.
_HTTP_LISTENING = re.compile(r"\bListening on: https?://[^\s:/]+:(\d+)")
# confluent-kafka's registry client's request timeout here: a request Apicurio loses (see above) is
# retried after it instead of waited on forever.
CONFLUENT_CLIENT_TIMEOUT_S = 5


def confluent_client_config(url: str) -> dict[str, object]:
    """Settings of confluent-kafka's ``SchemaRegistryClient`` for a registry at ``url`` (its
    Confluent-compatible base): the URL and a request timeout, so that a request Apicurio loses is
    retried by that client rather than waited on forever."""
    return {"url": url, "timeout": CONFLUENT_CLIENT_TIMEOUT_S}


def http_port_of(log_text: str) -> int | None:
    """The HTTP port of the first "Listening on: http://host:PORT" line (not the management port's)."""
    match = _HTTP_LISTENING.search(log_text)
    return int(match.group(1)) if match else None


def java_major(java_home: Path) -> int | None:
    """The major Java version of the JDK/JRE at ``java_home`` (its ``release`` file, else ``java -version``)."""
    try:
        release = (java_home / "release").read_text(errors="replace")
        found = re.search(r'^JAVA_VERSION="([^"]+)"', release, re.MULTILINE)
    except OSError:
        found = None
    text = found.group(1) if found else _java_version_output(java_home / "bin" / "java")
    return _major(text) if text else None


def find_java21() -> str:
    """A ``java`` of version 21 or newer; BrokerUnavailable saying where it looked otherwise."""
    tried: list[str] = []
    for home in _java_homes():
        major = java_major(home)
        tried.append(f"{home} ({major or 'no java'})")
        if major is not None and major >= MINIMUM_JAVA and (home / "bin" / "java").exists():
            return str(home / "bin" / "java")
    on_path = shutil.which("java")
    if on_path is not None:
        text = _java_version_output(Path(on_path))
        major = _major(text) if text else None
        tried.append(f"java on PATH ({major or 'unknown version'})")
        if major is not None and major >= MINIMUM_JAVA:
            return on_path
    raise BrokerUnavailable(f"Apicurio Registry needs Java {MINIMUM_JAVA}+, none found (set {JAVA21_HOME_ENV}); "
                            f"tried: {', '.join(tried) or 'nothing'}")


def _java_homes() -> list[Path]:
    homes = [Path(os.environ[name]) for name in (JAVA21_HOME_ENV, "JAVA_HOME") if os.environ.get(name)]
    for jvm in JVM_DIRECTORIES:
        if jvm.is_dir():
            found = [home for home in sorted(jvm.iterdir()) if (home / "bin" / "java").exists()]
            homes += sorted(found, key=lambda home: -(java_major(home) or 0))  # the newest first
    return homes


def _java_version_output(java: Path) -> str | None:
    if not java.exists():
        return None
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r'version "([^"]+)"', done.stderr)
    return found.group(1) if found else None


def _major(version: str) -> int | None:
    parts = version.split(".")
    try:
        return int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(parts[0].split("-")[0].split("+")[0])
    except ValueError:
        return None


def apicurio_home(version: str = APICURIO_VERSION, *, timeout: float = 900.0, progress: TextIO | None = None) -> Path:
    """The unpacked Apicurio Registry ``version`` (``quarkus-run.jar`` and ``lib/``); downloaded with
    Maven on first use, telling ``progress`` (default ``sys.stderr``). BrokerStartError on failure."""
    root = cache_root()
    target = root / f"apicurio-registry-{version}"
    if _is_complete(target):
        return target
    with file_lock(root / f"apicurio-registry-{version}.lock"):
        if not _is_complete(target):  # another process may have finished while we waited
            _download(version, target, timeout, sys.stderr if progress is None else progress)
    return target


def _is_complete(directory: Path) -> bool:
    return (directory / _MARKER).exists() and (directory / "quarkus-run.jar").exists()


def _download(version: str, target: Path, timeout: float, stream: TextIO) -> None:
    what = f"Apicurio Registry {version}"
    try:
        mvn = require_tool("mvn", f"download {what} from Maven Central")
    except BrokerUnavailable as exc:
        raise BrokerStartError(str(exc)) from None
    staging = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    progress = DownloadProgress(f"{what} (about 160 MB) from Maven Central", stream)
    argv = [mvn, "-B", "-Dstyle.color=never", f"{_MAVEN_DEPENDENCY_PLUGIN}:copy",
            f"-Dartifact=io.apicurio:apicurio-registry-app:{version}:tar.gz:all", f"-DoutputDirectory={staging}"]
    progress.start(str(target))
    started = time.monotonic()
    returncode, timed_out, tail = run_maven(argv, progress, timeout)
    archives = sorted(staging.glob("*.tar.gz"))
    progress.finish(ok=returncode == 0 and len(archives) == 1)
    if returncode != 0 or len(archives) != 1:
        shutil.rmtree(staging, ignore_errors=True)
        why = f"timed out after {timeout:.0f} s" if timed_out else f"exit {returncode}"
        errors = [line.strip() for line in tail if "[ERROR]" in line]
        raise BrokerStartError(f"could not download {what} with Maven ({why}): "
                               f"{errors[0] if errors else (tail[-1].strip() if tail else 'no output')}"[:500])
    try:
        with tarfile.open(archives[0]) as archive:
            archive.extractall(staging, filter="data")
        archives[0].unlink()
    except (OSError, tarfile.TarError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise BrokerStartError(f"could not unpack {what} ({archives[0].name}): {exc}") from exc
    if not (staging / "quarkus-run.jar").exists():
        shutil.rmtree(staging, ignore_errors=True)
        raise BrokerStartError(f"{what}: the archive has no quarkus-run.jar")
    (staging / _MARKER).write_text(f"{version}, {time.monotonic() - started:.0f} s\n")
    replace_directory(target, staging)


class ApicurioRegistry:
    """Apicurio Registry ``version`` in a child process group (``start()`` / ``stop()``, or ``with``)."""

    name = "apicurio-registry"

    def __init__(self, version: str = APICURIO_VERSION, *, startup_timeout: float = 120.0,
                 download_timeout: float = 900.0) -> None:
        self.version = version
        self.startup_timeout = startup_timeout
        self.download_timeout = download_timeout
        self.startup_seconds = 0.0
        self.port: int | None = None
        self._process: ManagedProcess | None = None
        self._tmp: Path | None = None

    @property
    def url(self) -> str:
        """The Confluent-compatible API's base URL."""
        if self.port is None:
            raise BrokerStartError("the Apicurio Registry is not running: start() it first")
        return f"http://{LOCALHOST}:{self.port}{CCOMPAT_PATH}"

    @property
    def pid(self) -> int | None:
        """The process id of the JVM's watchdog, which leads its process group (None when stopped)."""
        return self._process.pid if self._process is not None else None

    def start(self) -> Self:
        if self._process is not None:
            raise BrokerStartError("this ApicurioRegistry was already started")
        java = find_java21()
        home = apicurio_home(self.version, timeout=self.download_timeout)
        self._tmp = Path(tempfile.mkdtemp(prefix="aiokafka-lite-apicurio-"))
        argv = [java, "-Xmx256m", "-XX:+UseSerialGC", f"-Dquarkus.http.host={LOCALHOST}", "-Dquarkus.http.port=0",
                f"-Dquarkus.management.host={LOCALHOST}", "-Dquarkus.management.port=0",
                "-jar", str(home / "quarkus-run.jar")]
        started = time.monotonic()
        try:
            self._process = ManagedProcess(argv, self._tmp / "registry.log", cwd=self._tmp, orphan_cleanup=self._tmp)
            wait_until(self._listening, timeout=self.startup_timeout, process=self._process,
                       what=f"Apicurio Registry {self.version} (its log's 'Listening on' line)")
            self._check_answers()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """Stop the JVM (SIGTERM, then SIGKILL) and delete its working directory. Idempotent."""
        process, self._process = self._process, None
        try:
            if process is not None:
                process.stop(grace=10.0)
        finally:
            self.port = None
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def log_tail(self, max_chars: int = 4000) -> str:
        return self._process.log_tail(max_chars) if self._process is not None else ""

    def _listening(self) -> bool:
        assert self._process is not None
        self.port = http_port_of(self._process.log_tail(1_000_000))
        return self.port is not None

    def _check_answers(self) -> None:
        """The ccompat API answers (the log line alone could come from a half-started server)."""
        try:
            with urllib.request.urlopen(f"{self.url}/subjects", timeout=10) as answer:
                status = answer.status
        except (OSError, urllib.error.URLError) as exc:
            raise BrokerStartError(f"Apicurio Registry {self.version} logged its port but {self.url} does not "
                                   f"answer: {exc}\n{self.log_tail()}") from exc
        if status != 200:
            raise BrokerStartError(f"Apicurio Registry {self.version}: GET {self.url}/subjects answered {status}")
