"""The group coordinators: which broker coordinates each group (FindCoordinator, retried with
backoff), and a dedicated connection to it per group.

The coordinator gets a connection of its own, so heartbeats never queue behind a long-poll fetch
pipelined on the shared connection to the same broker. A lookup failing is normal while brokers
restart: its streak is said at INFO, then DEBUG (FailureLog); a coordinator that moved is one INFO line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from ..errors import BrokerError, KafkaError, KafkaTimeoutError
from ..protocol.messages import FIND_COORDINATOR
from .backoff import Backoff
from .connection import Connection
from .exceptions import TRANSIENT, map_exceptions
from .failure_log import FailureLog
from .metadata import BrokerInfo, MetadataCache
from .options import ConnectionOptions
from .pool import ConnectionPool
from .requests import find_coordinator_request, parse_coordinator

log = logging.getLogger("aiokafka_lite.net")


class Coordinators:
    def __init__(self, options: ConnectionOptions, *, metadata: MetadataCache, pool: ConnectionPool,
                 bootstrap: Callable[[], Awaitable[None]], refresh_brokers: Callable[[], Awaitable[None]]) -> None:
        """``bootstrap``: when no broker is known yet; ``refresh_brokers``: after a lookup failed on
        the connection (the broker list may be stale). Both bounded by the caller's timeout."""
        self.options = options
        self.metadata = metadata
        self.pool = pool
        self.bootstrap = bootstrap
        self.refresh_brokers = refresh_brokers
        self.failures: dict[str, FailureLog] = {}
        self._known: dict[str, BrokerInfo] = {}
        self._conns: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._last: dict[str, int] = {}  # survives "marked dead", to log moves only

    async def find(self, group_id: str, seconds: float | None) -> int:
        """The coordinator's node id; retries COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS in time,
        backing off exponentially (retry_backoff -> retry_backoff_max, with jitter, as KIP-580)."""
        last: KafkaError | None = None
        failures = self.lookups(group_id)
        backoff = Backoff(self.options.retry_backoff, self.options.retry_backoff_max)
        try:
            async with asyncio.timeout(seconds):
                while True:
                    try:
                        broker = await self._lookup(group_id)
                    except TRANSIENT as exc:
                        last = exc
                        # The broker list may be stale: refresh it (or rebootstrap) first, as Java
                        # awaits a metadata update after a failed lookup.
                        await self.refresh_brokers()
                    except BrokerError as exc:
                        if not exc.retriable:
                            raise
                        last = exc
                    else:
                        self._found(group_id, broker)
                        failures.recovered(detail=f"node {broker.node_id}")
                        return broker.node_id
                    failures.failed(last)
                    backoff.failed(time.monotonic())
                    await asyncio.sleep(backoff.wait_time(time.monotonic()))
        except KafkaError:
            raise
        except TimeoutError as exc:
            raise KafkaTimeoutError(f"no coordinator found for group {group_id!r} within {seconds}s"
                                    + (f" (last error: {last})" if last else "")) from exc

    def _found(self, group_id: str, broker: BrokerInfo) -> None:
        self._known[group_id] = broker
        previous = self._last.get(group_id)
        self._last[group_id] = broker.node_id
        if previous is not None and previous != broker.node_id:
            log.info("group %r: the coordinator moved from node %d to node %d", group_id, previous,
                     broker.node_id)
        else:  # found again where it was: nothing an operator needs to know
            log.debug("group %r is coordinated by node %d", group_id, broker.node_id)

    async def _lookup(self, group_id: str) -> BrokerInfo:
        if not self.metadata.brokers:
            await self.bootstrap()  # bounded by the caller's timeout
        node_id = self.pool.least_loaded_node()
        assert node_id is not None  # bootstrap filled the broker list
        conn = await self.pool.connection(node_id, self.options.request_timeout)
        version = conn.version_for(FIND_COORDINATOR)
        response = await conn.send(FIND_COORDINATOR, version, find_coordinator_request(version, group_id))
        return parse_coordinator(response, version, group_id)

    def lookups(self, group_id: str) -> FailureLog:
        """The failure streak of FindCoordinator for ``group_id`` (normal while brokers restart)."""
        found = self.failures.get(group_id)
        if found is None:
            found = self.failures[group_id] = FailureLog(
                log, f"group {group_id}: coordinator lookup", warn_after_failures=None)
        return found

    def known(self, group_id: str) -> BrokerInfo | None:
        """The known coordinator of ``group_id`` (None when unknown)."""
        return self._known.get(group_id)

    async def connection(self, group_id: str, seconds: float | None) -> Connection:
        """A connection to the group's coordinator that no other traffic shares."""
        conn = self._conns.get(group_id)
        if conn is not None and not conn.closed:
            return conn
        with map_exceptions(f"connecting to the coordinator of group {group_id!r}", seconds):
            async with asyncio.timeout(seconds):
                async with self._locks.setdefault(group_id, asyncio.Lock()):
                    return await self._dedicated(group_id)

    async def _dedicated(self, group_id: str) -> Connection:
        conn = self._conns.get(group_id)
        if conn is not None:
            if not conn.closed:
                return conn
            self.pool.retire(self._conns.pop(group_id))
        if group_id not in self._known:
            self.pool.check_open()
            await self.find(group_id, None)
        broker = self._known[group_id]
        try:
            conn = await self.pool.open(broker.host, broker.port, broker.node_id)
        except TRANSIENT:
            self._known.pop(group_id, None)  # look it up afresh next time
            raise
        await self.pool.unless_closed(conn)
        self._conns[group_id] = conn
        return conn

    def mark_dead(self, group_id: str | None = None, reason: str = "") -> None:
        """Forget the coordinator of ``group_id`` (None: of every group) and drop its connection."""
        groups = list(self._known.keys() | self._conns.keys()) if group_id is None else [group_id]
        for group in groups:
            broker = self._known.pop(group, None)
            conn = self._conns.pop(group, None)
            if conn is not None:
                self.pool.retire(conn)
            if broker is not None:  # whoever found it dead says why, once (see FailureLog)
                log.debug("coordinator node %d of group %r marked dead%s", broker.node_id, group,
                          f": {reason}" if reason else "")

    def forget_all(self) -> list[Connection]:
        """Forget every coordinator; the dedicated connections, for the caller to close."""
        conns = list(self._conns.values())
        self._conns.clear()
        self._known.clear()
        return conns
