"""Say-it-once logging (FailureLog, ConnectionMonitor) and the exponential retry backoff."""

from __future__ import annotations

import logging
import random

import pytest

from aiokafka_lite._net.backoff import Backoff
from aiokafka_lite._net.failure_log import FailureLog
from aiokafka_lite._net.monitor import DROPS_BEFORE_WARNING, ConnectionMonitor
from aiokafka_lite.protocol.messages import FETCH, JOIN_GROUP

LOGGER = "aiokafka_lite.test.failure_log"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records]


@pytest.fixture
def captured(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    return caplog


def test_first_failure_warns_repeats_are_debug_with_a_count_recovery_is_info(captured):
    clock = FakeClock()
    failures = FailureLog(logging.getLogger(LOGGER), "broker b", clock=clock)
    for _ in range(5):
        failures.failed("refused")
        clock.now += 0.5
    failures.recovered(detail="connected")
    assert lines(captured) == [
        ("WARNING", "broker b: refused"),
        ("DEBUG", "broker b: refused (2 failures in a row over 0.5 s)"),
        ("DEBUG", "broker b: refused (3 failures in a row over 1.0 s)"),
        ("DEBUG", "broker b: refused (4 failures in a row over 1.5 s)"),
        ("DEBUG", "broker b: refused (5 failures in a row over 2.0 s)"),
        ("INFO", "broker b: recovered (connected) after 5 failures in 2.5 s (last: refused)"),
    ]


def test_a_new_streak_after_a_recovery_warns_again_and_recovery_without_failure_is_silent(captured):
    failures = FailureLog(logging.getLogger(LOGGER), "s", clock=FakeClock())
    failures.recovered()
    assert captured.records == []
    failures.failed("a")
    failures.recovered()
    failures.failed("b")
    assert [level for level, _ in lines(captured)] == ["WARNING", "INFO", "WARNING"]
    assert failures.total_failures == 2
    assert failures.failures == 1


def test_warning_waits_until_the_failure_is_persistent(captured):
    clock = FakeClock()
    failures = FailureLog(logging.getLogger(LOGGER), "join", warn_after_seconds=3.0, clock=clock)
    for _ in range(8):
        failures.failed("dropped")
        clock.now += 1.0
    assert [level for level, _ in lines(captured)] == ["INFO", "DEBUG", "DEBUG", "WARNING",
                                                       "DEBUG", "DEBUG", "DEBUG", "DEBUG"]
    assert lines(captured)[3] == ("WARNING", "join: dropped (4 failures in a row over 3.0 s)")
    assert failures.failing_for() == pytest.approx(8.0)
    assert failures.last_error == "dropped"


def test_the_next_step_is_logged_but_not_kept_as_the_last_error(captured):
    failures = FailureLog(logging.getLogger(LOGGER), "join", clock=FakeClock())
    failures.failed("dropped", then="retrying in 0.10 s")
    assert lines(captured) == [("WARNING", "join: dropped; retrying in 0.10 s")]
    assert failures.last_error == "dropped"


def test_a_kind_that_never_warns(captured):
    failures = FailureLog(logging.getLogger(LOGGER), "lookup", warn_after_failures=None, clock=FakeClock())
    for _ in range(50):
        failures.failed("not available")
    assert max(r.levelno for r in captured.records) == logging.INFO
    assert sum(r.levelno == logging.INFO for r in captured.records) == 1


def test_monitor_names_the_api_and_version_once_after_repeated_drops(captured):
    clock = FakeClock()
    monitor = ConnectionMonitor(logging.getLogger(LOGGER), clock)
    address = ("127.0.0.1", 9092)
    for _ in range(10):
        monitor.closed("broker x", address, "closed between frames", (JOIN_GROUP, 6, (0, 6)))
        clock.now += 0.2
    warnings = [m for level, m in lines(captured) if level == "WARNING"]
    assert warnings == ["broker x: JoinGroup: connection lost in answer to JoinGroup v6 (it advertises "
                        f"v0-v6): closed between frames ({DROPS_BEFORE_WARNING} failures in a row over 0.4 s)"]
    assert monitor.watching(address)
    monitor.answered(address, FETCH, 12)  # another API's answer ends nothing
    assert monitor.watching(address)
    monitor.answered(address, JOIN_GROUP, 5)
    assert not monitor.watching(address)
    assert lines(captured)[-1][0] == "INFO"
    assert "recovered (JoinGroup v5 answered) after 10 failures in 2.0 s" in lines(captured)[-1][1]


def test_monitor_a_single_drop_and_failed_reconnects_never_warn(captured):
    monitor = ConnectionMonitor(logging.getLogger(LOGGER), FakeClock())
    address = ("127.0.0.1", 9092)
    monitor.closed("broker x", address, "reset", (FETCH, 12, (0, 17)))  # a restart: fetch in flight
    for _ in range(20):
        monitor.connect_failed("broker x", address, "refused")
    monitor.connected(address)
    monitor.answered(address, FETCH, 12)
    monitor.closed("broker x", address, "idle", None)
    assert max(r.levelno for r in captured.records) == logging.INFO
    assert [m for level, m in lines(captured) if level == "INFO"] == [
        "broker x: Fetch: connection lost in answer to Fetch v12 (it advertises v0-v17): reset",
        "broker x: connection failed: refused",
        "broker x: recovered (connected again) after 20 failures in 0.0 s (last: connection failed: refused)",
        "broker x: Fetch: recovered (Fetch v12 answered) after 1 failure in 0.0 s (last: connection lost in "
        "answer to Fetch v12 (it advertises v0-v17): reset)",
    ]
    assert monitor.failing() == {}


def test_backoff_doubles_from_the_base_to_the_cap_with_jitter():
    backoff = Backoff(0.1, 1.0, rng=random.Random(7))
    delays = []
    for _ in range(8):
        backoff.failed(0.0)
        delays.append(backoff.wait_time(0.0))
    for attempt, delay in enumerate(delays):
        nominal = min(0.1 * 2 ** attempt, 1.0)
        assert nominal * 0.8 <= delay <= nominal * 1.2, (attempt, delays)
    assert len(set(delays)) == len(delays)  # jittered, so members do not retry in lockstep
    backoff.succeeded()
    backoff.failed(0.0)
    assert 0.08 <= backoff.wait_time(0.0) <= 0.12
