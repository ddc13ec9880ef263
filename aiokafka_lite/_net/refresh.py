"""The metadata refresh: one Metadata round trip applied to the cache, and the rounds over the known
brokers that go back to the bootstrap servers (KIP-899, KIP-1102) when none of them answers.

A refresh failing is normal while brokers restart: the metadata log says it at INFO, then DEBUG.
A known broker's address leading to another cluster is not (KIP-1242, a misrouted connection): its
Metadata names another cluster id, or (Kafka 4.4+) it refused ApiVersions naming ours. That
rebootstraps at once, and one WARNING says it once the bootstrap servers answered (repeats at DEBUG).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from ..errors import BrokerError
from ..protocol.messages import METADATA
from .backoff import Backoff
from .connection import Connection
from .exceptions import TRANSIENT, MisroutedConnectionError
from .failure_log import FailureLog
from .metadata import MetadataCache
from .options import ConnectionOptions
from .pool import ConnectionPool
from .recovery import REBOOTSTRAP_REQUIRED, Failure, MetadataRecovery
from .requests import metadata_request

log = logging.getLogger("aiokafka_lite.net")

# A (re)bootstrap; the argument says why it is a rebootstrap (None: the first bootstrap).
Rebootstrap = Callable[[str | None], Awaitable[None]]


class MetadataRefresh:
    def __init__(self, options: ConnectionOptions, *, metadata: MetadataCache, recovery: MetadataRecovery,
                 pool: ConnectionPool, failures: FailureLog) -> None:
        self.options = options
        self.metadata = metadata
        self.recovery = recovery
        self.pool = pool
        self.failures = failures
        self.misroutings = FailureLog(log, "misrouted connection")

    async def rounds(self, wanted: list[str] | None, bootstrap: Rebootstrap) -> None:
        """Ask the known brokers until one answers; when none does, ``bootstrap`` again or
        (metadata_recovery_strategy "none") go round them again after a backoff."""
        backoff = Backoff(self.options.reconnect_backoff, self.options.reconnect_backoff_max)
        self.recovery.attempting(time.monotonic())
        while True:
            reason = self.recovery.reason(time.monotonic())  # the KIP-1102 trigger lapsed?
            if reason is None and self.metadata.brokers:
                failure = await self._from_known(wanted)
                if failure is None:
                    return
                reason = self.recovery.reason(time.monotonic(), failure)
            if reason is not None or not self.metadata.brokers:
                await bootstrap(reason)  # a full refresh: every topic
                self._say_misrouting()
                return
            backoff.failed(time.monotonic())
            await asyncio.sleep(backoff.delay())

    async def _from_known(self, wanted: list[str] | None) -> Failure | None:
        """One round over the known brokers: None once one answered, else how it failed."""
        for node_id in self.pool.candidate_nodes():
            try:
                await self.ask(await self.pool.connection(node_id, self.options.request_timeout), wanted,
                               from_known=True)
                self.misroutings.recovered()
                return None
            except MisroutedConnectionError as exc:
                self.recovery.misrouted(exc)
                return Failure.MISROUTED
            except TRANSIENT as exc:
                self.failures.failed(f"node {node_id} failed: {exc}")
            except BrokerError as exc:
                if exc.code != REBOOTSTRAP_REQUIRED or not self.recovery.rebootstrap_allowed:
                    raise
                return Failure.REQUIRED
        return Failure.UNREACHABLE

    async def ask(self, conn: Connection, topics: list[str] | None, *, from_known: bool = False) -> None:
        """One Metadata round trip on ``conn`` (None: every topic), applied to the cache.
        ``from_known``: ``conn`` goes to a known broker, which must name the cluster we know (a
        bootstrap server's answer says which cluster that is)."""
        version = conn.version_for(METADATA)
        response = await conn.send(METADATA, version, metadata_request(
            version, topics, allow_auto_create=self.options.allow_auto_topic_creation))
        if response["error_code"]:
            raise BrokerError(response["error_code"], f"Metadata from {conn}")
        if from_known:
            self._check_cluster(conn, response["cluster_id"])
        self.metadata.update(response, topics, time.monotonic())
        self.recovery.refreshed()
        self.failures.recovered()

    def _check_cluster(self, conn: Connection, found: str | None) -> None:
        """MisroutedConnectionError (and ``conn`` closed) when a known broker's Metadata names
        another cluster than the one we know (KIP-1242's check on this side: brokers before 4.4
        do not check, and a Metadata before v2 names none)."""
        known = self.metadata.cluster_id
        if self.options.checks_cluster and known is not None and found is not None and found != known:
            self.pool.retire(conn)
            raise MisroutedConnectionError(str(conn), known, found)

    def _say_misrouting(self) -> None:
        """After a rebootstrap for a misrouted connection: one WARNING naming both clusters."""
        error = self.recovery.take_rebootstrapped_misrouting()
        if error is None:
            return
        now = self.metadata.cluster_id
        self.misroutings.failed(f"{error}; rebootstrapped: the bootstrap servers lead to cluster {now!r}"
                                + (" again" if now == error.expected else ""))
