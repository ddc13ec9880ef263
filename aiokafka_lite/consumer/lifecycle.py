"""The consumer's life cycle: start() (the attempt to connect, shared by the calls that wait for
it), close() (its state, and its two parts as tasks the consumer owns: the graceful part is
closing's close_gracefully, the forced part cancels and awaits everything here), and the side
tasks the consumer starts without awaiting them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._net.cluster import Cluster
from ..config import ConsumerConfig
from ..errors import ConsumerClosedError, KafkaTimeoutError
from ..liveness.closing import cancel
from ..liveness.start_attempt import StartAttempt
from ..protocol import native
from ..structs import GroupMembershipOperation
from .closing import leave_by_force
from .wiring import make_cluster

if TYPE_CHECKING:
    from ..fetch.fetcher import Fetcher
    from ..fetch.offset_lookup import OffsetLookup
    from ..group.member import GroupMember
    from ..liveness.stall import StallMonitor
    from .commits import Commits
    from .poll_steps import PollSteps
    from .telemetry import MetricsPush
    from .unsubscribing import UnsubscribeTask

log = logging.getLogger("aiokafka_lite.consumer")


class Startup:
    """start(): one attempt to connect at a time (liveness/start_attempt.py), made by the first call that
    needs the cluster; `connected` is given the bootstrapped cluster."""

    def __init__(self, config: ConsumerConfig, connected: Callable[[Cluster], None],
                 is_closed: Callable[[], bool]) -> None:
        self.started = False
        self._config = config
        self._connected = connected
        self._is_closed = is_closed
        self._attempt: StartAttempt | None = None
        self._connecting: Cluster | None = None  # the attempt's: why it cannot reach the cluster

    @property
    def attempted(self) -> bool:
        return self._attempt is not None

    async def ensure_started(self) -> None:
        if self.started:
            return
        attempt = self._attempt
        if attempt is None or attempt.task.done():  # none yet, or a failed one: tried again
            if self._is_closed():  # a commit queued before close() must not start a fresh attempt
                raise ConsumerClosedError("the consumer was closed before it connected")
            attempt = self._attempt = StartAttempt(self._start_once, self._config.default_api_timeout)
        await attempt.wait()

    async def _start_once(self) -> None:
        native.warn_if_build_failed()  # a consumer about to decode at half speed, unasked
        cluster = self._connecting = make_cluster(self._config)
        try:
            await cluster.bootstrap(timeout=None)  # bounded by each caller waiting for it
        except BaseException:
            await cluster.close()
            raise
        self._connected(cluster)
        self.started = True

    def failures(self) -> str | None:
        """While start() has not succeeded: why the attempt cannot reach the cluster (each bootstrap
        server's last failure and number of tries), for metrics()["bootstrap_failures"]."""
        return None if self.started or self._connecting is None else self._connecting.bootstrap_failures()

    async def stop(self) -> None:
        """Cancel the attempt under way (close()), so nothing it would open is left open."""
        if self._attempt is not None:
            await cancel(self._attempt.task)

    def unreached(self, exc: KafkaTimeoutError, limit: float | None, what: str | None = None) -> KafkaTimeoutError:
        """A call that timed out before the cluster ever answered: each bootstrap server's last failure."""
        unreached = None if self.started or self._connecting is None else self._connecting.unreachable(limit)
        if unreached is None:
            return exc
        return unreached if what is None else KafkaTimeoutError(f"{what} did not complete within {limit} s: "
                                                                f"{unreached}")


class SideTasks:
    """Work the consumer starts and does not wait for (a LeaveGroup after unsubscribe()); the
    forced part of close() cancels what is left. A failure is logged."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    def spawn(self, coro: Any) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.ensure_future(coro)
        self._tasks.add(fut)
        fut.add_done_callback(self._done)
        return fut

    def running(self) -> list[asyncio.Future[Any]]:
        return list(self._tasks)

    def _done(self, fut: asyncio.Future[Any]) -> None:
        self._tasks.discard(fut)
        if not fut.cancelled() and fut.exception() is not None:
            log.info("background operation failed: %s", fut.exception())


async def close_by_force(poll_steps: PollSteps, unsubscribing: UnsubscribeTask, commits: Commits,
                         member: GroupMember | None, stall: StallMonitor, side_tasks: SideTasks,
                         telemetry: MetricsPush, fetcher: Fetcher | None, offsets: OffsetLookup | None,
                         cluster: Cluster | None,
                         operation: GroupMembershipOperation = GroupMembershipOperation.DEFAULT) -> None:
    """The forced part of close(), once the start attempt is stopped: cancel and await every
    task the consumer owns, close every connection."""
    await poll_steps.cancel()
    await cancel(unsubscribing.task)
    for commit in commits.pending():
        await cancel(commit)
    if member is not None:
        await member.stop_liveness()
        await leave_by_force(member, operation)
    await stall.stop()
    for fut in side_tasks.running():
        await cancel(fut)
    await telemetry.close()  # its terminating push was the graceful part's
    if fetcher is not None:
        await fetcher.close()
    if offsets is not None:
        await offsets.close()
    if cluster is not None:
        await cluster.close()
