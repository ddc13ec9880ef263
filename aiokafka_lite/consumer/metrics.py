"""consumer.metrics(): a plain-dict snapshot, cheap enough to serve from a /metrics endpoint."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .health import HealthInputs, group_health

if TYPE_CHECKING:
    from .consumer import Consumer


def snapshot(consumer: Consumer) -> dict[str, Any]:
    now = time.monotonic()
    timers = consumer._timers
    out: dict[str, Any] = {
        "started": consumer._started,
        "closed": consumer._closed,
        "polls": consumer._polls,
        "seconds_since_last_poll": timers.seconds_since_last_poll(now),
        "heartbeat_mode": consumer.config.heartbeat_mode,
        "loop_stalls": consumer._stall.stalls,
        "longest_loop_stall_seconds": consumer._stall.longest_stall,
        "assignment": sorted(f"{tp.topic}-{tp.partition}" for tp in consumer._subscription.assigned()),
        "lag": _lag(consumer),
    }
    group = consumer._group
    if group is not None:
        m = group.membership
        out.update({
            "group_id": group.group_id,
            "group_state": m.state.name,
            "generation_id": m.generation_id,
            "member_id": m.member_id,
            "rebalances": group.rebalances,
            "last_rebalance_seconds": group.last_rebalance_seconds,
        })
    live = consumer._liveness
    if group is not None:
        config = consumer.config
        out["group_health"] = group_health(HealthInputs(
            group.group_id, config.max_poll_interval_ms, config.session_timeout_ms,
            joins=group.join_failures, lookups=group.cluster.coordinator_lookups(group.group_id),
            heartbeats=live.failure_log if live is not None and group.membership.is_stable else None,
            coordinator_unreachable_since=group.coordinator_unreachable_since), now)
    cluster = consumer._cluster
    if cluster is not None:
        out["connection_failures"] = cluster.monitor.failing()  # subject -> last error, while failing
    if live is not None:
        out.update({
            "heartbeats_sent": live.heartbeats_sent,
            "heartbeat_failures": live.heartbeat_failures,
            "heartbeat_rtt_seconds": timers.last_heartbeat_rtt,  # of the last successful heartbeat
            "poll_interval_lapses": live.poll_lapses,
            "last_leave_delay_seconds": live.last_leave_delay,
        })
    return out


def _lag(consumer: Consumer) -> dict[str, int | None]:
    lag: dict[str, int | None] = {}
    for tp, st in consumer._subscription.assignment.items():
        end = st.high_watermark
        lag[f"{tp.topic}-{tp.partition}"] = None if end is None or st.position is None else max(end - st.position, 0)
    return lag

