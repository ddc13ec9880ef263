"""consumer.metrics(): a plain-dict snapshot, cheap enough to serve from a /metrics endpoint."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..liveness.health import group_health

if TYPE_CHECKING:
    from .._net.cluster import Cluster
    from ..group.member import GroupMember
    from ..liveness.timers import LivenessTimers
    from ..subscription import SubscriptionState


def snapshot(consumer_figures: dict[str, Any], subscription: SubscriptionState, timers: LivenessTimers,
             member: GroupMember | None, cluster: Cluster | None) -> dict[str, Any]:
    """The consumer's own figures, then its assignment and lag, its member's and its connections'."""
    now = time.monotonic()
    out = dict(consumer_figures)
    out.update({
        "seconds_since_last_poll": timers.seconds_since_last_poll(now),
        "assignment": sorted(f"{tp.topic}-{tp.partition}" for tp in subscription.assigned()),
        "lag": _lag(subscription),
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


def _lag(subscription: SubscriptionState) -> dict[str, int | None]:
    lag: dict[str, int | None] = {}
    for tp, st in subscription.assignment.items():
        end = st.high_watermark
        lag[f"{tp.topic}-{tp.partition}"] = None if end is None or st.position is None else max(end - st.position, 0)
    return lag
