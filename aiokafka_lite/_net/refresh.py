"""The metadata refresh: one Metadata round trip applied to the cache, and the rounds over the known
brokers that go back to the bootstrap servers (KIP-899, KIP-1102) when none of them answers.

A refresh failing is normal while brokers restart: the metadata log says it at INFO, then DEBUG.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from ..errors import BrokerError
from ..protocol.messages import METADATA
from .backoff import Backoff
from .connection import Connection
from .exceptions import TRANSIENT
from .failure_log import FailureLog
from .metadata import MetadataCache
from .options import ConnectionOptions
from .pool import ConnectionPool
from .recovery import REBOOTSTRAP_REQUIRED, Failure, MetadataRecovery
from .requests import metadata_request

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
                return
            backoff.failed(time.monotonic())
            await asyncio.sleep(backoff.delay())

    async def _from_known(self, wanted: list[str] | None) -> Failure | None:
        """One round over the known brokers: None once one answered, else how it failed."""
        for node_id in self.pool.candidate_nodes():
            try:
                await self.ask(await self.pool.connection(node_id, self.options.request_timeout), wanted)
                return None
            except TRANSIENT as exc:
                self.failures.failed(f"node {node_id} failed: {exc}")
            except BrokerError as exc:
                if exc.code != REBOOTSTRAP_REQUIRED or not self.recovery.rebootstrap_allowed:
                    raise
                return Failure.REQUIRED
        return Failure.UNREACHABLE

    async def ask(self, conn: Connection, topics: list[str] | None) -> None:
        """One Metadata round trip on ``conn`` (None: every topic), applied to the cache."""
        version = conn.version_for(METADATA)
        response = await conn.send(METADATA, version, metadata_request(
            version, topics, allow_auto_create=self.options.allow_auto_topic_creation))
        if response["error_code"]:
            raise BrokerError(response["error_code"], f"Metadata from {conn}")
        self.metadata.update(response, topics, time.monotonic())
        self.recovery.refreshed()
        self.failures.recovered()
