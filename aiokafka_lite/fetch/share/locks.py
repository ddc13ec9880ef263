"""When to renew which acquisition locks (KIP-1222): the schedule of a share group member's renewals.

The broker locks each record it acquires for a member for the group's share.record.lock.duration.ms
(the answer says how long: ``acquisition_lock_timeout_ms``); when the lock lapses, the record goes
to any member again with its delivery count one higher. A RENEW acknowledgement (ShareFetch and
ShareAcknowledge v2) starts the lock over, for the full duration, and leaves the record acquired.

Two kinds of records are watched, each under a token of the caller's choosing: records a handler
is working on (the ShareConsumer's ``renewing()`` block, process_share()'s handlers) and records
acquired but not yet handed out (the fetcher's buffer). A watched lock is renewed once at most
``lead()`` seconds are left of it: half the lock, or more when a request may wait behind a
ShareFetch's long poll on the same connection (the broker answers a connection's requests in
order). Each token is renewed until its ``until`` (the bound, share_lock_renewal_max_ms), then
given up; a token whose lock lapsed before its renewal was answered is dropped. Sans-IO: the
fetcher gives the time (the event loop's clock, seconds) and sends the requests.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

Token = TypeVar("Token", bound=Hashable)


@dataclass(slots=True)
class _Watched:
    deadline: float  # when the lock lapses (as far as we know: the renewal's send time + the lock)
    until: float  # no renewal after this (the bound)
    not_before: float = 0.0  # a failed renewal is tried again from here
    sending: bool = False  # a renewal is on its way


class Due(NamedTuple, Generic[Token]):
    renew: list[Token]  # renew these now
    given_up: list[Token]  # past their bound: no longer renewed (their lock lapses)
    lapsed: list[Token]  # their lock lapsed before a renewal got through


class LockSchedule(Generic[Token]):
    """The watched tokens: their lock deadlines, bounds, and renewals under way."""

    def __init__(self, queue_wait: float) -> None:
        """``queue_wait``: how long a renewal may wait at the broker behind a ShareFetch's long poll."""
        self._queue_wait = queue_wait
        self._watched: dict[Token, _Watched] = {}

    def __len__(self) -> int:
        return len(self._watched)

    def __contains__(self, token: Token) -> bool:
        return token in self._watched

    def lead(self, lock: float) -> float:
        """How long before a ``lock``-second lock lapses its renewal goes out: half of it, or the
        long poll's wait and a little more when that is longer (but never most of the lock)."""
        return max(lock / 2, min(lock * 0.8, self._queue_wait + 0.25))

    def watch(self, token: Token, deadline: float, until: float) -> None:
        """Keep ``token``'s lock (lapsing at ``deadline``) until ``until``; a token watched
        already keeps its deadline and renewal, with the new bound."""
        known = self._watched.get(token)
        if known is None:
            self._watched[token] = _Watched(deadline, until)
        else:
            known.until = until

    def unwatch(self, token: Token) -> None:
        self._watched.pop(token, None)

    def unwatch_all(self, tokens: Iterable[Token]) -> None:
        for token in tokens:
            self._watched.pop(token, None)

    def clear(self) -> None:
        self._watched.clear()

    def deadline(self, token: Token) -> float | None:
        known = self._watched.get(token)
        return None if known is None else known.deadline

    def due(self, now: float, lock: float) -> Due[Token]:
        """The tokens whose renewal is due now (marked as being sent), and those dropped: past
        their bound, or whose lock lapsed."""
        out: Due[Token] = Due([], [], [])
        lead = self.lead(lock)
        for token, w in list(self._watched.items()):
            if w.sending:
                continue
            if now >= w.deadline:
                out.lapsed.append(token)
            elif now >= w.until:
                out.given_up.append(token)
            elif now >= w.deadline - lead and now >= w.not_before:
                w.sending = True
                out.renew.append(token)
        self.unwatch_all(out.lapsed + out.given_up)
        return out

    def sending(self, token: Token) -> None:
        """A renewal of ``token``'s lock is on its way already (it went with another token's)."""
        w = self._watched.get(token)
        if w is not None:
            w.sending = True

    def renewed(self, tokens: Iterable[Token], deadline: float) -> None:
        """The broker renewed these: their locks now lapse at ``deadline``."""
        for token in tokens:
            w = self._watched.get(token)
            if w is not None:
                w.deadline, w.sending, w.not_before = deadline, False, 0.0

    def failed(self, tokens: Iterable[Token], retry_at: float) -> None:
        """The renewal did not get through: try again from ``retry_at`` (while the lock holds)."""
        for token in tokens:
            w = self._watched.get(token)
            if w is not None:
                w.sending, w.not_before = False, retry_at

    def next_wake(self, lock: float) -> float | None:
        """When ``due()`` has something to say next (None: nothing watched, or all being sent)."""
        lead = self.lead(lock)
        wake = min((_wake_of(w, lead) for w in self._watched.values()), default=math.inf)
        return None if wake == math.inf else wake

    def wake_of(self, token: Token, lock: float) -> float | None:
        """When ``due()`` has something to say about ``token`` (a new one: no need to look at all)."""
        w = self._watched.get(token)
        wake = math.inf if w is None else _wake_of(w, self.lead(lock))
        return None if wake == math.inf else wake


def _wake_of(w: _Watched, lead: float) -> float:
    if w.sending:
        return math.inf
    return min(max(w.deadline - lead, w.not_before), w.until, w.deadline)
