"""Broker faults of the chaos soak's ``--cluster`` mode, on a 3-broker :class:`KafkaCluster`.

    broker_kill     SIGKILL the broker leading the most partitions of the topic, or the group's
                    coordinator (a coin flip), then start it again and wait until it is back in the ISR
    broker_restart  SIGTERM (a controlled shutdown) and start the brokers in turn, rolling-style,
                    each waiting until back in the ISR
    leader_move     move leadership off one broker (chosen as for broker_kill) while it stays up: every
                    partition it leads, of the topic and of ``__consumer_offsets`` (so the group
                    coordinator moves with it), gets its replica list reordered with another in-sync
                    replica first (Kafka's ReassignPartitionsCommand from the broker's jars: an
                    order-only reassignment moves no data), then a preferred-leader election
                    (ElectLeaders through confluent_kafka's AdminClient) makes that replica leader

Every method blocks until the cluster is whole again, so the faults, run one after another, never
have more than one broker down (RF 3, min.insync.replicas 2: producing and committing go on).
"""

from __future__ import annotations

import json
import random
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from aiokafka_lite.testing._kafka_jars import kafka_jars, require_tool
from aiokafka_lite.testing.kafka_cluster import BROKER_IDS, KafkaCluster

OFFSETS_TOPIC = "__consumer_offsets"
REASSIGN_CLASS = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
_JVM_OPTS = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData"]
MOVE_TIMEOUT = 30.0


class ClusterFaults:
    """Injects one broker fault at a time and says what it did (a line for the soak's fault log)."""

    def __init__(self, cluster: KafkaCluster, topic: str, group: str, rng: random.Random) -> None:
        self.cluster = cluster
        self.topic = topic
        self.group = group
        self.rng = rng
        self._next_restart = 0
        # librdkafka would print every refused connection to stderr while a broker is down.
        self._admin: Any = _admin_client(cluster.bootstrap_servers)

    def broker_kill(self) -> str:
        node_id, why = self._victim()
        self.cluster.kill_broker(node_id)
        began = time.monotonic()
        self.cluster.start_broker(node_id)
        return f"broker {node_id} ({why}) SIGKILLed, back in the ISR after {time.monotonic() - began:.1f} s"

    def broker_restart(self) -> str:
        node_id = BROKER_IDS[self._next_restart % len(BROKER_IDS)]
        self._next_restart += 1
        began = time.monotonic()
        self.cluster.restart_broker(node_id)
        return f"broker {node_id} restarted (SIGTERM), back in the ISR after {time.monotonic() - began:.1f} s"

    def leader_move(self) -> str:
        node_id, why = self._victim()
        moves = self._moves_off(node_id)
        if not moves:
            return f"broker {node_id} ({why}) leads nothing: no move"
        self._reorder_replicas(moves)
        self._elect_preferred(list(moves))
        self._wait_led_by({tp: replicas[0] for tp, replicas in moves.items()})
        topic_moves = sum(1 for topic, _ in moves if topic == self.topic)
        return (f"broker {node_id} ({why}): leadership of {topic_moves} topic and "
                f"{len(moves) - topic_moves} {OFFSETS_TOPIC} partitions moved")

    # -- choosing -------------------------------------------------------------------------------

    def _victim(self) -> tuple[int, str]:
        if self.rng.random() < 0.5:
            return self.cluster.coordinator_of(self.group), "the group coordinator"
        counts = {node_id: 0 for node_id in BROKER_IDS}
        for partition in self._partitions(self.topic).values():
            if partition.leader in counts:
                counts[partition.leader] += 1
        most = max(counts.values())
        node_id = self.rng.choice([n for n, count in counts.items() if count == most])
        return node_id, f"leads {most} of the topic's partitions"

    def _moves_off(self, node_id: int) -> dict[tuple[str, int], list[int]]:
        """New replica order for every partition ``node_id`` leads: another in-sync replica first."""
        moves = {}
        for topic in (self.topic, OFFSETS_TOPIC):
            for index, partition in sorted(self._partitions(topic).items()):
                others = [r for r in partition.isrs if r != node_id]
                if partition.leader != node_id or not others:
                    continue
                first = self.rng.choice(others)
                moves[(topic, index)] = [first, *(r for r in partition.replicas if r != first)]
        return moves

    # -- Kafka's mechanisms ---------------------------------------------------------------------

    def _reorder_replicas(self, moves: dict[tuple[str, int], list[int]]) -> None:
        plan = {"version": 1, "partitions": [{"topic": topic, "partition": index, "replicas": replicas}
                                             for (topic, index), replicas in moves.items()]}
        with tempfile.TemporaryDirectory(prefix="chaos-reassign-") as tmp:
            plan_file = Path(tmp) / "plan.json"
            plan_file.write_text(json.dumps(plan))
            argv = [require_tool("java", "reassign partitions"), *_JVM_OPTS,
                    "-cp", f"{kafka_jars(self.cluster.version)}/*", REASSIGN_CLASS,
                    "--bootstrap-server", self.cluster.bootstrap_servers,
                    "--reassignment-json-file", str(plan_file), "--execute"]
            result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0 or "Successfully started partition reassignment" not in result.stdout:
            raise RuntimeError(f"{REASSIGN_CLASS} failed (exit {result.returncode}):\n"
                               f"{(result.stdout + result.stderr)[-3000:]}")
        # An order-only reassignment completes at once; wait until the metadata shows the new order.
        self._wait(lambda: all(self._partitions(topic)[index].replicas == replicas
                               for (topic, index), replicas in moves.items()), "replica lists reordered")

    def _elect_preferred(self, partitions: list[tuple[str, int]]) -> None:
        from confluent_kafka import ElectionType, TopicPartition

        results = self._admin.elect_leaders(
            ElectionType.PREFERRED, [TopicPartition(topic, index) for topic, index in partitions]
        ).result(timeout=MOVE_TIMEOUT)  # (confluent_kafka 2.16.1 rejects the timeout keywords it documents)
        # ELECTION_NOT_NEEDED: the controller already made the new first replica leader.
        failed = {str(tp): str(error) for tp, error in results.items()
                  if error is not None and "ELECTION_NOT_NEEDED" not in str(error)}
        if failed:
            raise RuntimeError(f"preferred-leader election failed: {failed}")

    def _wait_led_by(self, leaders: dict[tuple[str, int], int]) -> None:
        self._wait(lambda: all(self._partitions(topic)[index].leader == leader
                               for (topic, index), leader in leaders.items()), f"new leaders {leaders}")

    def _partitions(self, topic: str) -> dict[int, Any]:
        found = self._admin.list_topics(topic, timeout=10).topics[topic]
        if found.error is not None:
            raise RuntimeError(f"metadata of {topic}: {found.error}")
        return dict(found.partitions)

    @staticmethod
    def _wait(condition: Any, what: str) -> None:
        deadline = time.monotonic() + MOVE_TIMEOUT
        while not condition():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"not reached within {MOVE_TIMEOUT} s: {what}")
            time.sleep(0.2)


def _admin_client(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000, "log_level": 0})
