"""A real single-node Apache Kafka broker (KRaft, combined broker+controller) for tests.

Needs ``java`` (17+) and, on first use of a version, ``mvn`` to fetch the jars from Maven Central
into ``~/.cache/aiokafka-lite/kafka-<version>/``::

    with ApacheKafkaBroker("3.9.2", extra_properties={"auto.create.topics.enable": "false"}) as kafka:
        ...  # kafka.bootstrap_servers == "127.0.0.1:<port>"
        kafka.restart()          # same ports, same data: committed offsets survive
        kafka.kill(); kafka.start()   # crash (SIGKILL) and recover

Extra listeners (TLS, SASL) are named in ``extra_listeners`` as ``{"SSL": "SSL"}`` (listener
name -> security protocol); each gets its own port, and their settings
(``listener.name.ssl.ssl.keystore.location`` ...) go in ``extra_properties``
(``aiokafka_lite.testing.certs`` makes the certificates). ``advertised_ports={"PROXIED": port}``
makes a listener advertise another port (a TCP proxy in front of it), and ``storage_format_args``
go to ``kafka-storage format`` (e.g. ``["--add-scram", "SCRAM-SHA-256=[name=u,password=p]"]``).
``jvm_options`` are added to the broker's JVM command line (an OAUTHBEARER listener validating
tokens against a JWKS needs ``aiokafka_lite.testing.oauth.allowed_urls_jvm_option``), and
``extra_classpath`` entries follow Kafka's jars on its class path (a plugin's classes, e.g. a
``metric.reporters`` class, or a test's own compiled callback handler named by a listener setting in
``extra_properties``).

Share groups (KIP-932) work on a 4.x broker as started: formatting enables the ``share.version``
feature, and ``SHARE_GROUP_TEST_PROPERTIES`` shortens their timings (heartbeat 500 ms, session
10 s) and lets a group's acquisition lock be as short as 1 s (Kafka's default of 30 s stays). A
share group starts at the log's end unless its ``share.auto.offset.reset`` group config says
``earliest``; set it, or a short lock for one group, with
``aiokafka_lite.testing.helpers.set_group_config``. ``extra_properties`` override any of them.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from aiokafka_lite.testing._kafka_jars import LOG4J2_TO_FILE, kafka_jars, require_tool
from aiokafka_lite.testing._probe import kafka_ready
from aiokafka_lite.testing._process import (
    LOCALHOST,
    BrokerStartError,
    ManagedProcess,
    free_port,
    port_open,
    wait_until,
)

SUPPORTED_VERSIONS = ("4.4.0", "4.3.1", "3.9.2")
NEWEST_VERSION = SUPPORTED_VERSIONS[0]
# The newest 3.9.x: the last line before Kafka 4.0 removed old protocol versions (KIP-896), whose
# share groups were an early access preview.
LAST_3X_VERSION = "3.9.2"
# What ApacheKafkaBroker() and the fixtures start: the newest, unless a run names another
# (CI's compatibility run: AIOKAFKA_LITE_KAFKA_VERSION=4.3.1).
VERSION_VARIABLE = "AIOKAFKA_LITE_KAFKA_VERSION"


def _chosen_version() -> str:
    chosen = os.environ.get(VERSION_VARIABLE) or NEWEST_VERSION
    if chosen not in SUPPORTED_VERSIONS:
        raise ValueError(f"{VERSION_VARIABLE}={chosen!r}: the fixtures start one of {', '.join(SUPPORTED_VERSIONS)}")
    return chosen


DEFAULT_VERSION = _chosen_version()

# Settings that make a one-node broker quick to start and friendly to short test timeouts.
FAST_TEST_PROPERTIES: dict[str, str] = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    # KIP-848 consumer groups: the broker sets the heartbeat interval (5 s by default, and no
    # lower than its minimum, also 5 s); faster rebalances for the consumer-protocol tests.
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.session.timeout.ms": "1000",
    # After a SIGKILL the controller refuses the broker's new registration until the old one's
    # session lapses (9 s by default); a short session makes kill-and-restart quick.
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "num.partitions": "1",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "log.cleaner.dedupe.buffer.size": "8388608",
}

# KIP-932 share groups (Kafka 4.x; formatting a 4.3 cluster already enables the share.version
# feature): test-friendly timings, the shortest the broker allows where it matters. 3.9.x's early
# access share groups are left alone.
SHARE_GROUP_TEST_PROPERTIES: dict[str, str] = {
    "group.share.heartbeat.interval.ms": "500",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.session.timeout.ms": "10000",
    "group.share.min.session.timeout.ms": "1000",
    # Acquired records are released for redelivery after the lock (30 s by default) lapses without an
    # acknowledgement: a redelivery test sets its group's share.record.lock.duration.ms this short.
    "group.share.min.record.lock.duration.ms": "1000",
    # The share-group state topic has 50 partitions by default: slow to create on first use.
    "share.coordinator.state.topic.num.partitions": "4",
}

_LOG4J2 = LOG4J2_TO_FILE + """\
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
"""

# C1-only JIT and the serial collector start a small broker seconds faster, and tests never run
# long enough for C2's better code to pay off.
_JVM_OPTS = ["-Xms256m", "-Xmx768m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData",
             "-Djava.awt.headless=true", "-XX:+ExitOnOutOfMemoryError"]


def _errors(path: Path, max_lines: int = 12) -> str:
    """A broker log's ERROR lines and the causes under them (the shutdown that follows a failed
    start fills the log's end with INFO lines)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"(unreadable: {exc})"
    said = [line for line in lines if " ERROR " in line or " FATAL " in line or line.startswith("Caused by")]
    return "\n".join(said[:max_lines]) or "\n".join(lines[-20:])


def _new_port(avoid: set[int]) -> int:
    while True:
        port = free_port()
        if port not in avoid:
            avoid.add(port)
            return port


def new_cluster_id() -> str:
    # One id in 64 would start with "-", which kafka-storage's argument parser takes for an
    # option ("argument --cluster-id/-t: expected one argument"); Kafka's own Uuid.randomUuid()
    # skips those for the same reason.
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass(frozen=True)
class NodeRole:
    """What one process of a cluster is (the default: a one-node cluster, broker and controller)."""

    node_id: int = 1
    broker: bool = True
    controller: bool = True
    quorum: str | None = None  # controller.quorum.voters; None: this node alone
    cluster_id: str | None = None  # every node of a cluster is formatted with the same id
    ports: Mapping[str, int] = field(default_factory=dict)  # listener -> port, fixed in advance
    properties: Mapping[str, str] = field(default_factory=dict)  # this node's own settings

    @property
    def kind(self) -> str:
        return "broker" if self.broker and not self.controller else "controller" if not self.broker else "combined"


class ApacheKafkaBroker:
    """One Kafka broker process on free 127.0.0.1 ports; ``stop()`` removes the process and its data."""

    def __init__(self, version: str = DEFAULT_VERSION, *,
                 extra_properties: Mapping[str, str] | None = None,
                 extra_listeners: Mapping[str, str] | None = None,
                 advertised_ports: Mapping[str, int] | None = None,
                 storage_format_args: Sequence[str] = (),
                 start_timeout: float = 120.0,
                 node: NodeRole | None = None,
                 log_levels: Mapping[str, str] | None = None,
                 jvm_options: Sequence[str] = (),
                 extra_classpath: Sequence[str | Path] = ()) -> None:
        self.version = version
        self.node = node or NodeRole()
        self.name = f"kafka-{version}" if node is None else f"kafka-{version}-{self.node.kind}-{self.node.node_id}"
        self.extra_properties = dict(extra_properties or {})
        self.extra_listeners = dict(extra_listeners or {})
        self.advertised_ports = dict(advertised_ports or {})
        self.storage_format_args = tuple(storage_format_args)
        self.start_timeout = start_timeout
        self.log_levels = dict(log_levels or {})  # logger -> level in server.log, e.g. kafka.request.logger
        self.jvm_options = tuple(jvm_options)  # e.g. -D system properties (testing.oauth's allowed URLs)
        # Directories or jars after Kafka's own, e.g. a test's compiled callback handler.
        self.extra_classpath = tuple(str(entry) for entry in extra_classpath)
        self.ports: dict[str, int] = {}
        self.startup_seconds = 0.0
        self._tmp: Path | None = None
        self._jars: Path | None = None
        self._process: ManagedProcess | None = None

    # -- addresses -----------------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self.node.node_id

    @property
    def port(self) -> int:
        return self.listener_port("PLAINTEXT")

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOCALHOST}:{self.port}"

    def listener_port(self, listener: str) -> int:
        if listener not in self.ports:
            raise RuntimeError(f"{self.name} has no {listener!r} listener (started? {sorted(self.ports)})")
        return self.ports[listener]

    @property
    def log_path(self) -> Path:
        if self._tmp is None:
            raise RuntimeError(f"{self.name} was never started")
        return self._tmp / "server.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def running(self) -> bool:
        return self._process is not None and not self._process.exited()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> ApacheKafkaBroker:
        """Start the broker (first call: fetch jars, pick ports, format storage) and wait until ready."""
        if self._process is not None:
            return self
        began = time.monotonic()
        if self._tmp is None:
            self._prepare()
        self._launch()
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after a grace period) and delete its data."""
        try:
            self.shutdown()
        finally:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
                self.ports = {}

    def shutdown(self, *, kill: bool = False) -> None:
        """Stop the process but keep ports and data, so ``start()`` brings the same broker back."""
        process, self._process = self._process, None
        if process is None:
            return
        if kill:
            process.kill()
        process.stop(grace=20.0)

    def kill(self) -> None:
        """SIGKILL the broker (an unclean crash); ``start()`` or ``restart()`` recovers it."""
        self.shutdown(kill=True)

    def restart(self, *, kill: bool = False) -> None:
        """Stop (cleanly, or by SIGKILL) and start again on the same ports with the same data."""
        self.shutdown(kill=kill)
        self.start()

    def relocate(self) -> None:
        """Stop (SIGTERM) and start again with the same data on new ports: the old address goes
        dead, as when a machine is replaced. Fixed ports (``NodeRole.ports``) and advertised
        overrides stay; every other listener gets a port it never had."""
        self.shutdown()
        workdir = self._workdir()
        old = set(self.ports.values())
        self.ports = {name: _new_port(old) for name in self.ports if name not in self.node.ports}
        self.ports.update(self.node.ports)
        (workdir / "server.properties").write_text(self._server_properties())
        self._launch()

    def __enter__(self) -> ApacheKafkaBroker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- internals -----------------------------------------------------------------------------

    def _java(self) -> str:
        return require_tool("java", f"run Apache Kafka {self.version}")

    def _prepare(self) -> None:
        java = self._java()
        self._jars = kafka_jars(self.version)
        self._tmp = Path(tempfile.mkdtemp(prefix=f"aiokafka-lite-{self.name}-"))
        try:
            self.ports = {name: free_port() for name in self._protocols() if name not in self.node.ports}
            self.ports.update(self.node.ports)
            loggers = "".join(f"logger.extra{i}.name = {name}\nlogger.extra{i}.level = {level}\n"
                              for i, (name, level) in enumerate(self.log_levels.items()))
            (self._tmp / "log4j2.properties").write_text(_LOG4J2.format(log_file=self.log_path) + loggers)
            (self._tmp / "server.properties").write_text(self._server_properties())
            self._format_storage(java)
        except BaseException:
            self.stop()
            raise

    def _protocols(self) -> dict[str, str]:
        """Listener name -> security protocol of the listeners this node opens."""
        protocols = {}
        if self.node.broker:
            protocols["PLAINTEXT"] = "PLAINTEXT"
        if self.node.controller:
            protocols["CONTROLLER"] = "PLAINTEXT"
        return {**protocols, **(self.extra_listeners if self.node.broker else {})}

    def _server_properties(self) -> str:
        protocols = self._protocols()
        listeners = ",".join(f"{name}://{LOCALHOST}:{self.ports[name]}" for name in protocols)
        advertised = ",".join(f"{name}://{LOCALHOST}:{self.advertised_ports.get(name, self.ports[name])}"
                              for name in protocols if name != "CONTROLLER")
        voters = self.node.quorum or f"{self.node_id}@{LOCALHOST}:{self.ports['CONTROLLER']}"
        props = {
            "process.roles": ",".join(role for role, on in (("broker", self.node.broker),
                                                             ("controller", self.node.controller)) if on),
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "listeners": listeners,
            "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in
                                                       {**protocols, "CONTROLLER": "PLAINTEXT"}.items()),
            "log.dirs": str(self._workdir() / "data"),
            **FAST_TEST_PROPERTIES,
            **(SHARE_GROUP_TEST_PROPERTIES if int(self.version.split(".")[0]) >= 4 else {}),
            **self.node.properties,
            **self.extra_properties,
        }
        if self.node.broker:
            props.update({"inter.broker.listener.name": "PLAINTEXT", "advertised.listeners": advertised})
        return "".join(f"{key}={value}\n" for key, value in props.items())

    def _workdir(self) -> Path:
        if self._tmp is None:
            raise RuntimeError(f"{self.name} has no working directory (stopped)")
        return self._tmp

    def _java_argv(self, java: str, main_class: str, *args: str) -> list[str]:
        if self._jars is None:
            self._jars = kafka_jars(self.version)
        log4j = self._workdir() / "log4j2.properties"
        return [java, *_JVM_OPTS, *self.jvm_options, f"-Dlog4j2.configurationFile={log4j}",
                "-cp", os.pathsep.join((f"{self._jars}/*", *self.extra_classpath)), main_class, *args]

    def _format_storage(self, java: str) -> None:
        cluster_id = self.node.cluster_id or new_cluster_id()
        argv = self._java_argv(java, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                               "-c", str(self._workdir() / "server.properties"), *self.storage_format_args)
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise BrokerStartError(f"{self.name}: formatting storage failed:\n"
                                   f"{(result.stdout + result.stderr)[-3000:]}")

    def _launch(self) -> None:
        workdir = self._workdir()
        argv = self._java_argv(self._java(), "kafka.Kafka", str(workdir / "server.properties"))
        self._process = ManagedProcess(argv, workdir / "stdout.log", cwd=workdir, orphan_cleanup=workdir)
        port = self.port if self.node.broker else self.listener_port("CONTROLLER")
        # A controller serves no Metadata to clients: listening is all it can show.
        ready = (lambda: kafka_ready(LOCALHOST, port)) if self.node.broker else (lambda: port_open(LOCALHOST, port))
        try:
            wait_until(ready, timeout=self.start_timeout, what=f"{self.name} on port {port} (log {self.log_path})",
                       process=self._process, interval=0.1)
        except BrokerStartError as exc:
            self.shutdown(kill=True)
            # The JVM's stdout is nearly empty: why it stopped is in its log, deleted with its directory.
            raise BrokerStartError(f"{exc}\n{self.log_path.name} says:\n{_errors(self.log_path)}") from None
        except BaseException:
            self.shutdown(kill=True)
            raise
