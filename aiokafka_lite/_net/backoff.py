"""Exponential reconnect backoff with jitter (pure: the caller supplies the clock)."""

from __future__ import annotations

import random


class Backoff:
    """After n consecutive failures wait ``base * 2**(n-1)`` seconds, capped, +-20% jitter.

    As Java's ExponentialBackoff: a base of 0 never waits (retries at once, as asked); a base at
    or above the cap waits the cap every time, with no growth and no jitter
    (``retry.backoff.ms`` > ``retry.backoff.max.ms`` is "a static backoff of the max").
    """

    def __init__(self, base: float, maximum: float, jitter: float = 0.2,
                 rng: random.Random | None = None) -> None:
        self.base = base
        self.maximum = maximum
        self.jitter = jitter
        self.failures = 0
        self.not_before = 0.0  # monotonic time before which no new attempt should start
        self.rng = rng or random.Random()

    def delay(self) -> float:
        """The wait after the current number of failures (0.0 when there are none)."""
        if self.failures == 0 or self.base <= 0:
            return 0.0
        if self.base >= self.maximum:
            return max(0.0, self.maximum)
        raw = min(self.base * 2.0 ** min(self.failures - 1, 62), self.maximum)
        return raw * self.rng.uniform(1 - self.jitter, 1 + self.jitter)

    def failed(self, now: float) -> None:
        self.failures += 1
        self.not_before = now + self.delay()

    def succeeded(self) -> None:
        self.failures = 0
        self.not_before = 0.0

    def wait_time(self, now: float) -> float:
        return max(0.0, self.not_before - now)
