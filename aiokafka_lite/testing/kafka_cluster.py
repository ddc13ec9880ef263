"""A real Apache Kafka KRaft cluster for tests: one controller process and three brokers.

Kafka runs its controllers apart from the brokers in production (isolated mode); one controller
is the quorum that fits two cores, and it keeps broker restarts cheap: no broker's loss stalls the
metadata log. Replicated topics (replication factor 3, ``min.insync.replicas`` 2) then survive
any single broker going down::

    with KafkaCluster(racks={1: "a", 2: "b", 3: "c"}) as cluster:
        cluster.create_topic("orders", partitions=6)       # RF 3, min.insync.replicas 2
        leader = cluster.leader_of(TopicPartition("orders", 0))
        cluster.move_leader(TopicPartition("orders", 0), to=2)   # every broker stays up
        cluster.restart_broker(leader)                      # SIGTERM, start, wait until back in the ISR
        cluster.kill_broker(cluster.coordinator_of("group-1"))   # SIGKILL
        cluster.start_broker(...)

Every broker listens on its own free 127.0.0.1 port; ``bootstrap_servers`` names all three.
Needs ``java`` (17+), like :class:`ApacheKafkaBroker`.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing._kafka_jars import kafka_jars, require_tool
from aiokafka_lite.testing._process import LOCALHOST, free_port, port_open
from aiokafka_lite.testing.apache_kafka import DEFAULT_VERSION, ApacheKafkaBroker, NodeRole, new_cluster_id

BROKER_IDS = (1, 2, 3)
CONTROLLER_ID = 100
# Replicated internal topics, as a production cluster has them (the one-node defaults are 1).
CLUSTER_PROPERTIES: dict[str, str] = {
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    # A follower that stops fetching leaves the ISR after this long (30 s by default).
    "replica.lag.time.max.ms": "5000",
}
RACK_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


class KafkaCluster:
    """Three brokers and a controller; brokers are stopped, killed and started one at a time."""

    def __init__(self, version: str = DEFAULT_VERSION, *, racks: Mapping[int, str] | None = None,
                 broker_properties: Mapping[str, str] | None = None, start_timeout: float = 120.0,
                 request_log: bool = False) -> None:
        """``racks``: broker id -> ``broker.rack`` (turns on Kafka's RackAwareReplicaSelector, KIP-392).
        ``request_log``: each broker writes every request it completes to its server.log (Kafka's
        ``kafka.request.logger`` at DEBUG), so a test can see which broker served which client."""
        self.version = version
        self.name = f"kafka-{version} cluster"
        self.startup_seconds = 0.0
        cluster_id = new_cluster_id()
        controller_port = free_port()
        quorum = f"{CONTROLLER_ID}@{LOCALHOST}:{controller_port}"
        shared = {**CLUSTER_PROPERTIES, **(broker_properties or {})}
        if racks:
            shared["replica.selector.class"] = RACK_SELECTOR
        self.controller = ApacheKafkaBroker(version, start_timeout=start_timeout, node=NodeRole(
            CONTROLLER_ID, broker=False, controller=True, quorum=quorum, cluster_id=cluster_id,
            ports={"CONTROLLER": controller_port}))
        self.brokers: dict[int, ApacheKafkaBroker] = {
            node_id: ApacheKafkaBroker(version, start_timeout=start_timeout, extra_properties=shared,
                                       log_levels={"kafka.request.logger": "DEBUG"} if request_log else None,
                                       node=NodeRole(
                node_id, broker=True, controller=False, quorum=quorum, cluster_id=cluster_id,
                properties={"broker.rack": racks[node_id]} if racks and node_id in racks else {}))
            for node_id in BROKER_IDS}

    # -- addresses -----------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(broker.bootstrap_servers for broker in self.brokers.values())

    def broker(self, node_id: int) -> ApacheKafkaBroker:
        return self.brokers[node_id]

    def served(self, node_id: int, client_id: str, api_key: int) -> int:
        """How many ``api_key`` requests from ``client_id`` broker ``node_id`` completed (needs
        ``request_log``; counted in its server.log)."""
        log = self.brokers[node_id].log_path.read_text(errors="replace")
        needle = f'"requestApiKey":{api_key},'
        return sum(1 for line in log.splitlines()
                   if "Completed request" in line and needle in line and f'"clientId":"{client_id}"' in line)

    def running_brokers(self) -> list[int]:
        return [node_id for node_id, broker in self.brokers.items() if broker.running]

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> KafkaCluster:
        began = time.monotonic()
        try:
            self.controller.start()
            for broker in self.brokers.values():
                broker.start()
            self.wait_for_brokers(set(BROKER_IDS))
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop every process (brokers first) and delete the data."""
        try:
            for broker in self.brokers.values():
                broker.stop()
        finally:
            self.controller.stop()

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def stop_broker(self, node_id: int) -> None:
        """SIGTERM (a controlled shutdown: leadership moves away first); data and ports are kept."""
        self.brokers[node_id].shutdown()

    def kill_broker(self, node_id: int) -> None:
        """SIGKILL: leaders on it are lost until the controller notices (broker.session.timeout.ms)."""
        self.brokers[node_id].kill()

    def start_broker(self, node_id: int, *, in_sync_timeout: float = 60.0) -> None:
        """Start a stopped broker and wait until it is back in the ISR of every partition it hosts."""
        self.brokers[node_id].start()
        self.wait_in_sync(node_id, timeout=in_sync_timeout)

    def restart_broker(self, node_id: int, *, kill: bool = False, in_sync_timeout: float = 60.0) -> None:
        """Stop (SIGTERM, or SIGKILL with ``kill``), start, and wait until the broker is back in sync."""
        self.brokers[node_id].shutdown(kill=kill)
        self.start_broker(node_id, in_sync_timeout=in_sync_timeout)

    # -- the cluster's view --------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     config: Mapping[str, str] | None = None, timeout: float = 30.0) -> None:
        from aiokafka_lite.testing.helpers import create_topic

        create_topic(self.bootstrap_servers, name, partitions=partitions, config=config, timeout=timeout,
                     replication_factor=replication_factor)

    def leader_of(self, tp: TopicPartition) -> int:
        """The broker leading ``tp`` now (-1 while it has none)."""
        leader: int = self._partition(tp).leader
        return leader

    def replicas_of(self, tp: TopicPartition) -> tuple[list[int], list[int]]:
        """``(replicas, in-sync replicas)`` of ``tp``."""
        found = self._partition(tp)
        return list(found.replicas), list(found.isrs)

    def coordinator_of(self, group_id: str, timeout: float = 30.0) -> int:
        """The broker coordinating ``group_id`` (found with a FindCoordinator of the admin client)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        admin = self._admin()
        deadline = time.monotonic() + timeout
        while True:
            future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)])[group_id]
            try:
                future.result(timeout=max(deadline - time.monotonic(), 0.1))
                described = admin.describe_consumer_groups([group_id])[group_id].result(timeout=10)
                coordinator: int = described.coordinator.id
                return coordinator
            except Exception:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def set_broker_config(self, node_id: int | None, configs: Mapping[str, str], timeout: float = 30.0) -> None:
        """Change dynamic broker settings: for one broker, or cluster-wide with ``node_id`` None."""
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        resource = ConfigResource(ResourceType.BROKER, "" if node_id is None else str(node_id),
                                  incremental_configs=[ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                                                       for k, v in configs.items()])
        for future in self._admin().incremental_alter_configs([resource]).values():
            future.result(timeout=timeout)

    def elect_leaders(self, tps: list[TopicPartition], *, unclean: bool = False, timeout: float = 30.0) -> None:
        """Ask the controller for a leader election: the preferred replica, or with ``unclean`` any
        live replica, in sync or not (Kafka's ``kafka-leader-election --election-type unclean``);
        an unclean leader's log wins, so records only the old leader had are truncated away."""
        from confluent_kafka import ElectionType
        from confluent_kafka import TopicPartition as ConfluentPartition

        kind = ElectionType.UNCLEAN if unclean else ElectionType.PREFERRED
        admin = self._admin()  # held until the answer: a destroyed client fails its futures
        future = admin.elect_leaders(kind, [ConfluentPartition(tp.topic, tp.partition) for tp in tps])
        for _tp, error in future.result(timeout=timeout).items():
            if error is not None:
                raise RuntimeError(f"leader election failed: {error}")

    def move_leader(self, tp: TopicPartition, to: int, timeout: float = 60.0) -> None:
        """Make replica ``to`` the leader of ``tp`` while every broker stays up: the same replicas,
        ``to`` first (Kafka's ``kafka-reassign-partitions``, one short JVM), then a preferred
        leader election. The old leader stays a follower of the partition."""
        replicas, _isr = self.replicas_of(tp)
        if to not in replicas:
            raise ValueError(f"broker {to} holds no replica of {tp} (replicas {replicas})")
        order = [to, *(r for r in replicas if r != to)]
        plan = {"version": 1, "partitions": [{"topic": tp.topic, "partition": tp.partition, "replicas": order}]}
        with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
            json.dump(plan, file)
            file.flush()
            subprocess.run([require_tool("java", "reassign partitions"), "-Xmx128m", "-XX:TieredStopAtLevel=1",
                            "-XX:+UseSerialGC", "-cp", f"{kafka_jars(self.version)}/*",
                            "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                            "--bootstrap-server", self.bootstrap_servers, "--reassignment-json-file", file.name,
                            "--execute"], check=True, capture_output=True, timeout=timeout)
        self._wait(lambda: self.replicas_of(tp)[0] == order, timeout, f"{tp} replicas in order {order}")
        self.elect_leaders([tp], timeout=timeout)
        self._wait(lambda: self.leader_of(tp) == to, timeout, f"broker {to} leading {tp}")

    def wait_for_isr(self, tp: TopicPartition, in_sync: set[int], timeout: float = 60.0) -> None:
        """Wait until the in-sync replicas of ``tp`` are exactly ``in_sync``."""
        self._wait(lambda: set(self._partition(tp).isrs) == in_sync, timeout,
                   f"{tp} in sync on {sorted(in_sync)}")

    def wait_for_brokers(self, node_ids: set[int], timeout: float = 60.0) -> None:
        """Wait until the metadata lists exactly ``node_ids`` as live brokers."""
        self._wait(lambda: set(self._admin().list_topics(timeout=5).brokers) == node_ids, timeout,
                   f"brokers {sorted(node_ids)} registered")

    def wait_in_sync(self, node_id: int, timeout: float = 60.0) -> None:
        """Wait until ``node_id`` is in the ISR of every partition it is a replica of."""
        def in_sync() -> bool:
            topics = self._admin().list_topics(timeout=5).topics
            return all(node_id in p.isrs for t in topics.values() for p in t.partitions.values()
                       if node_id in p.replicas)
        self._wait(in_sync, timeout, f"broker {node_id} back in the ISR of its partitions")

    def _partition(self, tp: TopicPartition, timeout: float = 10.0) -> Any:
        """``tp``'s metadata. Each broker learns of a new topic from the controller in its own time,
        and the admin client asks any of them: one that has not yet answers without the topic (seen
        right after ``create_topic()``), so that answer is asked again until ``timeout``."""
        admin = self._admin()
        deadline = time.monotonic() + timeout
        while True:
            topic = admin.list_topics(tp.topic, timeout=10).topics.get(tp.topic)
            if topic is not None and not topic.error and tp.partition in topic.partitions:
                return topic.partitions[tp.partition]
            if time.monotonic() >= deadline:
                raise KeyError(f"{tp} is not in the cluster's metadata")
            time.sleep(0.1)

    def _admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap_servers, "socket.timeout.ms": 5000})

    @staticmethod
    def _wait(condition: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if condition():
                    return
            except Exception:  # a broker going away mid-request: ask again
                pass
            if time.monotonic() >= deadline:
                raise TimeoutError(f"not reached within {timeout} s: {what}")
            time.sleep(0.2)

    # -- replacing every broker (KIP-899 rebootstrap tests) --------------------------------------

    def replace_brokers(self, *, timeout: float = 120.0) -> dict[int, str]:
        """Replace every broker by a new process on new ports with the same node id, cluster id and
        data, as when all machines behind a DNS name or load balancer are swapped. All are stopped
        (SIGTERM) before any comes back, so no client can learn the new addresses from an old
        broker; at the end no old address answers. Returns node id -> old ``host:port``."""
        old = {node_id: broker.bootstrap_servers for node_id, broker in self.brokers.items()}
        for broker in self.brokers.values():
            broker.shutdown()
        for broker in self.brokers.values():
            broker.relocate()
        self.wait_for_brokers(set(BROKER_IDS), timeout=timeout)
        for node_id in BROKER_IDS:
            self.wait_in_sync(node_id, timeout=timeout)
        answering = [address for address in old.values() if port_open(*_host_port(address))]
        if answering:
            raise RuntimeError(f"old broker addresses still answer after the replacement: {answering}")
        return old


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)
