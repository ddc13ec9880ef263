"""Which client metrics a push carries: ``metrics()`` snapshots as KIP-714's standard names.

Only figures the consumer measures as Java's metric of that name means them, named as Java's
consumer names them in its pushes (``org.apache.kafka.`` + group + name, dots for dashes):

    consumer.last.poll.seconds.ago                    gauge  seconds_since_last_poll
    consumer.coordinator.assigned.partitions          gauge  assignment
    consumer.coordinator.commit.latency.avg           gauge  ms, the commits completed since the last push
    consumer.coordinator.commit.total                 sum    commits
    consumer.coordinator.heartbeat.total              sum    heartbeats_sent
    consumer.coordinator.rebalance.total              sum    rebalances
    consumer.fetch.manager.records.consumed.total     sum    records_consumed
    consumer.fetch.manager.bytes.consumed.total       sum    bytes_consumed
    consumer.fetch.manager.records.lag                gauge  lag, per partition (topic, partition)

The coordinator ones only for a consumer with a group_id. Sums are cumulative from the consumer's
start, or with delta temporality the change since the last collection. Pure: the snapshot and the
time come in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..protocol.otlp import Point

PREFIX = "org.apache.kafka.consumer."

# (name after PREFIX, metrics() key, description)
COUNTERS = (
    ("coordinator.commit.total", "commits", "The total number of commit calls"),
    ("coordinator.heartbeat.total", "heartbeats_sent", "The total number of heartbeats"),
    ("coordinator.rebalance.total", "rebalances", "The total number of rebalance events"),
    ("fetch.manager.records.consumed.total", "records_consumed", "The total number of records consumed"),
    ("fetch.manager.bytes.consumed.total", "bytes_consumed", "The total number of bytes consumed"),
)


class MetricsCollector:
    """Turns snapshots into points; remembers the last collection's counts for delta sums and
    the commit latency average."""

    def __init__(self, start_ns: int) -> None:
        self._start_ns = start_ns
        self._last_ns = start_ns
        self._last: dict[str, float] = {}
        self._last_commits = (0, 0.0)  # completed commits and their summed seconds

    def collect(self, snapshot: Mapping[str, Any], now_ns: int, delta: bool) -> list[Point]:
        points = self._gauges(snapshot, now_ns)
        in_group = snapshot.get("group_id") is not None
        for name, key, description in COUNTERS:
            value = snapshot.get(key)
            if not isinstance(value, int) or (name.startswith("coordinator.") and not in_group):
                continue  # without a group there is no coordinator to count for
            previous = self._last.get(key, 0)
            self._last[key] = value
            points.append(Point(PREFIX + name, value - previous if delta else value, now_ns,
                                description=description, start_ns=self._last_ns if delta else self._start_ns,
                                delta=delta))
        self._last_ns = now_ns
        return points

    def _gauges(self, snapshot: Mapping[str, Any], now_ns: int) -> list[Point]:
        points: list[Point] = []
        since_poll = snapshot.get("seconds_since_last_poll")
        if isinstance(since_poll, (int, float)):
            points.append(Point(PREFIX + "last.poll.seconds.ago", float(since_poll), now_ns, unit="s",
                                description="The number of seconds since the last poll() invocation"))
        in_group = snapshot.get("group_id") is not None
        if in_group and isinstance(snapshot.get("assignment"), list):
            points.append(Point(PREFIX + "coordinator.assigned.partitions", len(snapshot["assignment"]), now_ns,
                                description="The number of partitions currently assigned to this consumer"))
        latency = self._commit_latency(snapshot.get("commit_latency_seconds"))
        if latency is not None and in_group:
            points.append(Point(PREFIX + "coordinator.commit.latency.avg", latency, now_ns, unit="ms",
                                description="The average time taken for a commit request"))
        for key, lag in (snapshot.get("lag") or {}).items():
            if lag is None:
                continue
            topic, _, partition = str(key).rpartition("-")  # "topic-partition"; a topic may hold "-"
            points.append(Point(PREFIX + "fetch.manager.records.lag", int(lag), now_ns,
                                description="The latest lag of the partition",
                                attributes={"topic": topic, "partition": partition}))
        return points

    def _commit_latency(self, figures: object) -> float | None:
        """Milliseconds per commit completed since the last collection; None if none completed."""
        if not isinstance(figures, Mapping):
            return None
        count, total = int(figures.get("count", 0)), float(figures.get("sum", 0.0))
        last_count, last_total = self._last_commits
        self._last_commits = (count, total)
        if count <= last_count:
            return None
        return (total - last_total) / (count - last_count) * 1000
