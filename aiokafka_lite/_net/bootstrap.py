"""The bootstrap: reaching the cluster through ``bootstrap_servers``, in rounds with backoff, until
one of them answers Metadata; and again (a rebootstrap, KIP-899) when the known brokers are lost.

One (re)bootstrap runs at a time; the tasks that asked meanwhile take its result. The servers'
failures are counted by BootstrapTries and said after a round no server answered (a WARNING the
first time while the cluster was never reached); once it was, a failing rebootstrap is brokers
restarting, said by the quieter metadata log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence

from ..errors import (
    BootstrapResolutionError,
    BrokerError,
    ConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from .backoff import Backoff
from .bootstrap_tries import BootstrapTries
from .connect_failure import fails_for_good
from .connection import Connection
from .exceptions import TRANSIENT
from .failure_log import FailureLog
from .listener_probe import sasl_listener
from .metadata import BrokerInfo, MetadataCache
from .options import ConnectionOptions
from .pool import ConnectionPool
from .recovery import MetadataRecovery

log = logging.getLogger("aiokafka_lite.net")

# One Metadata round trip on a connection, applied to the cache (None: every topic).
AskMetadata = Callable[[Connection, list[str] | None], Awaitable[None]]


class Bootstrap:
    def __init__(self, servers: Sequence[tuple[str, int]], options: ConnectionOptions, *,
                 metadata: MetadataCache, recovery: MetadataRecovery, pool: ConnectionPool,
                 metadata_failures: FailureLog, ask: AskMetadata, retry_limit: str | None) -> None:
        """``retry_limit``: how long the callers keep trying to reach the cluster, as the first
        failure's WARNING says it (e.g. "60 s (default_api_timeout_ms)")."""
        self.servers = list(servers)
        self.options = options
        self.metadata = metadata
        self.recovery = recovery
        self.pool = pool
        self.metadata_failures = metadata_failures
        self.ask = ask
        self._lock = asyncio.Lock()  # one (re)bootstrap at a time; the others wait for it
        self._tries = BootstrapTries(log, self.servers, retry_limit)
        # KIP-909: when the first round found no bootstrap name resolving (None: a name resolved).
        self._unresolved_since: float | None = None

    async def within(self, seconds: float | None) -> None:
        """Bootstrap within ``seconds``, or raise the KafkaTimeoutError naming each server's failures."""
        try:
            async with asyncio.timeout(seconds):
                await self.run(None, None if seconds is None else f"{seconds:g} s")
        except KafkaError:
            raise
        except TimeoutError as exc:
            raise self._unreachable(seconds) from exc

    def unreachable(self, seconds: float | None) -> KafkaTimeoutError | None:
        """Until the cluster first answers: the error for a caller that waited ``seconds`` for it,
        naming each bootstrap server's last failure and number of tries (None once it answered)."""
        return None if self._tries.reached else self._unreachable(seconds)

    def failures(self) -> str | None:
        """Until the cluster first answers: each bootstrap server's last failure and number of
        tries ("127.0.0.1:9093 refused the connection (5 tries)"); None once it answered or before
        any failed."""
        return None if self._tries.reached else self._tries.failures()

    def _unreachable(self, seconds: float | None) -> KafkaTimeoutError:
        return KafkaTimeoutError(f"could not reach the bootstrap servers within {seconds} s: "
                                 f"{self._tries.failures() or _servers(self.servers)}")

    async def run(self, reason: str | None, retry_limit: str | None = None) -> None:
        """Bootstrap unless another task did while this one waited; ``reason``: this is a
        rebootstrap (KIP-899), said once at INFO, and the known brokers are forgotten first."""
        known_at = self.metadata.updated_at
        async with self._lock:
            if self.metadata.brokers and self.metadata.updated_at != known_at:
                return  # fresh metadata arrived while this task waited
            if reason is not None:
                self.recovery.rebootstrapping()
                log.info("rebootstrapping from %s: %s (known brokers were %s)",
                         _servers(self.servers), reason, _brokers(self.metadata.brokers.values()))
                self.metadata.forget_brokers()
            await self._rounds(retry_limit)

    async def _rounds(self, retry_limit: str | None) -> None:
        backoff = Backoff(self.options.reconnect_backoff, self.options.reconnect_backoff_max)
        tries = self._tries
        while True:
            # Said after the round, not as each server fails: a server down while the next one
            # answers is no news for a client that reaches its cluster.
            failed: list[KafkaError] = []
            for_good: list[KafkaError] = []
            for host, port in self.servers:
                try:
                    await self._from(host, port, retry_limit)
                    tries.succeeded(f"{host}:{port}")
                    return
                except (*TRANSIENT, BrokerError) as exc:
                    if tries.reached:  # brokers restarting: the quieter log
                        self.metadata_failures.failed(f"bootstrap server {host}:{port} failed: {exc}")
                    (for_good if fails_for_good(exc) else failed).append(exc)
                    tries.failed(f"{host}:{port}", exc)
            if not tries.reached and len(for_good) == len(self.servers):
                self._no_name_resolves(for_good)
            else:
                self._unresolved_since = None  # a name resolved: KIP-909's clock starts over
            for failure in failed + for_good:  # some other server may answer: keep trying, said once
                tries.say(failure, retry_limit)
            backoff.failed(time.monotonic())
            await asyncio.sleep(backoff.delay())

    def _no_name_resolves(self, failures: list[KafkaError]) -> None:
        """No bootstrap name resolved this round. bootstrap_resolve_timeout_ms 0 (Java's default):
        a ConfigError at once, as Java's "No resolvable bootstrap urls"; else (KIP-909) the names
        are retried until that long has passed since the first such round, then it is final."""
        causes = "; ".join(str(exc) for exc in failures)
        limit = self.options.bootstrap_resolve_timeout
        if limit <= 0:
            raise ConfigError(f"bootstrap_servers: no address resolves: {causes}")
        now = time.monotonic()
        if self._unresolved_since is None:
            self._unresolved_since = now
        elif now - self._unresolved_since >= limit:
            raise BootstrapResolutionError(
                f"bootstrap_servers: no address resolved within bootstrap_resolve_timeout_ms "
                f"({limit * 1000:g} ms): {causes}")

    async def _from(self, host: str, port: int, retry_limit: str | None) -> None:
        # A server silent to ApiVersions is said a few seconds in, not at request_timeout_ms.
        conn = await self.pool.open(host, port, None, lambda silence: self._tries.waiting(silence, retry_limit))
        try:
            await self.ask(conn, None)
        except BaseException as exc:
            await conn.close()
            if isinstance(exc, KafkaConnectionError) and not self._tries.reached and not self.pool.closed:
                # Closed at the first request after ApiVersions: a SASL listener does that to a
                # client without SASL; a probe tells it from a broker going away.
                mismatch = await sasl_listener(host, port, self.options)
                if mismatch is not None:
                    raise mismatch from exc
            raise
        # The bootstrap address is an advertised broker: the pool keeps the connection as its entry.
        if not await self.pool.adopt(conn, host, port):
            await conn.close()


def _servers(servers: Sequence[tuple[str, int]]) -> str:
    return ",".join(f"{h}:{p}" for h, p in servers)


def _brokers(brokers: Iterable[BrokerInfo]) -> str:
    return ", ".join(f"{b.node_id}@{b.host}:{b.port}" for b in brokers) or "none"
