"""Kafka's own Java test consumer as a peer in your tests: ``VerifiableConsumer``.

Apache Kafka's system tests drive ``org.apache.kafka.tools.VerifiableConsumer``, a KafkaConsumer
that prints one JSON event per line (``startup_complete``, ``partitions_assigned``,
``partitions_revoked``, ``records_consumed``, ``offsets_committed``, ``shutdown_complete``). This
wrapper runs it in its own process group and keeps what the events say: the current assignment, the
offset ranges consumed per partition and the offsets committed. It needs ``java`` (17+) and the
Kafka jars (``mvn`` fetches them on first use, as for ``ApacheKafkaBroker``)::

    from aiokafka_lite.testing.java_clients import VerifiableConsumer

    with VerifiableConsumer(broker.bootstrap_servers, "orders", "billing",
                            group_protocol="consumer") as java:      # KIP-848; or "classic"
        java.wait_for(lambda: java.consumed_count() >= 100, timeout=60, what="100 records")
        java.assignment            # frozenset of TopicPartition held right now
        java.consumed[tp]          # [ConsumedRange(first, last, count), ...] in consumption order
        java.committed             # {TopicPartition: next offset to read} (successful commits only)
        java.stop()                # SIGTERM: the consumer leaves its group, then shutdown_complete

Without ``enable_autocommit`` the tool commits synchronously after every poll (and reports each
commit); with it, Kafka's auto-commit runs and no ``offsets_committed`` events appear. The JVM never
outlives the wrapper: ``__exit__`` and errors in ``start()`` stop it, and a watchdog kills the whole
process group if the Python process dies first. Logs (log4j2, stderr) go to a file whose tail is
quoted in every error; stdout carries only the events.

``run_kafka_tool(main_class, args)`` runs one of Kafka's command-line tools from the same jars to
its end (``ConsumerGroupCommand`` is what kafka-consumer-groups.sh runs).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing._kafka_jars import kafka_jars, require_tool
from aiokafka_lite.testing._process import ManagedProcess
from aiokafka_lite.testing.apache_kafka import DEFAULT_VERSION

MAIN_CLASS = "org.apache.kafka.tools.VerifiableConsumer"

# Short names for the classic protocol's client-side assignors; a full class name passes through.
ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "sticky": "org.apache.kafka.clients.consumer.StickyAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}

# A small client: C1 only and the serial collector start it in about a second.
_JVM_OPTS = ["-Xms64m", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData",
             "-Djava.awt.headless=true", "-XX:+ExitOnOutOfMemoryError"]

# How Kafka's bin scripts start a tool: kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS (the server
# compiler, G1) with the 512 MB heap its perf-test scripts set. For a tool whose speed is measured.
KAFKA_TOOL_JVM_OPTIONS = ("-Xmx512M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                          "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                          "-Djava.awt.headless=true")

# Everything log4j2 says goes to a file, so stdout holds nothing but the tool's JSON events.
_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""


class JavaClientError(RuntimeError):
    """The Java client exited early, reported a failure, or did not reach a state in time."""


@dataclass(frozen=True)
class ConsumedRange:
    """Records of one partition handed out by one ``poll()``: offsets ``first``..``last``, ``count`` records."""

    first: int
    last: int
    count: int


@dataclass
class ConsumerEvents:
    """What the events printed so far say. Pure bookkeeping, fed one parsed event at a time."""

    events: list[dict[str, Any]] = field(default_factory=list)
    assignment: set[TopicPartition] = field(default_factory=set)
    consumed: dict[TopicPartition, list[ConsumedRange]] = field(default_factory=dict)
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    failed_commits: list[dict[str, Any]] = field(default_factory=list)
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
        name = event["name"]
        # With the cooperative protocols (cooperative-sticky, KIP-848 "consumer") the listener
        # hears only what changed; with eager ones all is revoked, then all assigned. Adding and
        # removing covers both.
        if name == "partitions_assigned":
            self.assignment |= _partitions(event["partitions"])
        elif name == "partitions_revoked":
            self.assignment -= _partitions(event["partitions"])
        elif name == "records_consumed":
            for p in event["partitions"]:
                self.consumed.setdefault(_tp(p), []).append(
                    ConsumedRange(p["minOffset"], p["maxOffset"], p["count"]))
        elif name == "offsets_committed":
            if event.get("success", False):
                self.committed.update({_tp(o): o["offset"] for o in event["offsets"]})
            else:
                self.failed_commits.append(event)

    def seen(self, name: str) -> bool:
        return any(e["name"] == name for e in self.events)


def _tp(item: Mapping[str, Any]) -> TopicPartition:
    return TopicPartition(item["topic"], item["partition"])


def _partitions(items: list[Mapping[str, Any]]) -> set[TopicPartition]:
    return {_tp(item) for item in items}


class VerifiableConsumer:
    """Kafka's Java ``VerifiableConsumer`` in a child process; see the module docstring."""

    def __init__(self, bootstrap_servers: str, topic: str, group_id: str, *,
                 group_protocol: str = "classic", assignment_strategy: str | None = None,
                 group_remote_assignor: str | None = None, group_instance_id: str | None = None,
                 enable_autocommit: bool = False, reset_policy: str = "earliest",
                 max_messages: int | None = None, session_timeout_ms: int | None = None,
                 properties: Mapping[str, str] | None = None,
                 kafka_version: str = DEFAULT_VERSION) -> None:
        if group_protocol not in ("classic", "consumer"):
            raise ValueError(f"group_protocol must be 'classic' or 'consumer', not {group_protocol!r}")
        # The Java consumer refuses the classic-only settings under KIP-848 and vice versa;
        # saying so here beats a stack trace in a log file.
        if group_protocol == "consumer" and (assignment_strategy or session_timeout_ms is not None):
            raise ValueError("assignment_strategy and session_timeout_ms are classic-protocol settings; "
                             "with group_protocol='consumer' the broker assigns (group_remote_assignor) "
                             "and owns the session timeout (group.consumer.session.timeout.ms)")
        if group_protocol == "classic" and group_remote_assignor:
            raise ValueError("group_remote_assignor needs group_protocol='consumer'")
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.group_id = group_id
        self.group_protocol = group_protocol
        self.kafka_version = kafka_version
        self._options = _options(group_protocol, assignment_strategy, group_remote_assignor,
                                 group_instance_id, enable_autocommit, reset_policy, max_messages,
                                 session_timeout_ms)
        self._properties = dict(properties or {})
        self._state = ConsumerEvents()
        self._changed = threading.Condition(threading.RLock())
        self._process: ManagedProcess | None = None
        self._reader: threading.Thread | None = None
        self._stdout_closed = False
        self._tmp: Path | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> VerifiableConsumer:
        """Launch the JVM and wait for ``startup_complete`` (printed just before it subscribes)."""
        if self._process is not None:
            raise JavaClientError("this VerifiableConsumer was already started")
        try:
            self._launch()
            self.wait_for(lambda: self._state.seen("startup_complete"), timeout=timeout,
                          what="startup_complete")
        except BaseException:
            self.stop(graceful=False)
            raise
        return self

    def stop(self, graceful: bool = True, timeout: float = 30.0) -> bool:
        """Stop the JVM; True when it printed ``shutdown_complete`` (closed the consumer, left the group).

        ``graceful``: SIGTERM (Java's shutdown hook closes the consumer), SIGKILL after ``timeout``;
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
        """SIGKILL the JVM (a crash: no LeaveGroup, no final commit)."""
        self.stop(graceful=False)

    def __enter__(self) -> VerifiableConsumer:
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

    # -- what the events say (copies, safe to keep) --------------------------------------------

    @property
    def events(self) -> list[dict[str, Any]]:
        with self._changed:
            return list(self._state.events)

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        with self._changed:
            return frozenset(self._state.assignment)

    @property
    def consumed(self) -> dict[TopicPartition, list[ConsumedRange]]:
        with self._changed:
            return {tp: list(ranges) for tp, ranges in self._state.consumed.items()}

    @property
    def committed(self) -> dict[TopicPartition, int]:
        with self._changed:
            return dict(self._state.committed)

    @property
    def failed_commits(self) -> list[dict[str, Any]]:
        with self._changed:
            return list(self._state.failed_commits)

    def consumed_count(self, tp: TopicPartition | None = None) -> int:
        """Records consumed from ``tp``, or from every partition."""
        with self._changed:
            ranges = (self._state.consumed.get(tp, []) if tp is not None
                      else [r for rs in self._state.consumed.values() for r in rs])
            return sum(r.count for r in ranges)

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str = "condition") -> None:
        """Block until ``predicate()`` (re-checked after every event) holds; JavaClientError if the
        process exits first or ``timeout`` seconds pass."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate() or self._stdout_closed, timeout):
                raise JavaClientError(f"VerifiableConsumer: {what} not reached in {timeout} s"
                                      f"{self._diagnostics()}")
            if not predicate():
                raise JavaClientError(f"VerifiableConsumer exited before {what}{self._diagnostics()}")

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
        java = require_tool("java", "run Kafka's Java VerifiableConsumer")
        jars = kafka_jars(self.kafka_version)
        self._tmp = Path(tempfile.mkdtemp(prefix="aiokafka-lite-java-consumer-"))
        (self._tmp / "log4j2.properties").write_text(_LOG4J2.format(log_file=self._tmp / "client.log"))
        argv = [java, *_JVM_OPTS, f"-Dlog4j2.configurationFile={self._tmp / 'log4j2.properties'}",
                "-cp", f"{jars}/*", MAIN_CLASS, "--bootstrap-server", self.bootstrap_servers,
                "--topic", self.topic, "--group-id", self.group_id, *self._options,
                *self._config_file_options()]
        self._process = ManagedProcess(argv, self._tmp / "stderr.log", cwd=self._tmp,
                                       orphan_cleanup=self._tmp, capture_stdout=True)
        stdout = self._process.popen.stdout
        if stdout is None:
            raise JavaClientError("no stdout pipe to read the events from")
        self._reader = threading.Thread(target=self._read_events, args=(stdout,),
                                        name=f"VerifiableConsumer-{self.group_id}", daemon=True)
        self._reader.start()

    def _config_file_options(self) -> list[str]:
        if not self._properties or self._tmp is None:
            return []
        path = self._tmp / "consumer.properties"
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


def _options(group_protocol: str, assignment_strategy: str | None, group_remote_assignor: str | None,
             group_instance_id: str | None, enable_autocommit: bool, reset_policy: str,
             max_messages: int | None, session_timeout_ms: int | None) -> list[str]:
    """The tool's command-line options (the same in Kafka 3.9 and 4.x) for these settings."""
    options = ["--group-protocol", group_protocol, "--reset-policy", reset_policy]
    if assignment_strategy:
        options += ["--assignment-strategy", ASSIGNORS.get(assignment_strategy, assignment_strategy)]
    if group_remote_assignor:
        options += ["--group-remote-assignor", group_remote_assignor]
    if group_instance_id is not None:
        options += ["--group-instance-id", group_instance_id]
    if enable_autocommit:
        options.append("--enable-autocommit")
    if max_messages is not None:
        options += ["--max-messages", str(max_messages)]
    if session_timeout_ms is not None:
        options += ["--session-timeout", str(session_timeout_ms)]
    return options


def run_kafka_tool(main_class: str, args: list[str], *, kafka_version: str = DEFAULT_VERSION,
                   timeout: float = 60.0, jvm_options: Sequence[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line tools from the broker's jars to its end, e.g.
    ``run_kafka_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", ["--bootstrap-server",
    servers, "--list"])`` (what kafka-consumer-groups.sh runs); stdout and stderr as text. Its log4j2
    says nothing below ERROR (its default), so stdout holds only what the tool prints.

    ``jvm_options`` replaces the small, quick-starting JVM settings used by default (C1 only, a
    256 MB serial-GC heap), e.g. with ``KAFKA_TOOL_JVM_OPTIONS`` for a tool that is timed."""
    java = require_tool("java", f"run Kafka's {main_class}")
    jars = kafka_jars(kafka_version)
    options = _JVM_OPTS if jvm_options is None else list(jvm_options)
    return subprocess.run([java, *options, "-cp", f"{jars}/*", main_class, *args], capture_output=True,
                          text=True, timeout=timeout, check=False)
