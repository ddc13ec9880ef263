"""The cluster client: what the consumer knows about the cluster, and its connections to it.

``Cluster`` is the one object the rest of the package holds; it owns the metadata cache and says
what it holds about topics, and hands the work to its parts: bootstrap.py (reaching the cluster
through ``bootstrap_servers``), refresh.py (metadata from the known brokers), pool.py (one shared
connection per broker, for metadata, fetches and offsets) and coordinators.py (each group's
coordinator and its dedicated connection, so heartbeats never queue behind a long-poll fetch).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import BrokerError, KafkaTimeoutError
from ..protocol.api import Api
from ..structs import TopicPartition
from .bootstrap import Bootstrap
from .connection import DEFAULT, Connection, RequestTimeoutDefault, Timeout
from .coordinators import Coordinators
from .exceptions import map_exceptions
from .failure_log import FailureLog
from .metadata import BrokerInfo, MetadataCache
from .missing_topics import MissingTopics
from .monitor import ConnectionMonitor
from .options import ConnectionOptions
from .pool import ConnectionPool
from .recovery import MetadataRecovery
from .refresh import MetadataRefresh

log = logging.getLogger("aiokafka_lite.net")

INVALID_TOPIC_EXCEPTION = 17
TOPIC_AUTHORIZATION_FAILED = 29


class Cluster:
    """What the consumer knows about the cluster, and its connections to it."""

    def __init__(self, options: ConnectionOptions, bootstrap_servers: Sequence[tuple[str, int]], *,
                 retry_limit: str | None = None) -> None:
        """``retry_limit``: how long the callers keep trying to reach the cluster, as the first
        failure's WARNING says it (e.g. "60 s (default_api_timeout_ms)")."""
        if not bootstrap_servers:
            raise ValueError("at least one bootstrap server is needed")
        self.options = options
        self.bootstrap_servers = [(host, int(port)) for host, port in bootstrap_servers]
        self.metadata = MetadataCache()
        self.recovery = MetadataRecovery(options.metadata_recovery_strategy,
                                         options.metadata_recovery_rebootstrap_trigger)
        # Shared by every connection opened here: a failure repeating across reconnects is said once.
        self.monitor = ConnectionMonitor()
        # A metadata or coordinator outage is normal while brokers restart: INFO, then DEBUG.
        self.metadata_failures = FailureLog(log, "metadata refresh", warn_after_failures=None)
        self._pool = ConnectionPool(options, self.metadata, self.monitor, on_misrouted=self.recovery.misrouted)
        self._refresh = MetadataRefresh(options, metadata=self.metadata, recovery=self.recovery,
                                        pool=self._pool, failures=self.metadata_failures)
        self._bootstrap = Bootstrap(self.bootstrap_servers, options, metadata=self.metadata,
                                    recovery=self.recovery, pool=self._pool,
                                    metadata_failures=self.metadata_failures, ask=self._refresh.ask,
                                    retry_limit=retry_limit)
        self._coordinators = Coordinators(options, metadata=self.metadata, pool=self._pool,
                                          bootstrap=lambda: self.bootstrap(timeout=None),
                                          refresh_brokers=lambda: self._refresh_rounds([]))
        self.coordinator_failures = self._coordinators.failures
        self._missing_topics = MissingTopics(log, auto_create=options.allow_auto_topic_creation)

    def _seconds(self, timeout: Timeout) -> float | None:
        return self.options.request_timeout if isinstance(timeout, RequestTimeoutDefault) else timeout

    # ------------------------------------------------------------------ bootstrap and metadata

    async def bootstrap(self, timeout: Timeout = DEFAULT) -> None:
        """Try the bootstrap servers in order, in rounds with backoff, until a Metadata round trip works."""
        self._pool.check_open()
        await self._bootstrap.within(self._seconds(timeout))

    def unreachable(self, seconds: float | None) -> KafkaTimeoutError | None:
        """Until the cluster first answers: the error for a caller that waited ``seconds`` for it,
        naming each bootstrap server's last failure and number of tries (None once it answered)."""
        return self._bootstrap.unreachable(seconds)

    def bootstrap_failures(self) -> str | None:
        """Until the cluster first answers: each bootstrap server's last failure (None once it answered)."""
        return self._bootstrap.failures()

    async def refresh_metadata(self, topics: Sequence[str] | None = None,
                               timeout: Timeout = DEFAULT) -> None:
        """Ask one broker for metadata (None: every topic), trying the others; when none answers,
        bootstrap again or (metadata_recovery_strategy "none") go round them again after a backoff."""
        self._pool.check_open()
        seconds = self._seconds(timeout)
        wanted = None if topics is None else list(topics)
        with map_exceptions(f"refreshing metadata for {'all topics' if wanted is None else wanted}", seconds):
            async with asyncio.timeout(seconds):
                await self._refresh_rounds(wanted)

    async def _refresh_rounds(self, wanted: list[str] | None) -> None:
        await self._refresh.rounds(wanted, self._bootstrap.run)

    def metadata_age(self) -> float:
        """Seconds since the last metadata update (infinity before the first)."""
        age = self.metadata.age(time.monotonic())
        return float("inf") if age is None else age

    def metadata_stale(self) -> bool:
        return self.metadata_age() > self.options.metadata_max_age

    def topics(self, exclude_internal: bool = False) -> list[str]:
        """Names of the topics in the cache that exist (no topic-level error), sorted."""
        return sorted(name for name, info in self.metadata.topics.items()
                      if info.error_code == 0 and not (exclude_internal and info.is_internal))

    def leader_epoch_for(self, tp: TopicPartition) -> int | None:
        return self.metadata.leader_epoch_for(tp)

    def leader_for(self, tp: TopicPartition) -> int | None:
        return self.metadata.leader_for(tp)

    def leaders_for(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
        return self.metadata.leaders_for(tps)

    def partitions_for(self, topic: str) -> set[int] | None:
        return self.metadata.partitions_for(topic)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self.metadata.topic_id(topic)

    def apply_leader_hint(self, tp: TopicPartition, leader_id: int, leader_epoch: int,
                          endpoints: Mapping[int, BrokerInfo]) -> bool:
        """A broker named the new leader of ``tp`` (KIP-951); see MetadataCache.apply_leader_hint."""
        return self.metadata.apply_leader_hint(tp, leader_id, leader_epoch, endpoints)

    def raise_topic_errors(self, topics: Iterable[str], *, subscribed: bool = False) -> set[str]:
        """A topic the last metadata called invalid or unauthorized is the caller's error (as in
        Java); other topic errors (unknown, leader not available...) are transient. ``subscribed``:
        the consumer waits for these topics, so one that does not exist is said once (MissingTopics);
        returns those the metadata calls unknown."""
        topics = list(topics)
        missing = self._missing_topics.checked({t: self.metadata.topic_error(t) for t in topics}) \
            if subscribed else set()
        for topic in topics:
            code = self.metadata.topic_error(topic)
            if code in (INVALID_TOPIC_EXCEPTION, TOPIC_AUTHORIZATION_FAILED):
                raise BrokerError(code, f"topic {topic!r}")
        return missing

    # ------------------------------------------------------------------ the connection pool

    async def connection(self, node_id: int, timeout: Timeout = DEFAULT, lane: int = 0) -> Connection:
        """The shared connection to ``node_id`` (or the fetcher's extra one numbered ``lane`` >= 1),
        (re)opened with backoff if needed."""
        return await self._pool.connection(node_id, self._seconds(timeout), lane)

    async def send(self, node_id: int, api: Api, body: Mapping[str, Any], *,
                   timeout: Timeout = DEFAULT, max_version: int | None = None) -> dict[str, Any]:
        """One request on the shared connection to ``node_id`` at the best common version.

        Callers whose body depends on the version use ``connection()`` and ``version_for()``.
        """
        seconds = self._seconds(timeout)
        with map_exceptions(f"{api.name} to node {node_id}", seconds):
            async with asyncio.timeout(seconds):
                conn = await self.connection(node_id, timeout=None)
                return await conn.send(api, conn.version_for(api, max_version), body, timeout=None)

    def least_loaded_node(self) -> int | None:
        """A broker with an open connection and the fewest requests in flight, else any known broker."""
        return self._pool.least_loaded_node()

    # ------------------------------------------------------------------ group coordinator

    async def find_coordinator(self, group_id: str, timeout: Timeout = DEFAULT) -> int:
        """The coordinator's node id; retries COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS in time,
        backing off exponentially (retry_backoff -> retry_backoff_max, with jitter, as KIP-580)."""
        self._pool.check_open()
        return await self._coordinators.find(group_id, self._seconds(timeout))

    def coordinator_lookups(self, group_id: str) -> FailureLog:
        """The failure streak of FindCoordinator for ``group_id`` (normal while brokers restart)."""
        return self._coordinators.lookups(group_id)

    def coordinator(self, group_id: str) -> int | None:
        """The known coordinator's node id for ``group_id`` (None when unknown)."""
        broker = self._coordinators.known(group_id)
        return None if broker is None else broker.node_id

    def coordinator_address(self, group_id: str) -> tuple[str, int] | None:
        """(host, port) of the known coordinator of ``group_id`` (the heartbeat thread connects there)."""
        broker = self._coordinators.known(group_id)
        return None if broker is None else (broker.host, broker.port)

    async def coordinator_connection(self, group_id: str,
                                     timeout: Timeout = DEFAULT) -> Connection:
        """A connection to the group's coordinator that no other traffic shares."""
        self._pool.check_open()
        return await self._coordinators.connection(group_id, self._seconds(timeout))

    def mark_coordinator_dead(self, group_id: str | None = None, reason: str = "") -> None:
        """Forget the coordinator of ``group_id`` (None: of every group) and drop its connection."""
        self._coordinators.mark_dead(group_id, reason)

    # ------------------------------------------------------------------ closing

    async def close(self) -> None:
        """Close every connection (pool, coordinators, retiring). Idempotent."""
        await self._pool.close(dedicated=self._coordinators.forget_all())
