"""Pure timer logic for group liveness: when to heartbeat, when the session is gone, when the
poll deadline (``max.poll.interval.ms``) has lapsed.

No clocks are read here: every method takes ``now``, seconds from a monotonic clock, so the
heartbeat task, the poll-deadline watchdog and the tests (with a fake clock) all drive the same
logic. The state is a handful of floats so that a caller running heartbeats in a thread can wrap
every call in one lock.

Three clocks live here:

* the **heartbeat clock**: the next heartbeat is due ``heartbeat_interval`` after the previous one
  was *sent* (or, after failures, ``retry_backoff`` doubling up to ``retry_backoff_max`` with
  jitter, as Java since KIP-580); never while one is still in flight;
* the **session clock**: restarted on join and on every *successful* heartbeat response; the
  session is considered lost ``session_timeout`` after that;
* the **poll clock**: stamped by every ``poll()``; the deadline lapses ``max_poll_interval``
  after the last one.

Deadlines are inclusive (``now >= deadline`` means lapsed) so that a task which sleeps exactly
``time_to_...(now)`` seconds finds the deadline lapsed when it wakes.
"""

from __future__ import annotations

import math
import random

from .._net.backoff import Backoff
from ..errors import ConfigError

INFINITY = math.inf


class LivenessTimers:
    """Heartbeat, session and poll-deadline timers, all in seconds."""

    __slots__ = (
        "_failure_backoff",
        "_heartbeat_due_at",
        "_in_flight_since",
        "_last_heartbeat_rtt",
        "_last_poll",
        "_poll_deadline_armed",
        "_session_started",
        "heartbeat_interval",
        "max_poll_interval",
        "retry_backoff",
        "session_timeout",
    )

    def __init__(self, session_timeout: float, heartbeat_interval: float, max_poll_interval: float,
                 retry_backoff: float, retry_backoff_max: float | None = None,
                 rng: random.Random | None = None) -> None:
        _require_positive("session_timeout", session_timeout)
        _require_positive("heartbeat_interval", heartbeat_interval)
        _require_positive("max_poll_interval", max_poll_interval)
        if not 0 <= retry_backoff < INFINITY:  # 0: retry at once (retry_backoff_ms=0, as Java allows)
            raise ConfigError(f"LivenessTimers: retry_backoff must be a finite number of seconds >= 0, "
                              f"got {retry_backoff!r}")
        if heartbeat_interval >= session_timeout:
            # The coordinator would evict the member between two heartbeats.
            raise ConfigError(
                f"LivenessTimers: heartbeat_interval ({heartbeat_interval} s) must be lower than "
                f"session_timeout ({session_timeout} s); Kafka recommends at most a third of it")
        self.session_timeout = session_timeout
        self.heartbeat_interval = heartbeat_interval
        self.max_poll_interval = max_poll_interval
        self.retry_backoff = retry_backoff
        self._last_poll: float | None = None
        self._poll_deadline_armed = False
        self._session_started: float | None = None  # None: no session (not a group member)
        self._heartbeat_due_at = INFINITY
        self._in_flight_since: float | None = None
        self._last_heartbeat_rtt: float | None = None
        self._failure_backoff = Backoff(retry_backoff, heartbeat_interval, rng=rng)
        self.set_retry_backoff_max(retry_backoff_max)

    # -- poll clock ---------------------------------------------------------------------------

    def on_poll(self, now: float) -> None:
        """The application called poll(): restart the poll clock and re-arm the watchdog."""
        self._last_poll = now
        self._poll_deadline_armed = True

    def seconds_since_last_poll(self, now: float) -> float | None:
        """For metrics and the lapse warning; None before the first poll."""
        if self._last_poll is None:
            return None
        return now - self._last_poll

    def poll_deadline_lapsed(self, now: float) -> bool:
        """True once ``max_poll_interval`` has passed since the last poll (while armed)."""
        return self.time_to_poll_deadline(now) == 0.0

    def time_to_poll_deadline(self, now: float) -> float:
        """Seconds until the poll deadline lapses; 0.0 if it has; infinity if not armed."""
        if not self._poll_deadline_armed or self._last_poll is None:
            return INFINITY
        return max(0.0, self._last_poll + self.max_poll_interval - now)

    def disarm_poll_deadline(self) -> None:
        """The watchdog handled a lapse (left the group): stay quiet until the next poll."""
        self._poll_deadline_armed = False

    # -- session and heartbeat clocks -----------------------------------------------------------

    def on_join(self, now: float) -> None:
        """A new generation: restart the session and heartbeat clocks and the poll clock.

        The poll clock restarts too because a rebalance can legitimately take as long as the
        rebalance timeout (= ``max_poll_interval``); the member must not be judged stuck for the
        time the coordinator kept it waiting.
        """
        self.reset_session(now)
        self.on_poll(now)

    def reset_session(self, now: float) -> None:
        """Restart the session clock and schedule the first heartbeat one interval from now."""
        self._session_started = now
        self._heartbeat_due_at = now + self.heartbeat_interval
        self._in_flight_since = None

    def clear_session(self) -> None:
        """No longer a member (left, fenced, coordinator lost): no heartbeats, no expiry."""
        self._session_started = None
        self._heartbeat_due_at = INFINITY
        self._in_flight_since = None

    @property
    def has_session(self) -> bool:
        return self._session_started is not None

    @property
    def heartbeat_in_flight(self) -> bool:
        return self._in_flight_since is not None

    @property
    def last_heartbeat_rtt(self) -> float | None:
        """Seconds between the last successful heartbeat's request and its response."""
        return self._last_heartbeat_rtt

    def on_heartbeat_sent(self, now: float) -> None:
        """A heartbeat request went out; the next one is due one interval after this send."""
        self._in_flight_since = now
        self._heartbeat_due_at = now + self.heartbeat_interval

    def on_heartbeat_success(self, now: float) -> None:
        """The coordinator answered without error: the session is alive as of now."""
        if self._in_flight_since is not None:
            self._last_heartbeat_rtt = now - self._in_flight_since
        self._in_flight_since = None
        self._failure_backoff.succeeded()
        if self._session_started is not None:
            self._session_started = now

    def on_heartbeat_failure(self, now: float) -> None:
        """No usable answer (error, timeout, lost connection): retry after the backoff, which
        grows with each failure in a row.

        The backoff is capped at the interval so that a failure never delays the next attempt
        beyond the normal schedule. The session clock is not restarted.
        """
        self._in_flight_since = None
        if self._session_started is not None:
            self._failure_backoff.failed(now)
            self._heartbeat_due_at = min(self._failure_backoff.not_before, now + self.heartbeat_interval)

    def set_retry_backoff_max(self, seconds: float | None) -> None:
        """Cap of the failure backoff (KIP-580's retry.backoff.max.ms); the heartbeat interval
        always caps it too. None: the interval alone."""
        cap = self.heartbeat_interval if seconds is None else min(seconds, self.heartbeat_interval)
        self._failure_backoff = Backoff(self.retry_backoff, cap, rng=self._failure_backoff.rng)

    @property
    def heartbeat_failures_in_a_row(self) -> int:
        return self._failure_backoff.failures

    def should_heartbeat(self, now: float) -> bool:
        """A member with no heartbeat in flight whose next heartbeat is due."""
        return self.time_to_next_heartbeat(now) == 0.0

    def time_to_next_heartbeat(self, now: float) -> float:
        """Seconds until a heartbeat is due; infinity without a session or while one is in flight
        (the task is then waiting for the response, which has its own request timeout)."""
        if self._session_started is None or self._in_flight_since is not None:
            return INFINITY
        return max(0.0, self._heartbeat_due_at - now)

    def session_expired(self, now: float) -> bool:
        """No successful heartbeat for ``session_timeout`` since the last success or reset."""
        return self.time_to_session_expiry(now) == 0.0

    def time_to_session_expiry(self, now: float) -> float:
        if self._session_started is None:
            return INFINITY
        return max(0.0, self._session_started + self.session_timeout - now)

    def next_wakeup(self, now: float) -> float:
        """Seconds a background task may sleep before one of the three clocks needs attention."""
        return min(self.time_to_next_heartbeat(now), self.time_to_session_expiry(now),
                   self.time_to_poll_deadline(now))


def _require_positive(name: str, value: float) -> None:
    if not value > 0 or math.isinf(value):
        # ConsumerConfig lets no such value through: reaching this is a bug, named as the argument.
        raise ConfigError(f"LivenessTimers: {name} must be a positive finite number of seconds, got {value!r}")
