"""What to fetch and from which broker, and the Fetch request that asks for it.

``FetchPlanner`` owns what decides a partition's next fetch besides its position: the preferred
read replica a leader pointed us to (KIP-392), the backoffs of failed partitions and brokers, each
broker's Fetch version, the leader epochs positions were last checked at (KIP-320), and whether
metadata must be refreshed first. ``FetchSettings.body()`` turns one broker's plan (after its
fetch session, see sessions.py) into the request. No I/O here; backoffs read the event loop's clock.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from itertools import filterfalse
from typing import Any, NamedTuple, Protocol

from .._net.metadata import BrokerInfo
from ..protocol.primitives import ZERO_UUID
from ..structs import TopicPartition
from ..subscription import PartitionState, SubscriptionState
from .completed import CompletedFetch
from .lane_policy import LanePolicy
from .offset_lookup import ClusterLike
from .sessions import FetchPlan

# The fetch path's one logger, whichever module of it speaks.
log = logging.getLogger("aiokafka_lite.consumer.fetcher")

# Fetch v13+ names topics by id (KIP-516), from metadata's topic ids on the way out and back; v16 is
# the first whose NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH answers name the new leader and its
# address (KIP-951: a broker answering v12-v15 leaves CurrentLeader at -1). v17-v18 add only
# fields for replicas. v12 is the newest version naming topics: used when a topic's id is unknown;
# Kafka 4.x still serves it (KIP-896 removed v0-v3 only); it is also the first with
# last_fetched_epoch (KIP-320).
MAX_FETCH_VERSION = 16
NAMES_FETCH_VERSION = 12
LAST_FETCHED_EPOCH_VERSION = 12  # older Fetch versions cannot see a diverged log: validate first

# How long to keep fetching from a follower the leader pointed us to (KIP-392), before asking the
# leader again; Kafka's default metadata.max.age.ms.
PREFERRED_REPLICA_SECONDS = 300.0


class FetchTarget(NamedTuple):
    """What a Fetch asks of one partition (-1: epoch unknown, the broker checks nothing)."""

    offset: int
    current_leader_epoch: int  # the leader's epoch in our metadata: a stale leader refuses us
    last_fetched_epoch: int  # the epoch of the record before ``offset``: a diverged log says so


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """The consumer's settings every Fetch request carries."""

    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partition_max_bytes: int
    isolation_level: int
    rack: str

    def body(self, plan: FetchPlan[FetchTarget], topic_ids: Mapping[str, uuid.UUID]) -> dict[str, Any]:
        """The request; each topic goes by name and by id (``topic_ids``), the version keeps one."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, target in plan.send.items():
            topics.setdefault(tp.topic, []).append({
                "partition": tp.partition,
                "current_leader_epoch": target.current_leader_epoch,
                "fetch_offset": target.offset,
                "last_fetched_epoch": target.last_fetched_epoch,
                "log_start_offset": -1,
                "partition_max_bytes": self.partition_max_bytes,
            })
        forgotten: dict[str, list[int]] = {}
        for tp in plan.forget:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        return {
            "replica_id": -1,
            "max_wait_ms": self.max_wait_ms,
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "isolation_level": self.isolation_level,
            "session_id": plan.session_id,
            "session_epoch": plan.epoch,
            "topics": [{"topic": topic, "topic_id": topic_ids.get(topic, ZERO_UUID), "partitions": parts}
                       for topic, parts in topics.items()],
            "forgotten_topics_data": [{"topic": topic, "topic_id": topic_ids.get(topic, ZERO_UUID), "partitions": parts}
                                      for topic, parts in forgotten.items()],
            "rack_id": self.rack,
        }


class FetchCluster(ClusterLike, Protocol):
    """What fetching needs of ``_net.cluster.Cluster`` beyond offset lookups: topic ids (Fetch
    v13+) and the leaders brokers name in Fetch answers (KIP-951)."""

    def topic_id(self, topic: str) -> uuid.UUID | None: ...

    def apply_leader_hint(self, tp: TopicPartition, leader_id: int, leader_epoch: int,
                          endpoints: Mapping[int, BrokerInfo]) -> bool: ...


# Where one fetch goes: (broker node id, which of the fetcher's connections to it). Each lane has
# its own partitions, request in flight and fetch session.
Lane = tuple[int, int]


class FetchPlanner:
    """Decides, per fetchable partition of ``subscription``, which broker (and which of the
    connections to it that ``lanes`` gives that broker now) to fetch it from and what to ask;
    failed partitions wait ``retry_backoff`` seconds."""

    def __init__(self, cluster: FetchCluster, subscription: SubscriptionState, retry_backoff: float,
                 lanes: LanePolicy | None = None) -> None:
        self._cluster = cluster
        self._subscription = subscription
        self._retry_backoff = retry_backoff
        self._lanes = LanePolicy(1) if lanes is None else lanes  # the fetcher tells it what answers show
        # Set when a partition's leader is unknown or moved; the poll path refreshes and clears it.
        self.metadata_refresh_needed = False
        self._node_backoff: dict[int, float] = {}  # node id -> loop time before which not to fetch
        self._partition_backoff: dict[TopicPartition, float] = {}
        self._preferred: dict[TopicPartition, tuple[int, float]] = {}  # tp -> (node id, until)
        self._fetch_versions: dict[int, int] = {}  # by node id, once connected
        # tp -> (leader epoch in metadata, consumed epoch) its position was last checked at (KIP-320)
        self._epochs_checked: dict[TopicPartition, tuple[int, int]] = {}

    def plan(self, now: float, completed: Mapping[TopicPartition, CompletedFetch],
             busy: Iterable[Container[TopicPartition]], in_flight: Container[Lane],
             checks: dict[int, dict[TopicPartition, FetchTarget]]) -> dict[Lane, dict[TopicPartition, FetchTarget]]:
        """Per lane without a request ``in_flight``, what to fetch; ``checks`` gets, per leader, the
        positions to check with OffsetForLeaderEpoch before fetching on (KIP-320, for brokers without
        Fetch v12). ``completed``: the data being handed out; ``busy``: partitions with a fetch in
        flight, partitions fetched ahead (each a container: none is copied into one set)."""
        plans: dict[Lane, dict[TopicPartition, FetchTarget]] = {}
        assignment = self._subscription.assignment
        spread = self._spread(now) if self._lanes.widest() > 1 else {}
        candidates: Iterable[TopicPartition] = self._subscription.fetchable()
        for held in busy:  # filtered in C: with thousands of partitions most are busy at each poll
            candidates = filterfalse(held.__contains__, candidates)
        for tp in candidates:
            if self._partition_backoff.get(tp, 0.0) > now:
                continue
            leader_epoch = self._cluster.leader_epoch_for(tp)  # once: both the check and the fetch need it
            check = self._epoch_check(tp, assignment[tp], leader_epoch)
            if check is not None:
                leader = self._cluster.leader_for(tp)
                if leader is not None and leader >= 0 and tp not in completed:
                    checks.setdefault(leader, {})[tp] = check
                continue
            node_id = self.fetch_node(tp, now)
            if node_id is None:
                self.metadata_refresh_needed = True
                continue
            lane = (node_id, spread.get(tp, 0))
            if lane in in_flight or self._node_backoff.get(node_id, 0.0) > now:
                continue
            target = _fetch_target(completed.get(tp), assignment[tp], -1 if leader_epoch is None else leader_epoch)
            if target is not None:
                plans.setdefault(lane, {})[tp] = target
        return plans

    def _spread(self, now: float) -> dict[TopicPartition, int]:
        """Each assigned partition's lane on its broker: a broker's partitions, in order, take turns,
        so each lane gets an even share and a partition keeps its lane while the assignment and
        the broker's number of lanes stay. A partition that changes lanes is forgotten by its old
        lane's fetch session at that lane's next fetch (sessions.py: what a fetch does not want)."""
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in self._subscription.assignment:
            node_id = self.fetch_node(tp, now)
            if node_id is not None:
                by_node.setdefault(node_id, []).append(tp)
        spread: dict[TopicPartition, int] = {}
        for node_id, tps in by_node.items():
            lanes = self._lanes.lanes(node_id)
            if lanes > 1:
                spread.update((tp, i % lanes) for i, tp in enumerate(sorted(tps)))
        return spread

    def _epoch_check(self, tp: TopicPartition, state: PartitionState, current: int | None) -> FetchTarget | None:
        """The position to check before fetching ``tp`` again, if its leader (epoch ``current`` in
        our metadata) changed since the last check and Fetch cannot see a diverged log on that
        broker (None: fetch on)."""
        if state.position is None or state.leader_epoch is None or current is None or current < 0:
            return None
        epochs = (current, state.leader_epoch)
        if self._epochs_checked.get(tp) == epochs:
            return None
        leader = self._cluster.leader_for(tp)
        version = None if leader is None else self._fetch_versions.get(leader)
        if version is not None and version >= LAST_FETCHED_EPOCH_VERSION:
            self._epochs_checked[tp] = epochs  # the next Fetch carries the epoch: the broker checks
            return None
        return FetchTarget(state.position, current, state.leader_epoch)

    def fetch_node(self, tp: TopicPartition, now: float | None) -> int | None:
        """The preferred read replica while it lasts, else the leader. ``now`` None (metrics, maybe
        outside the loop): a lapsed preferred replica is still named; the next fetch plan drops it."""
        preferred = self._preferred.get(tp)
        if preferred is not None:
            if now is None or preferred[1] > now:
                return preferred[0]
            del self._preferred[tp]
        leader = self._cluster.leader_for(tp)
        return leader if leader is not None and leader >= 0 else None

    def fetch_nodes(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        """fetch_node(tp, None) of many partitions, their leaders looked up in one pass."""
        nodes = self._cluster.leaders_for(tps)
        for tp, (node, _until) in self._preferred.items():
            if tp in nodes:
                nodes[tp] = node
        return nodes

    def topic_ids(self, topics: Iterable[str]) -> dict[str, uuid.UUID] | None:
        """Each topic's id, for a Fetch naming topics by id (None: one is unknown, name them)."""
        ids = {}
        for topic in topics:
            topic_id = self._cluster.topic_id(topic)
            if topic_id is None:
                return None
            ids[topic] = topic_id
        return ids

    # ------------------------------------------------------------------ what the answers taught

    def leader_hint(self, tp: TopicPartition, node_id: int, leader: Mapping[str, Any],
                    endpoints: Mapping[int, BrokerInfo]) -> bool:
        """``node_id`` refused ``tp`` and named its ``leader`` (KIP-951): True when our metadata
        takes it (Java's rules: newer epoch, reachable broker), so the next fetch goes there at once."""
        if not self._cluster.apply_leader_hint(tp, leader["leader_id"], leader["leader_epoch"], endpoints):
            return False
        self.drop_preferred_replica(tp, node_id)
        self._partition_backoff.pop(tp, None)
        return True

    def fetch_version(self, node_id: int, version: int) -> None:
        """``node_id`` speaks Fetch ``version``: at v12+ its Fetch checks epochs itself."""
        self._fetch_versions[node_id] = version

    def epochs_checked(self, tp: TopicPartition, epochs: tuple[int, int]) -> None:
        """The position of ``tp`` holds at (leader epoch in metadata, consumed epoch)."""
        self._epochs_checked[tp] = epochs

    def back_off_partition(self, tp: TopicPartition) -> None:
        """No fetch of ``tp`` for one retry backoff."""
        self._partition_backoff[tp] = asyncio.get_running_loop().time() + self._retry_backoff

    def back_off_node(self, node_id: int, until: float) -> None:
        """No fetch to ``node_id`` before loop time ``until``."""
        self._node_backoff[node_id] = until

    def note_preferred_replica(self, node_id: int, tp: TopicPartition, replica: int) -> None:
        if replica >= 0 and replica != node_id:
            until = asyncio.get_running_loop().time() + PREFERRED_REPLICA_SECONDS
            self._preferred[tp] = (replica, until)
            log.debug("fetching %s from its preferred read replica %d", tp, replica)

    def drop_preferred_replica(self, tp: TopicPartition, node_id: int) -> bool:
        """True when ``node_id`` was the preferred replica of ``tp``: the next fetch goes to the leader."""
        if tp in self._preferred and self._preferred[tp][0] == node_id:
            del self._preferred[tp]
            return True
        return False

    def forget_node(self, node_id: int) -> None:
        """``node_id`` failed: the partitions preferring it go back to their leaders, and it starts
        again at one lane (with ``"auto"`` lanes)."""
        self._lanes.forget(node_id)
        for tp in [tp for tp, (node, _until) in self._preferred.items() if node == node_id]:
            del self._preferred[tp]


def _fetch_target(cf: CompletedFetch | None, state: PartitionState, current: int) -> FetchTarget | None:
    """Where the next fetch of a partition starts: its position, or the end of the data ``cf``
    still being handed out (None: wait, that data ends in an error, a seek made it stale, or it is
    empty). ``current``: the leader epoch in our metadata (-1: unknown)."""
    if cf is None:
        if state.position is None:
            return None
        return FetchTarget(state.position, current, -1 if state.leader_epoch is None else state.leader_epoch)
    if cf.position != state.position or cf.incarnation != state.incarnation or cf.data_end is None:
        return None
    return FetchTarget(cf.data_end, current, cf.data_end_epoch)
