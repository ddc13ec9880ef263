"""What a heartbeat's error code means where the KIP-848 consumer protocol and KIP-932 share
groups agree (pure, no I/O): success, fencing, a moved coordinator. Each protocol's errors.py
decides the rest (its own fatal codes, then the retriable ones)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import BrokerError

NONE = 0
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110

COORDINATOR_MOVED = frozenset({COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})
FENCING = frozenset({UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH})


@dataclass(frozen=True)
class Verdict:
    """fenced: the broker dropped this member: rejoin with epoch 0 (KIP-848: its partitions are
    lost); retry: no verdict, heartbeat again after the backoff (rediscover: find the coordinator
    first); fatal: the membership is over, the error is raised from the next call."""

    code: int
    fenced: bool = False
    retry: bool = False
    rediscover: bool = False
    fatal: BrokerError | None = None


def common_verdict(code: int) -> Verdict | None:
    """The verdict both protocols give ``code``, or None when it is the protocol's to decide."""
    if code == NONE:
        return Verdict(code)
    if code in FENCING:
        return Verdict(code, fenced=True)
    if code in COORDINATOR_MOVED:
        return Verdict(code, retry=True, rediscover=True)
    return None
