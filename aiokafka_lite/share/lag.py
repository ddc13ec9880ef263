"""The ShareConsumer's share lag per assigned partition (KIP-1226), for metrics()["lag"] and the
Prometheus ``partition_lag`` family.

A scrape does no I/O, so an owned task asks the group's coordinator (DescribeShareGroupOffsets v1,
group/share/offsets.py) at most every ``share_lag_refresh_ms`` while the member has partitions
assigned, each request within ``request_timeout_ms``; ``snapshot()`` then reads what it last heard.
Nothing here fails the consumer: a failure is said once at INFO and counted at DEBUG after (the last
figures stay); a broker without v1 (no lag to give) is said once at INFO, and nothing more is asked.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .._net.failure_log import FailureLog
from ..errors import KafkaError, UnsupportedVersionError
from ..group.share.offsets import LAG_VERSION, lag_not_available_note, start_offsets
from ..group.tasks import Wakeup
from ..liveness.closing import cancel
from ..structs import TopicPartition

if TYPE_CHECKING:
    from .._net.cluster import Cluster

log = logging.getLogger("aiokafka_lite.share")

Assignment = Callable[[], Iterable[TopicPartition]]


class ShareLag:
    """The last lag the coordinator reported per assigned partition, and the task that asks it."""

    def __init__(self, group_id: str, refresh_ms: int, request_timeout: float) -> None:
        self.group_id = group_id
        self.interval = refresh_ms / 1000  # 0: never asked
        self.request_timeout = request_timeout
        self.failures = FailureLog(log, f"share group {group_id}: share lag (DescribeShareGroupOffsets)",
                                   warn_after_failures=None)
        self.refreshes = 0
        self.unavailable: str | None = None  # why nothing more is asked
        self._assignment: Assignment = lambda: ()
        self._lag: dict[TopicPartition, int | None] = {}
        self._refreshed_at: float | None = None  # monotonic
        self._wakeup = Wakeup()  # poked when the assignment changes
        self._task: asyncio.Task[None] | None = None

    def start(self, cluster: Cluster, assignment: Assignment) -> None:
        """Read ``assignment()`` for the partitions; the task starts unless share_lag_refresh_ms is 0."""
        self._assignment = assignment
        if self.interval > 0 and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(cluster), name="aiokafka-lite share lag")

    def assignment_changed(self) -> None:
        """Forget the partitions no longer assigned; wake the task if it waits for an assignment."""
        assigned = set(self._assignment())
        self._lag = {tp: lag for tp, lag in self._lag.items() if tp in assigned}
        self._wakeup.poke()

    async def stop(self) -> None:
        """Cancel and await the task. Idempotent."""
        task, self._task = self._task, None
        await cancel(task)

    def snapshot(self) -> dict[str, int | None]:
        """The Consumer's ``lag`` shape: "topic-partition" -> records, None where not known."""
        return {f"{tp.topic}-{tp.partition}": self._lag.get(tp) for tp in sorted(self._assignment())}

    def metrics(self) -> dict[str, Any]:
        at = self._refreshed_at
        return {"refreshes": self.refreshes, "failures": self.failures.total_failures,
                "seconds_ago": None if at is None else time.monotonic() - at, "unavailable": self.unavailable}

    async def _run(self, cluster: Cluster) -> None:
        loop = asyncio.get_running_loop()
        last: float | None = None
        while True:
            if not set(self._assignment()):
                await self._wakeup.sleep(math.inf)
                continue
            wait = 0.0 if last is None else last + self.interval - loop.time()
            if wait > 0:
                await self._wakeup.sleep(wait)
                continue
            last = loop.time()
            if not await self._refresh(cluster):
                return

    async def _refresh(self, cluster: Cluster) -> bool:
        """One request; False when the broker reports no lag (nothing more is asked)."""
        try:
            node = cluster.coordinator(self.group_id)
            if node is None:
                node = await cluster.find_coordinator(self.group_id, timeout=self.request_timeout)
            offsets, version = await start_offsets(cluster, node, self.group_id, timeout=self.request_timeout,
                                                   lag_only=True)
        except UnsupportedVersionError as exc:
            return self._no_lag(str(exc))
        except Exception as exc:  # figures for metrics only: never the consumer's failure
            self.failures.failed(exc if isinstance(exc, KafkaError) else repr(exc))
            return True
        if version < LAG_VERSION:
            return self._no_lag(lag_not_available_note(version))
        self.failures.recovered()
        self.refreshes += 1
        self._refreshed_at = time.monotonic()
        assigned = set(self._assignment())
        self._lag = {tp: figures[2] for tp, figures in offsets.items() if tp in assigned}
        return True

    def _no_lag(self, why: str) -> bool:
        self.unavailable = why
        log.info("share group %s: no share lag in metrics(): %s; not asked again", self.group_id, why)
        return False
