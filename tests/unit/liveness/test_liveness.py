"""LivenessTimers driven by a fake clock (plain floats): every branch of every method."""

from __future__ import annotations

import math

import pytest

from aiokafka_lite.errors import ConfigError
from aiokafka_lite.liveness.timers import LivenessTimers

SESSION = 10.0
INTERVAL = 3.0
MAX_POLL = 30.0
BACKOFF = 0.1
T0 = 1000.0  # a monotonic clock does not start at zero


def timers() -> LivenessTimers:
    return LivenessTimers(session_timeout=SESSION, heartbeat_interval=INTERVAL,
                          max_poll_interval=MAX_POLL, retry_backoff=BACKOFF)


def joined(now: float = T0) -> LivenessTimers:
    t = timers()
    t.on_join(now)
    return t


# -- configuration ------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "bad"), [
    *((n, bad) for n in ("session_timeout", "heartbeat_interval", "max_poll_interval")
      for bad in (0.0, -1.0, math.nan, math.inf)),
    *(("retry_backoff", bad) for bad in (-1.0, math.nan, math.inf))])
def test_rejects_non_positive_or_non_finite_durations(name: str, bad: float) -> None:
    kwargs = {"session_timeout": SESSION, "heartbeat_interval": INTERVAL,
              "max_poll_interval": MAX_POLL, "retry_backoff": BACKOFF, name: bad}
    with pytest.raises(ConfigError, match=name):
        LivenessTimers(**kwargs)


def test_zero_retry_backoff_retries_a_failed_heartbeat_at_once_but_one_at_a_time() -> None:
    """retry_backoff_ms=0 (Java allows it): the next heartbeat is due at once after a failure,
    and none is due while it is in flight, so the heartbeat task waits on the request, not spins."""
    t = LivenessTimers(SESSION, INTERVAL, MAX_POLL, retry_backoff=0.0, retry_backoff_max=1.0)
    t.on_join(T0)
    for attempt in range(5):
        now = T0 + 3.0 + attempt
        t.on_heartbeat_sent(now)
        assert t.time_to_next_heartbeat(now) == math.inf
        t.on_heartbeat_failure(now)
        assert t.time_to_next_heartbeat(now) == 0.0
    assert t.heartbeat_failures_in_a_row == 5


@pytest.mark.parametrize("interval", [SESSION, SESSION + 1])
def test_heartbeat_interval_must_be_below_session_timeout(interval: float) -> None:
    with pytest.raises(ConfigError, match="lower than session_timeout"):
        LivenessTimers(SESSION, interval, MAX_POLL, BACKOFF)


# -- before joining -----------------------------------------------------------------------------

def test_fresh_timers_ask_for_nothing() -> None:
    t = timers()
    assert not t.has_session
    assert not t.should_heartbeat(T0)
    assert t.time_to_next_heartbeat(T0) == math.inf
    assert not t.session_expired(T0 + 1e9)
    assert t.time_to_session_expiry(T0) == math.inf
    assert not t.poll_deadline_lapsed(T0 + 1e9)
    assert t.time_to_poll_deadline(T0) == math.inf
    assert t.seconds_since_last_poll(T0) is None
    assert t.next_wakeup(T0) == math.inf
    assert t.last_heartbeat_rtt is None
    assert not t.heartbeat_in_flight


def test_poll_before_join_arms_only_the_poll_clock() -> None:
    t = timers()
    t.on_poll(T0)
    assert t.seconds_since_last_poll(T0 + 2.5) == 2.5
    assert t.time_to_poll_deadline(T0 + 5) == MAX_POLL - 5
    assert not t.should_heartbeat(T0 + 100)
    assert t.next_wakeup(T0 + 5) == MAX_POLL - 5


# -- heartbeat clock ----------------------------------------------------------------------------

def test_first_heartbeat_is_due_one_interval_after_join() -> None:
    t = joined()
    assert t.has_session
    assert t.time_to_next_heartbeat(T0) == INTERVAL
    assert not t.should_heartbeat(T0 + INTERVAL - 0.001)
    assert t.should_heartbeat(T0 + INTERVAL)
    assert t.time_to_next_heartbeat(T0 + INTERVAL + 5) == 0.0


def test_no_second_heartbeat_while_one_is_in_flight() -> None:
    t = joined()
    t.on_heartbeat_sent(T0 + INTERVAL)
    assert t.heartbeat_in_flight
    # Far past the next due time, still nothing: the response has not come back.
    assert not t.should_heartbeat(T0 + 4 * INTERVAL)
    assert t.time_to_next_heartbeat(T0 + 4 * INTERVAL) == math.inf


def test_next_heartbeat_is_one_interval_after_the_send_not_the_response() -> None:
    t = joined()
    sent = T0 + INTERVAL
    t.on_heartbeat_sent(sent)
    t.on_heartbeat_success(sent + 0.5)
    assert not t.heartbeat_in_flight
    assert t.time_to_next_heartbeat(sent + 0.5) == pytest.approx(INTERVAL - 0.5)
    assert t.should_heartbeat(sent + INTERVAL)


def test_success_records_round_trip_time() -> None:
    t = joined()
    t.on_heartbeat_sent(T0 + 3.0)
    t.on_heartbeat_success(T0 + 3.25)
    assert t.last_heartbeat_rtt == pytest.approx(0.25)


def test_success_without_a_recorded_send_keeps_previous_rtt() -> None:
    t = joined()
    t.on_heartbeat_sent(T0 + 3.0)
    t.on_heartbeat_success(T0 + 3.5)
    t.on_heartbeat_success(T0 + 4.0)  # a duplicate/late answer: nothing was in flight
    assert t.last_heartbeat_rtt == pytest.approx(0.5)


def test_failure_retries_after_backoff_sooner_than_the_interval() -> None:
    t = joined()
    t.on_heartbeat_sent(T0 + 3.0)
    t.on_heartbeat_failure(T0 + 3.2)
    assert not t.heartbeat_in_flight
    wait = t.time_to_next_heartbeat(T0 + 3.2)
    assert BACKOFF * 0.8 <= wait <= BACKOFF * 1.2  # +-20% jitter
    assert not t.should_heartbeat(T0 + 3.2)
    assert t.should_heartbeat(T0 + 3.2 + wait)


def test_failures_in_a_row_back_off_exponentially_up_to_the_cap() -> None:
    t = LivenessTimers(SESSION, INTERVAL, MAX_POLL, retry_backoff=BACKOFF, retry_backoff_max=1.0)
    t.on_join(T0)
    now = T0
    waits = []
    for _ in range(7):
        t.on_heartbeat_sent(now)
        t.on_heartbeat_failure(now)
        waits.append(t.time_to_next_heartbeat(now))
        now += waits[-1]
    for attempt, wait in enumerate(waits):
        nominal = min(BACKOFF * 2 ** attempt, 1.0)
        assert nominal * 0.8 <= wait <= nominal * 1.2, waits
    assert t.heartbeat_failures_in_a_row == 7
    t.on_heartbeat_sent(now)
    t.on_heartbeat_success(now)
    t.on_heartbeat_sent(now)
    t.on_heartbeat_failure(now)
    assert t.time_to_next_heartbeat(now) <= BACKOFF * 1.2  # a success starts the backoff over


def test_failure_backoff_is_capped_at_the_interval() -> None:
    t = LivenessTimers(SESSION, INTERVAL, MAX_POLL, retry_backoff=INTERVAL * 2)
    t.on_join(T0)
    t.on_heartbeat_sent(T0 + 3.0)
    t.on_heartbeat_failure(T0 + 3.0)
    assert t.time_to_next_heartbeat(T0 + 3.0) == INTERVAL


def test_failure_does_not_restart_the_session() -> None:
    t = joined()
    t.on_heartbeat_sent(T0 + 3.0)
    t.on_heartbeat_failure(T0 + 3.0)
    assert t.session_expired(T0 + SESSION)


def test_failure_without_session_schedules_nothing() -> None:
    t = timers()
    t.on_heartbeat_failure(T0)
    assert t.time_to_next_heartbeat(T0 + 100) == math.inf


# -- session clock ------------------------------------------------------------------------------

def test_session_expires_session_timeout_after_join_without_success() -> None:
    t = joined()
    assert t.time_to_session_expiry(T0 + 4) == SESSION - 4
    assert not t.session_expired(T0 + SESSION - 0.001)
    assert t.session_expired(T0 + SESSION)
    assert t.time_to_session_expiry(T0 + SESSION + 3) == 0.0


def test_success_restarts_the_session_clock_at_the_response() -> None:
    t = joined()
    t.on_heartbeat_sent(T0 + 3.0)
    t.on_heartbeat_success(T0 + 4.0)
    assert not t.session_expired(T0 + SESSION + 3.9)
    assert t.session_expired(T0 + 4.0 + SESSION)


def test_a_sent_but_unanswered_heartbeat_does_not_count() -> None:
    t = joined()
    t.on_heartbeat_sent(T0 + 3.0)
    assert t.session_expired(T0 + SESSION)


def test_late_success_after_clear_session_does_not_start_a_session() -> None:
    t = joined()
    t.on_heartbeat_sent(T0 + 3.0)
    t.clear_session()
    t.on_heartbeat_success(T0 + 3.1)
    assert not t.has_session
    assert not t.session_expired(T0 + 1e6)
    assert not t.should_heartbeat(T0 + 1e6)


def test_clear_session_stops_heartbeats_but_keeps_the_poll_clock() -> None:
    t = joined()
    t.on_heartbeat_sent(T0 + 3.0)
    t.clear_session()
    assert not t.heartbeat_in_flight
    assert t.time_to_next_heartbeat(T0 + 50) == math.inf
    assert t.time_to_session_expiry(T0 + 50) == math.inf
    assert t.poll_deadline_lapsed(T0 + MAX_POLL)


def test_reset_session_restarts_session_and_heartbeat_but_not_poll() -> None:
    t = joined()
    t.on_heartbeat_sent(T0 + 3.0)
    t.reset_session(T0 + 8.0)
    assert not t.heartbeat_in_flight
    assert t.time_to_next_heartbeat(T0 + 8.0) == INTERVAL
    assert t.time_to_session_expiry(T0 + 8.0) == SESSION
    assert t.seconds_since_last_poll(T0 + 8.0) == 8.0


# -- poll clock ---------------------------------------------------------------------------------

def test_poll_deadline_lapses_max_poll_interval_after_last_poll() -> None:
    t = joined()
    t.on_poll(T0 + 5)
    assert t.time_to_poll_deadline(T0 + 5) == MAX_POLL
    assert not t.poll_deadline_lapsed(T0 + 5 + MAX_POLL - 0.001)
    assert t.poll_deadline_lapsed(T0 + 5 + MAX_POLL)
    assert t.time_to_poll_deadline(T0 + 5 + MAX_POLL + 1) == 0.0
    assert t.seconds_since_last_poll(T0 + 5 + MAX_POLL + 1) == MAX_POLL + 1


def test_sleeping_exactly_time_to_poll_deadline_finds_it_lapsed() -> None:
    t = joined()
    now = T0 + 12.345
    t.on_poll(now)
    wake = now + t.time_to_poll_deadline(now)
    assert t.poll_deadline_lapsed(wake)


def test_join_restarts_the_poll_clock() -> None:
    t = timers()
    t.on_poll(T0)
    t.on_join(T0 + MAX_POLL - 1)  # the rebalance took almost the whole interval
    assert not t.poll_deadline_lapsed(T0 + MAX_POLL + 1)
    assert t.poll_deadline_lapsed(T0 + 2 * MAX_POLL - 1)


def test_disarmed_watchdog_is_quiet_until_the_next_poll() -> None:
    t = joined()
    assert t.poll_deadline_lapsed(T0 + MAX_POLL)
    t.disarm_poll_deadline()
    assert not t.poll_deadline_lapsed(T0 + MAX_POLL + 10)
    assert t.time_to_poll_deadline(T0 + MAX_POLL + 10) == math.inf
    assert t.seconds_since_last_poll(T0 + MAX_POLL + 10) == MAX_POLL + 10  # still reported
    t.on_poll(T0 + 100)
    assert t.time_to_poll_deadline(T0 + 100) == MAX_POLL


# -- next_wakeup ---------------------------------------------------------------------------------

def test_next_wakeup_is_the_heartbeat_when_it_comes_first() -> None:
    t = joined()
    assert t.next_wakeup(T0 + 1) == INTERVAL - 1


def test_next_wakeup_is_the_session_expiry_while_a_heartbeat_is_in_flight() -> None:
    t = joined()
    t.on_heartbeat_sent(T0 + 3.0)
    assert t.next_wakeup(T0 + 3.0) == SESSION - 3.0


def test_next_wakeup_is_the_poll_deadline_when_it_comes_first() -> None:
    t = LivenessTimers(session_timeout=10.0, heartbeat_interval=3.0, max_poll_interval=2.0,
                       retry_backoff=0.1)
    t.on_join(T0)
    assert t.next_wakeup(T0 + 0.5) == 1.5
    t.on_poll(T0 + 0.5)
    assert t.next_wakeup(T0 + 0.5) == 2.0


def test_fake_clock_heartbeat_loop_keeps_the_session_alive() -> None:
    """Simulate a heartbeat task: sleep next_wakeup, heartbeat when due, 50 ms round trips."""
    t = joined()
    now = T0
    sends = 0
    while True:
        t.on_poll(now)  # the application polls often enough
        now += t.next_wakeup(now)
        if now > T0 + 25.0:
            break
        assert not t.session_expired(now)
        if t.should_heartbeat(now):
            t.on_heartbeat_sent(now)
            sends += 1
            now += 0.05
            t.on_heartbeat_success(now)
    assert sends == 8  # at 3, 6, ..., 24 s


# -- purity: the group-membership core reads no clock and does no I/O ---------------------------

@pytest.mark.parametrize("module", ["aiokafka_lite.liveness.timers", "aiokafka_lite.group.classic.membership",
                                    "aiokafka_lite.group.classic.assignors",
                                    "aiokafka_lite.protocol.consumer_protocol"])
def test_pure_modules_import_no_asyncio_socket_or_time(module: str) -> None:
    import ast
    import importlib.util

    spec = importlib.util.find_spec(module)
    assert spec is not None
    assert spec.origin is not None
    with open(spec.origin, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"asyncio", "socket", "time", "threading", "selectors"}


def test_retry_backoff_max_set_later_caps_the_failure_backoff() -> None:
    t = joined()
    t.set_retry_backoff_max(0.3)
    now = T0
    for _ in range(6):
        t.on_heartbeat_sent(now)
        t.on_heartbeat_failure(now)
        wait = t.time_to_next_heartbeat(now)
        assert wait <= 0.3 * 1.2
        now += wait
    t.set_retry_backoff_max(60.0)  # the heartbeat interval caps it anyway
    for _ in range(12):
        t.on_heartbeat_sent(now)
        t.on_heartbeat_failure(now)
        assert t.time_to_next_heartbeat(now) <= INTERVAL
