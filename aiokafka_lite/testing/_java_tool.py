"""What Kafka's Java test clients (VerifiableConsumer, VerifiableShareConsumer) share when they run
as a child process: the JVM options, the log4j2 setup, and ``JavaEventTool``, which launches the
tool in its own process group (ManagedProcess: a watchdog kills the group if Python dies first),
reads its JSON events from stdout on a thread and feeds them to a ``ToolEvents``, waits for
conditions on them, and stops it (SIGTERM, then SIGKILL). Logs (log4j2, stderr) go to files whose
tail is quoted in every error.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, ClassVar, Generic, Self, TypeVar

from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing._kafka_jars import LOG4J2_TO_FILE, kafka_jars, require_tool
from aiokafka_lite.testing._process import ManagedProcess

# A small client: C1 only and the serial collector start it in about a second.
JVM_OPTS = ["-Xms64m", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData",
            "-Djava.awt.headless=true", "-XX:+ExitOnOutOfMemoryError"]

# Everything log4j2 says goes to a file, so stdout holds nothing but the tool's JSON events.
LOG4J2 = LOG4J2_TO_FILE


class JavaClientError(RuntimeError):
    """The Java client exited early, reported a failure, or did not reach a state in time."""


@dataclass
class ToolEvents:
    """The events printed so far; subclasses keep what they say in ``apply``."""

    events: list[dict[str, Any]] = field(default_factory=list)
    stray_output: list[str] = field(default_factory=list)  # stdout lines that were not JSON events

    def feed_line(self, line: str) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if not isinstance(event, dict) or "name" not in event:
            self.stray_output.append(line)
            return
        self.apply(event)

    def apply(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def seen(self, name: str) -> bool:
        return any(e["name"] == name for e in self.events)


def tp_of(item: Mapping[str, Any]) -> TopicPartition:
    return TopicPartition(item["topic"], item["partition"])


E = TypeVar("E", bound=ToolEvents)


class JavaEventTool(Generic[E]):
    """One of Kafka's Verifiable* tools in a child process, its events kept in ``self._state``."""

    MAIN_CLASS: ClassVar[str]

    def __init__(self, state: E, bootstrap_servers: str, topic: str, group_id: str, options: list[str],
                 properties: Mapping[str, str] | None, kafka_version: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.group_id = group_id
        self.kafka_version = kafka_version
        self._options = options
        self._properties = dict(properties or {})
        self._state = state
        self._changed = threading.Condition(threading.RLock())
        self._process: ManagedProcess | None = None
        self._reader: threading.Thread | None = None
        self._stdout_closed = False
        self._tmp: Path | None = None

    @property
    def _name(self) -> str:
        return type(self).__name__

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> Self:
        """Launch the JVM and wait for ``startup_complete``."""
        if self._process is not None:
            raise JavaClientError(f"this {self._name} was already started")
        try:
            self._launch()
            self.wait_for(lambda: self._state.seen("startup_complete"), timeout=timeout,
                          what="startup_complete")
        except BaseException:
            self.stop(graceful=False)
            raise
        return self

    def stop(self, graceful: bool = True, timeout: float = 30.0) -> bool:
        """Stop the JVM; True when it printed ``shutdown_complete`` (closed the client, left the group).

        ``graceful``: SIGTERM (Java's shutdown hook closes the client), SIGKILL after ``timeout``;
        otherwise SIGKILL at once, as a crash: the group notices only when the session lapses.
        """
        process, self._process = self._process, None
        if process is None:
            return self._state.seen("shutdown_complete")
        try:
            if not graceful:
                process.kill()
            process.stop(grace=timeout)
            if self._reader is not None:
                self._reader.join(timeout)
        finally:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
        with self._changed:
            return self._state.seen("shutdown_complete")

    def kill(self) -> None:
        """SIGKILL the JVM (a crash: no leave, no final acknowledgement or commit)."""
        self.stop(graceful=False)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop(graceful=exc is None)

    @property
    def pid(self) -> int | None:
        """The process id of the JVM's watchdog, which leads its process group (None when stopped)."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and not self._process.exited()

    @property
    def events(self) -> list[dict[str, Any]]:
        with self._changed:
            return list(self._state.events)

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str = "condition") -> None:
        """Block until ``predicate()`` (re-checked after every event) holds; JavaClientError if the
        process exits first or ``timeout`` seconds pass."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate() or self._stdout_closed, timeout):
                raise JavaClientError(f"{self._name}: {what} not reached in {timeout} s{self._diagnostics()}")
            if not predicate():
                raise JavaClientError(f"{self._name} exited before {what}{self._diagnostics()}")

    def log_tail(self, max_chars: int = 4000) -> str:
        if self._tmp is None:
            return ""
        parts = []
        for name in ("client.log", "stderr.log"):
            try:
                parts.append((self._tmp / name).read_text(errors="replace")[-max_chars:])
            except OSError:
                continue
        return "\n".join(parts)

    # -- internals -----------------------------------------------------------------------------

    def _launch(self) -> None:
        java = require_tool("java", f"run Kafka's Java {self._name}")
        jars = kafka_jars(self.kafka_version)
        self._tmp = Path(tempfile.mkdtemp(prefix=f"aiokafka-lite-{self._name.lower()}-"))
        (self._tmp / "log4j2.properties").write_text(LOG4J2.format(log_file=self._tmp / "client.log"))
        argv = [java, *JVM_OPTS, f"-Dlog4j2.configurationFile={self._tmp / 'log4j2.properties'}",
                "-cp", f"{jars}/*", self.MAIN_CLASS, "--bootstrap-server", self.bootstrap_servers,
                "--topic", self.topic, "--group-id", self.group_id, *self._options,
                *self._config_file_options()]
        self._process = ManagedProcess(argv, self._tmp / "stderr.log", cwd=self._tmp,
                                       orphan_cleanup=self._tmp, capture_stdout=True)
        stdout = self._process.popen.stdout
        if stdout is None:
            raise JavaClientError("no stdout pipe to read the events from")
        self._reader = threading.Thread(target=self._read_events, args=(stdout,),
                                        name=f"{self._name}-{self.group_id}", daemon=True)
        self._reader.start()

    def _config_file_options(self) -> list[str]:
        if not self._properties or self._tmp is None:
            return []
        path = self._tmp / "client.properties"
        path.write_text("".join(f"{key}={value}\n" for key, value in self._properties.items()))
        # 4.1 renamed --consumer.config (now deprecated) to --command-config (KIP-1147).
        major, minor = (int(part) for part in self.kafka_version.split(".")[:2])
        return ["--command-config" if (major, minor) >= (4, 1) else "--consumer.config", str(path)]

    def _read_events(self, stdout: IO[bytes]) -> None:
        try:
            for raw in stdout:
                line = raw.decode("utf-8", errors="replace").strip()
                if line:
                    with self._changed:
                        self._state.feed_line(line)
                        self._changed.notify_all()
        finally:
            stdout.close()
            with self._changed:
                self._stdout_closed = True
                self._changed.notify_all()

    def _diagnostics(self) -> str:
        stray = "".join(f"\n  {line}" for line in self._state.stray_output[-10:])
        return (f"; last events {[e['name'] for e in self._state.events[-5:]]}"
                f"{'; other output:' + stray if stray else ''}\n{self.log_tail()}")
