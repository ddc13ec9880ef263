"""Say a repeating failure once.

A broker that keeps failing the same way must not fill the log: the first failure of a kind is
logged, repeats go to DEBUG with a running count, and the recovery gets one INFO line naming how
many failures there were and for how long. The WARNING itself can wait until the failure has
proved persistent (``warn_after_failures`` / ``warn_after_seconds``), for the kinds a broker
restart also produces: a restart is normal operation and must not warn.

Pure bookkeeping plus ``logging``; the caller supplies the clock (``now``) or a clock function.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class FailureLog:
    """One kind of failure (``subject``, e.g. "group g: joining") and its current streak."""

    def __init__(self, logger: logging.Logger, subject: str, *, warn_after_failures: int | None = 1,
                 warn_after_seconds: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.subject = subject
        # None: never WARNING (a kind that is normal operation however often it repeats).
        self.warn_after_failures = warn_after_failures
        self.warn_after_seconds = warn_after_seconds
        self.clock = clock
        self.failures = 0  # in the current streak
        self.failing_since: float | None = None
        self.last_error: str | None = None
        self.last_failed_at: float | None = None
        self.warned = False
        self.total_failures = 0  # over the object's life, for metrics

    def failed(self, error: object, now: float | None = None, then: str = "") -> None:
        """One more failure: logged at WARNING once it is persistent, else INFO the first time,
        DEBUG with the count after. ``then`` (e.g. "retrying in 0.4 s") is logged, not kept."""
        now = self.clock() if now is None else now
        if self.failing_since is None:
            self.failing_since = now
        self.failures += 1
        self.total_failures += 1
        self.last_error = str(error)
        self.last_failed_at = now
        lasted = now - self.failing_since
        text = f"{error}; {then}" if then else error
        if not self.warned and self._persistent(lasted):
            self.warned = True
            self.logger.warning("%s: %s%s", self.subject, text, _streak(self.failures, lasted))
        elif self.failures == 1:
            self.logger.info("%s: %s", self.subject, text)
        else:
            self.logger.debug("%s: %s%s", self.subject, text, _streak(self.failures, lasted))

    def pending(self, error: object, now: float | None = None, then: str = "") -> None:
        """An attempt still under way already looks like a failure (a server silent for a while):
        said now, at WARNING if its failure would be, once in the streak (DEBUG after). Not counted:
        the attempt's end is, as ``failed`` or ``recovered``."""
        now = self.clock() if now is None else now
        if self.failing_since is None:
            self.failing_since = now
        self.last_error = str(error)
        text = f"{error}; {then}" if then else error
        if not self.warned and self._persistent(now - self.failing_since, self.failures + 1):
            self.warned = True
            self.logger.warning("%s: %s", self.subject, text)
        else:
            self.logger.debug("%s: %s", self.subject, text)

    def _persistent(self, lasted: float, failures: int | None = None) -> bool:
        failures = self.failures if failures is None else failures
        return (self.warn_after_failures is not None and failures >= self.warn_after_failures
                and lasted >= self.warn_after_seconds)

    def recovered(self, now: float | None = None, detail: str = "") -> None:
        """The thing works again: one INFO line if there was a streak, then forget it."""
        if self.failing_since is None:
            return
        now = self.clock() if now is None else now
        counted = "" if not self.failures else f" {self.failures} failure{'' if self.failures == 1 else 's'} in"
        self.logger.info("%s: recovered%s after%s %.1f s (last: %s)", self.subject,
                         f" ({detail})" if detail else "", counted, now - self.failing_since, self.last_error)
        self.failures = 0
        self.failing_since = None
        self.warned = False

    @property
    def failing(self) -> bool:
        return self.failing_since is not None

    def failing_for(self, now: float | None = None) -> float:
        """Seconds since the first failure of the current streak (0.0 when not failing)."""
        if self.failing_since is None:
            return 0.0
        return (self.clock() if now is None else now) - self.failing_since


def _streak(failures: int, lasted: float) -> str:
    return "" if failures == 1 else f" ({failures} failures in a row over {lasted:.1f} s)"
