"""Is the group membership healthy? The verdict metrics() reports and a /health probe serves.

Unhealthy when joining has kept failing for longer than max_poll_interval_ms (the longest a
legitimate rebalance may take), or when the coordinator has been unreachable for longer than
session_timeout_ms (it would have evicted a member by then): poll() keeps returning empty in both
cases, and this says why, with the last error. Pure: every input is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._net.failure_log import FailureLog


@dataclass(frozen=True)
class HealthInputs:
    group_id: str
    max_poll_interval_ms: int
    session_timeout_ms: int
    joins: FailureLog  # the current streak of failed join attempts
    lookups: FailureLog  # failed FindCoordinator lookups
    heartbeats: FailureLog | None  # failed heartbeats (counted while the member is STABLE)
    coordinator_unreachable_since: float | None  # during a join (monotonic)


def group_health(inputs: HealthInputs, now: float) -> dict[str, Any]:
    joining_for = inputs.joins.failing_for(now)
    unreachable_since, unreachable_error = _unreachable(inputs)
    unreachable_for = 0.0 if unreachable_since is None else now - unreachable_since
    problem: str | None = None
    last_error = inputs.joins.last_error if inputs.joins.failing else unreachable_error
    if joining_for * 1000 > inputs.max_poll_interval_ms:
        problem = (f"joining group {inputs.group_id!r} has failed for {joining_for:.1f} s "
                   f"({inputs.joins.failures} attempts), longer than max_poll_interval_ms="
                   f"{inputs.max_poll_interval_ms}")
    elif unreachable_for * 1000 > inputs.session_timeout_ms:
        problem = (f"the coordinator of group {inputs.group_id!r} has been unreachable for "
                   f"{unreachable_for:.1f} s, longer than session_timeout_ms={inputs.session_timeout_ms}")
        last_error = unreachable_error
    return {
        "healthy": problem is None,
        "problem": problem,
        "last_error": last_error,
        "join_failures": inputs.joins.failures,
        "joining_failing_seconds": joining_for,
        "coordinator_unreachable_seconds": unreachable_for,
    }


def _unreachable(inputs: HealthInputs) -> tuple[float | None, str | None]:
    """Since when the coordinator has not answered (the earliest of the ongoing streaks), and the
    most recent error among them."""
    streaks: list[tuple[float, FailureLog]] = []
    if inputs.coordinator_unreachable_since is not None:
        streaks.append((inputs.coordinator_unreachable_since, inputs.joins))
    for streak in (inputs.lookups, inputs.heartbeats):
        if streak is not None and streak.failing_since is not None:
            streaks.append((streak.failing_since, streak))
    if not streaks:
        return None, None
    latest = max((s for _, s in streaks), key=lambda s: s.last_failed_at or 0.0)
    return min(since for since, _ in streaks), latest.last_error
