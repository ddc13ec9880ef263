"""consumer.metrics(): a plain-dict snapshot, cheap enough to serve from a /metrics endpoint."""

from __future__ import annotations

import bisect
import time
from typing import TYPE_CHECKING, Any

from ..liveness.health import group_health

if TYPE_CHECKING:
    from .._net.cluster import Cluster
    from ..fetch.fetcher import Fetcher
    from ..group.member import GroupMember
    from ..liveness.timers import LivenessTimers
    from ..structs import TopicPartition
    from ..subscription import SubscriptionState


def snapshot(consumer_figures: dict[str, Any], subscription: SubscriptionState, timers: LivenessTimers,
             member: GroupMember | None, cluster: Cluster | None, fetcher: Fetcher | None) -> dict[str, Any]:
    """The consumer's own figures, then its fetcher's, its assignment and lag, its member's and its
    connections'."""
    now = time.monotonic()
    # Each assigned partition's key ("topic-partition"), made once for the three figures that use it:
    # a Prometheus scrape takes a snapshot, and at 1,000 partitions these loops are most of its cost.
    keys = {tp: f"{tp.topic}-{tp.partition}" for tp in subscription.assignment}
    out = dict(consumer_figures)
    out.update(_fetch_figures(fetcher, keys))
    lag = _lag(subscription, keys)
    out.update({
        "seconds_since_last_poll": timers.seconds_since_last_poll(now),
        "assignment": sorted(lag),
        "lag": lag,
    })
    if member is not None:
        out.update(member.metrics())
        out["group_health"] = group_health(member.health_inputs(), now)
        out["heartbeat_rtt_seconds"] = timers.last_heartbeat_rtt  # of the last successful heartbeat
    if cluster is not None:
        out["connection_failures"] = cluster.monitor.failing()  # subject -> last error, while failing
        out["rebootstraps"] = cluster.recovery.rebootstraps  # back to bootstrap_servers (KIP-899)
        out["sasl_reauthentications"] = cluster.monitor.sasl_reauthentications  # KIP-368
    return out


def _fetch_figures(fetcher: Fetcher | None, keys: dict[TopicPartition, str]) -> dict[str, Any]:
    if fetcher is None:  # not started
        return {"records_consumed": 0, "bytes_consumed": 0, "fetch_sessions": {}, "fetching_from": {}}
    return {**fetcher.consumed(), "fetch_sessions": fetcher.sessions(), "fetching_from": {
        keys.get(tp) or f"{tp.topic}-{tp.partition}": node for tp, node in fetcher.fetch_sources().items()}}


def _lag(subscription: SubscriptionState, keys: dict[TopicPartition, str]) -> dict[str, int | None]:
    lag: dict[str, int | None] = {}
    for tp, st in subscription.assignment.items():
        end, position = st.high_watermark, st.position
        lag[keys[tp]] = None if end is None or position is None else end - position if end > position else 0
    return lag


# Upper bounds (seconds) of the commit latency buckets: a commit on loopback takes about a
# millisecond, one retried over a lost connection seconds.
COMMIT_LATENCY_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class CommitFigures:
    """How the consumer's commits ended: those that completed, with their latency, and the
    others (an error, a lapsed timeout, a close that cancelled them). A few operations per commit."""

    def __init__(self) -> None:
        self.failures = 0
        self._counts = [0] * (len(COMMIT_LATENCY_BOUNDS) + 1)  # per bucket, the last one past every bound
        self._sum = 0.0

    def completed(self, seconds: float) -> None:
        self._counts[bisect.bisect_left(COMMIT_LATENCY_BOUNDS, seconds)] += 1
        self._sum += seconds

    def failed(self) -> None:
        self.failures += 1

    def as_dict(self) -> dict[str, Any]:
        cumulative, buckets = 0, []
        for bound, count in zip(COMMIT_LATENCY_BOUNDS, self._counts, strict=False):
            cumulative += count
            buckets.append([bound, cumulative])
        total = cumulative + self._counts[-1]
        return {"commits": total, "commit_failures": self.failures,
                "commit_latency_seconds": {"count": total, "sum": self._sum, "buckets": buckets}}
