"""Share sessions (KIP-932): one per leader broker, so a ShareFetch names only what changed.

Epoch 0 opens a session (the member id and group id identify it); each later request, ShareFetch or
ShareAcknowledge, carries the next epoch, and a ShareFetch lists the partitions new to the session
in ``topics`` and the ones to drop in ``forgotten_topics_data``; epoch -1 closes it. A request takes
its epoch when it is built, not when answered: requests to one broker go on one connection and the
broker handles them in order, so an acknowledgement may follow a long-poll fetch still in flight.
An epoch-0 request carries no acknowledgements (nothing was acquired in a session not yet open).
SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH or a request without an answer start over at 0.
Sans-IO: no asyncio, no sockets.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field

from ...errors import ERROR_CODE_BY_NAME
from ...structs import TopicPartition

SHARE_SESSION_NOT_FOUND = ERROR_CODE_BY_NAME["SHARE_SESSION_NOT_FOUND"]
INVALID_SHARE_SESSION_EPOCH = ERROR_CODE_BY_NAME["INVALID_SHARE_SESSION_EPOCH"]
SESSION_ERRORS = frozenset({SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH})
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


@dataclass(frozen=True, slots=True)
class SharePlan:
    """One ShareFetch's session part: its epoch, the partitions it adds (``send``, in ``topics``)
    and the ones it drops (``forget``, in ``forgotten_topics_data``)."""

    epoch: int
    send: frozenset[TopicPartition]
    forget: frozenset[TopicPartition]

    @property
    def opens(self) -> bool:
        return self.epoch == INITIAL_EPOCH


@dataclass(slots=True)
class ShareSession:
    """The client side of one broker's share session."""

    epoch: int = INITIAL_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)  # what the broker holds for it
    opened: int = 0  # how many times a session was opened (epoch 0 sent)
    resets: int = 0  # how many times it started over after an error
    started: bool = False  # epoch 0 went out since the last close(): the broker may hold the session

    @property
    def open(self) -> bool:
        """A request went out at epoch 0 and the session was not reset since: acknowledgements may go."""
        return self.epoch != INITIAL_EPOCH

    def fetch_plan(self, wanted: Set[TopicPartition]) -> SharePlan:
        """The next ShareFetch for ``wanted``; the epoch advances now."""
        if not self.open:
            plan = SharePlan(INITIAL_EPOCH, frozenset(wanted), frozenset())
            self.opened += 1
            self.started = True
        else:
            plan = SharePlan(self.epoch, frozenset(wanted - self.partitions), frozenset(self.partitions - wanted))
        self.partitions = set(wanted)
        self._advance()
        return plan

    def acknowledge_epoch(self) -> int:
        """The epoch of the next ShareAcknowledge (the session must be open); the epoch advances now."""
        if not self.open:
            raise ValueError("a ShareAcknowledge needs an open share session")
        epoch = self.epoch
        self._advance()
        return epoch

    def answered(self, error_code: int) -> bool:
        """The broker's top-level answer; False when it ended the session (start over at epoch 0)."""
        if error_code in SESSION_ERRORS:
            self.reset()
            return False
        return True

    def reset(self) -> None:
        """Start over with epoch 0 (a session error, or a request that got no answer)."""
        if self.open:
            self.resets += 1
        self.epoch = INITIAL_EPOCH
        self.partitions.clear()

    def close(self) -> None:
        """The session was closed (epoch -1 sent): a next request opens a new one."""
        self.epoch = INITIAL_EPOCH
        self.started = False
        self.partitions.clear()

    def _advance(self) -> None:
        self.epoch = 1 if self.epoch == _MAX_EPOCH else self.epoch + 1
