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

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing._java_tool import JVM_OPTS, JavaClientError, JavaEventTool, ToolEvents, tp_of
from aiokafka_lite.testing._kafka_jars import kafka_jars, require_tool
from aiokafka_lite.testing.apache_kafka import DEFAULT_VERSION

__all__ = ["ASSIGNORS", "ConsumedRange", "ConsumerEvents", "JavaClientError", "VerifiableConsumer", "run_kafka_tool"]

MAIN_CLASS = "org.apache.kafka.tools.VerifiableConsumer"

# Short names for the classic protocol's client-side assignors; a full class name passes through.
ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "sticky": "org.apache.kafka.clients.consumer.StickyAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}

# How Kafka's bin scripts start a tool: kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS (the server
# compiler, G1) with the 512 MB heap its perf-test scripts set. For a tool whose speed is measured.
KAFKA_TOOL_JVM_OPTIONS = ("-Xmx512M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                          "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                          "-Djava.awt.headless=true")


@dataclass(frozen=True)
class ConsumedRange:
    """Records of one partition handed out by one ``poll()``: offsets ``first``..``last``, ``count`` records."""

    first: int
    last: int
    count: int


@dataclass
class ConsumerEvents(ToolEvents):
    """What the events printed so far say. Pure bookkeeping, fed one parsed event at a time."""

    assignment: set[TopicPartition] = field(default_factory=set)
    consumed: dict[TopicPartition, list[ConsumedRange]] = field(default_factory=dict)
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    failed_commits: list[dict[str, Any]] = field(default_factory=list)

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
                self.consumed.setdefault(tp_of(p), []).append(
                    ConsumedRange(p["minOffset"], p["maxOffset"], p["count"]))
        elif name == "offsets_committed":
            if event.get("success", False):
                self.committed.update({tp_of(o): o["offset"] for o in event["offsets"]})
            else:
                self.failed_commits.append(event)


def _partitions(items: list[Mapping[str, Any]]) -> set[TopicPartition]:
    return {tp_of(item) for item in items}


class VerifiableConsumer(JavaEventTool[ConsumerEvents]):
    """Kafka's Java ``VerifiableConsumer`` in a child process; see the module docstring."""

    MAIN_CLASS = MAIN_CLASS

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
        super().__init__(ConsumerEvents(), bootstrap_servers, topic, group_id,
                         _options(group_protocol, assignment_strategy, group_remote_assignor, group_instance_id,
                                  enable_autocommit, reset_policy, max_messages, session_timeout_ms),
                         properties, kafka_version)
        self.group_protocol = group_protocol

    # -- what the events say (copies, safe to keep) --------------------------------------------

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
    options = JVM_OPTS if jvm_options is None else list(jvm_options)
    return subprocess.run([java, *options, "-cp", f"{jars}/*", main_class, *args], capture_output=True,
                          text=True, timeout=timeout, check=False)
