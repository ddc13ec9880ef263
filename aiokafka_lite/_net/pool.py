"""The connection pool: one shared connection per broker, for metadata, fetches and offsets, and
the fetcher's extra connections per broker (lanes 1 and up, when ``fetch_connections_per_broker`` > 1).

It also opens every connection of the cluster client (each address with its own reconnect backoff,
as a task that close() can end) and closes retired ones in the background, so the group
coordinators' dedicated connections (coordinators.py) go through it and one close() ends them all.
A connection to a known broker names the cluster and node it is meant for (KIP-1242), once a
broker of the cluster listed ApiVersions v5 (Tansu 0.6 lists v4, yet answers v5 and closes the
connection when v5 names a cluster); a broker refusing that is reported to ``on_misrouted``,
whoever asked for the connection.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterable

from ..errors import ConsumerClosedError, KafkaConnectionError
from ..protocol.messages.api_versions import API_VERSIONS
from .backoff import Backoff
from .connection import Connection, connection_name
from .exceptions import TRANSIENT, MisroutedConnectionError, map_exceptions
from .listener_probe import plaintext_listener
from .metadata import MetadataCache
from .monitor import ConnectionMonitor
from .negotiation import CLUSTER_CHECK_VERSION, IntendedBroker
from .options import ConnectionOptions

log = logging.getLogger("aiokafka_lite.net")


class ConnectionPool:
    """The cluster client's connections, and whether the client is closed."""

    def __init__(self, options: ConnectionOptions, metadata: MetadataCache, monitor: ConnectionMonitor,
                 on_misrouted: Callable[[MisroutedConnectionError], None] | None = None) -> None:
        self.options = options
        self.metadata = metadata  # read here: where each broker is, and the cluster's id
        self.monitor = monitor  # shared by every connection opened here
        self.on_misrouted = on_misrouted
        self._names_understood = False  # a broker listed ApiVersions v5: KIP-1242's names are sent
        self.closed = False
        # By (node id, lane): lane 0 is the shared connection, lanes 1 and up the fetcher's extra ones.
        self._pooled_conns: dict[tuple[int, int], Connection] = {}
        self._locks: dict[tuple[int, int], asyncio.Lock] = {}
        self._backoffs: dict[tuple[str, int], Backoff] = {}
        self._retiring: set[asyncio.Task[None]] = set()
        self._opening: set[asyncio.Task[Connection]] = set()  # Connection.open() under way: close() ends them

    def check_open(self) -> None:
        if self.closed:
            raise ConsumerClosedError("the cluster client is closed")

    async def connection(self, node_id: int, seconds: float | None, lane: int = 0) -> Connection:
        """The shared connection to ``node_id`` (lane 0), or the fetcher's extra one numbered
        ``lane``; (re)opened with backoff if needed."""
        self.check_open()
        conn = self._pooled_conns.get((node_id, lane))
        if conn is not None and self._usable(conn):
            return conn
        with map_exceptions(f"connecting to node {node_id}", seconds):
            async with asyncio.timeout(seconds):
                async with self._locks.setdefault((node_id, lane), asyncio.Lock()):
                    return await self._pooled(node_id, lane)

    async def _pooled(self, node_id: int, lane: int) -> Connection:
        key = (node_id, lane)
        conn = self._pooled_conns.get(key)
        if conn is not None:
            if self._usable(conn):
                return conn
            self.retire(self._pooled_conns.pop(key))
        broker = self.metadata.brokers.get(node_id)
        if broker is None:
            raise KafkaConnectionError(f"node {node_id} is not in the cluster metadata "
                                       f"(known: {sorted(self.metadata.brokers)})")
        conn = await self.open(broker.host, broker.port, node_id)
        await self.unless_closed(conn)
        pooled_meanwhile = self._pooled_conns.get(key)  # a (re)bootstrap's, adopted while ours opened
        if pooled_meanwhile is not None:
            if self._usable(pooled_meanwhile):
                self.retire(conn)
                return pooled_meanwhile
            self.retire(pooled_meanwhile)  # replaced below: closed, not dropped with its socket open
        self._pooled_conns[key] = conn
        return conn

    async def adopt(self, conn: Connection, host: str, port: int) -> bool:
        """Keep ``conn``, opened to the bootstrap address ``host:port``, as the pool entry of the
        broker advertised there, if that broker has none yet; False: the caller closes it."""
        adopted = next((b.node_id for b in self.metadata.brokers.values()
                        if (b.host, b.port) == (host, port) and (b.node_id, 0) not in self._pooled_conns), None)
        if adopted is None:
            return False
        await self.unless_closed(conn)  # close() ran during the (re)bootstrap: pool nothing
        conn.node_id = adopted
        self._pooled_conns[(adopted, 0)] = conn
        return True

    async def unless_closed(self, conn: Connection) -> None:
        """close() ran while ``conn`` was opening: close it too rather than leak it."""
        if self.closed:
            await conn.close()
            raise ConsumerClosedError("the cluster client was closed while connecting")

    def _usable(self, conn: Connection) -> bool:
        if conn.closed:
            return False
        broker = self.metadata.brokers.get(conn.node_id) if conn.node_id is not None else None
        if broker is not None and (broker.host, broker.port) != (conn.host, conn.port):
            return False  # the broker moved
        idle = self.options.connections_max_idle
        return idle is None or conn.in_flight > 0 or time.monotonic() - conn.last_used < idle

    async def open(self, host: str, port: int, node_id: int | None,
                   on_silence: Callable[[str], None] | None = None) -> Connection:
        """Connection.open (``on_silence``: its), honouring the reconnect backoff of this address."""
        backoff = self._backoffs.setdefault(
            (host, port), Backoff(self.options.reconnect_backoff, self.options.reconnect_backoff_max))
        wait = backoff.wait_time(time.monotonic())
        if wait > 0:
            await asyncio.sleep(wait)
        self.check_open()
        # A task of the pool's own, so that close() can end it: a connection that finished
        # opening after close() returned would leave its socket and reader task behind.
        opening = asyncio.create_task(Connection.open(host, port, self.options, node_id=node_id, monitor=self.monitor,
                                                      on_silence=on_silence, intended=self._intended(node_id)),
                                      name="aiokafka-lite connect")
        self._opening.add(opening)
        opening.add_done_callback(self._opening.discard)
        try:
            conn = await opening
        except asyncio.CancelledError:
            orphan = _opened(opening)
            if orphan is not None:  # opened just before our cancellation: nobody else can close it
                await orphan.close()
            raise
        except MisroutedConnectionError as exc:  # no retry helps before a rebootstrap: not a connect failure
            backoff.failed(time.monotonic())
            log.debug("%s", exc)
            if self.on_misrouted is not None:
                self.on_misrouted(exc)
            raise
        except TRANSIENT as exc:
            mismatch = await plaintext_listener(exc, host, port, self.options)
            if mismatch is not None:  # a TLS client on a plaintext listener: no retry will change it
                raise mismatch from exc
            backoff.failed(time.monotonic())
            self.monitor.connect_failed(connection_name(host, port, node_id), (host, port), exc)
            raise
        backoff.succeeded()
        if conn.broker_versions.get(API_VERSIONS.key, (0, 0))[1] >= CLUSTER_CHECK_VERSION:
            self._names_understood = True
        return conn

    def _intended(self, node_id: int | None) -> IntendedBroker | None:
        """The cluster and node a connection to ``node_id`` is meant for, when both are known
        (never for a bootstrap connection: no node id), the brokers understand them and the check is on."""
        cluster_id = self.metadata.cluster_id
        if node_id is None or node_id < 0 or cluster_id is None or not self._names_understood \
                or not self.options.checks_cluster:
            return None
        return IntendedBroker(cluster_id, node_id)

    def least_loaded_node(self) -> int | None:
        """A broker with an open connection and the fewest requests in flight, else any known broker."""
        open_conns = [c for (_node, lane), c in self._pooled_conns.items()
                      if lane == 0 and not c.closed and c.node_id in self.metadata.brokers]
        if open_conns:
            best = min(open_conns, key=lambda c: c.in_flight)
            return best.node_id
        now = time.monotonic()
        ready = [n for n, b in self.metadata.brokers.items()
                 if self._backoffs.get((b.host, b.port), _NO_BACKOFF).wait_time(now) == 0]
        choices = ready or list(self.metadata.brokers)
        return random.choice(choices) if choices else None

    def candidate_nodes(self) -> list[int]:
        """The known brokers to ask, the least loaded first, the others in random order."""
        first = self.least_loaded_node()
        rest = [n for n in self.metadata.brokers if n != first]
        random.shuffle(rest)
        return ([first] if first is not None else []) + rest

    def retire(self, conn: Connection) -> None:
        """Close ``conn`` in the background; close() awaits whatever is still closing."""
        task = asyncio.get_running_loop().create_task(conn.close())
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def close(self, dedicated: Iterable[Connection] = ()) -> None:
        """Close every connection: the shared ones, ``dedicated`` (the coordinators'), the retiring
        ones, and those still opening. Idempotent."""
        self.closed = True
        conns = [*self._pooled_conns.values(), *dedicated]
        self._pooled_conns.clear()
        for opening in self._opening:
            opening.cancel()
        closing = [asyncio.ensure_future(c.close()) for c in conns] + list(self._retiring) + list(self._opening)
        if closing:
            await asyncio.wait(closing)


_NO_BACKOFF = Backoff(0.0, 0.0)


def _opened(opening: asyncio.Task[Connection]) -> Connection | None:
    """The connection ``opening`` opened, if it did. Its awaiter may be cancelled after that, in
    the same loop iteration, and then never takes it."""
    if opening.done() and not opening.cancelled() and opening.exception() is None:
        return opening.result()
    return None
