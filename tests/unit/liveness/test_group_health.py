"""group_health(): the verdict metrics()["group_health"] and the FastAPI /health report."""

from __future__ import annotations

import logging

import pytest

from aiokafka_lite._net.failure_log import FailureLog
from aiokafka_lite.liveness.health import HealthInputs, group_health

log = logging.getLogger("aiokafka_lite.test.health")
T0 = 1000.0


def streak(subject: str) -> FailureLog:
    return FailureLog(log, subject, warn_after_failures=None)


def inputs(joins: FailureLog, lookups: FailureLog | None = None, heartbeats: FailureLog | None = None,
           unreachable_since: float | None = None) -> HealthInputs:
    return HealthInputs("g", max_poll_interval_ms=10000, session_timeout_ms=6000, joins=joins,
                        lookups=lookups or streak("lookup"), heartbeats=heartbeats,
                        coordinator_unreachable_since=unreachable_since)


def test_no_failures_is_healthy():
    health = group_health(inputs(streak("join")), T0)
    assert health == {"healthy": True, "problem": None, "last_error": None, "join_failures": 0,
                      "joining_failing_seconds": 0.0, "coordinator_unreachable_seconds": 0.0}


def test_join_failing_longer_than_max_poll_interval_is_unhealthy_with_the_last_error():
    joins = streak("join")
    for second in range(12):
        joins.failed(f"error {second}", now=T0 + second)
    assert group_health(inputs(joins), T0 + 9.0)["healthy"] is True  # a long rebalance is allowed
    health = group_health(inputs(joins), T0 + 11.0)
    assert health["healthy"] is False
    assert health["problem"] == ("joining group 'g' has failed for 11.0 s (12 attempts), longer than "
                                 "max_poll_interval_ms=10000")
    assert health["last_error"] == "error 11"
    joins.recovered(now=T0 + 12.0)
    assert group_health(inputs(joins), T0 + 12.0)["healthy"] is True


def test_coordinator_unreachable_longer_than_the_session_timeout_is_unhealthy():
    joins, lookups = streak("join"), streak("lookup")
    joins.failed("connection lost awaiting JoinGroup v6", now=T0)
    lookups.failed("COORDINATOR_NOT_AVAILABLE", now=T0 + 2.0)
    health = group_health(inputs(joins, lookups, unreachable_since=T0), T0 + 6.5)
    assert health["healthy"] is False
    assert health["problem"] == ("the coordinator of group 'g' has been unreachable for 6.5 s, longer than "
                                 "session_timeout_ms=6000")
    assert health["last_error"] == "COORDINATOR_NOT_AVAILABLE"  # the most recent of the streaks
    assert health["coordinator_unreachable_seconds"] == pytest.approx(6.5)


def test_heartbeat_failures_count_as_an_unreachable_coordinator():
    heartbeats = streak("heartbeat")
    heartbeats.failed("refused", now=T0)
    assert group_health(inputs(streak("join"), heartbeats=heartbeats), T0 + 5.0)["healthy"] is True
    health = group_health(inputs(streak("join"), heartbeats=heartbeats), T0 + 7.0)
    assert health["healthy"] is False
    assert health["last_error"] == "refused"
