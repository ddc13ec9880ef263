"""When to go back to ``bootstrap_servers`` for metadata (KIP-899, KIP-1102). Pure decisions on the
caller's clock, no I/O.

Java's rules (``metadata.recovery.strategy=rebootstrap``, its default since 4.0): bootstrap again
when no known broker can be reached for a metadata refresh, when a broker answers Metadata with
REBOOTSTRAP_REQUIRED, or when no metadata has come from the known brokers for
``metadata.recovery.rebootstrap.trigger.ms`` (brokers that accept connections but never answer).
With ``none`` the client keeps trying the brokers it knows.

KIP-1242 adds one: a known broker's address that leads to another cluster (a misrouted connection,
``metadata_cluster_check_enable``). The first such finding is kept until a rebootstrap takes it,
then until someone says it; those found meanwhile are the same news.
"""

from __future__ import annotations

import enum

from .exceptions import MisroutedConnectionError

REBOOTSTRAP = "rebootstrap"
REBOOTSTRAP_REQUIRED = 129  # KIP-1102: the top-level error of a Metadata v13+ response


class Failure(enum.Enum):
    """How a round over the known brokers failed to get metadata."""

    UNREACHABLE = "no known broker could be reached"
    REQUIRED = "a broker answered REBOOTSTRAP_REQUIRED"
    MISROUTED = "a known broker's address leads to another cluster"


class MetadataRecovery:
    def __init__(self, strategy: str, trigger: float) -> None:
        self.rebootstrap_allowed = strategy == REBOOTSTRAP
        self.trigger = trigger  # seconds
        self.attempt_started: float | None = None  # the first metadata attempt not answered yet
        self.rebootstraps = 0  # for metrics
        self.misrouting: MisroutedConnectionError | None = None  # found, no rebootstrap yet
        self._rebootstrapped_for: MisroutedConnectionError | None = None  # rebootstrapped, not said yet

    def attempting(self, now: float) -> None:
        if self.attempt_started is None:
            self.attempt_started = now

    def refreshed(self) -> None:
        self.attempt_started = None

    def reason(self, now: float, failure: Failure | None = None) -> str | None:
        """Why to bootstrap again now, or None to stay with the known brokers."""
        if not self.rebootstrap_allowed:
            return None
        if self.misrouting is not None:
            return str(self.misrouting)
        if failure is not None:
            return failure.value
        waited = None if self.attempt_started is None else now - self.attempt_started
        if waited is not None and waited >= self.trigger:
            return f"no metadata from the known brokers for {waited:.1f} s " \
                   "(metadata_recovery_rebootstrap_trigger_ms)"
        return None

    def misrouted(self, error: MisroutedConnectionError) -> None:
        """A misrouted connection was found: rebootstrap at the next chance (the first one kept)."""
        if self.rebootstrap_allowed and self.misrouting is None:
            self.misrouting = error

    def rebootstrapping(self) -> None:
        self.rebootstraps += 1
        self.attempt_started = None  # the bootstrap servers get a fresh trigger period
        if self.misrouting is not None:
            self._rebootstrapped_for, self.misrouting = self.misrouting, None

    def take_rebootstrapped_misrouting(self) -> MisroutedConnectionError | None:
        """The misrouting a finished rebootstrap was for, once (None: none, or already taken)."""
        error, self._rebootstrapped_for = self._rebootstrapped_for, None
        return error
