"""The share fetcher's lock keeper: RENEW acknowledgements (KIP-1222) for the records a handler works
on and for the records acquired but not yet handed out, sent before their locks lapse.

locks.py says when; this sends. One timer, armed for the next renewal due; when it fires, every
record due is marked RENEW in the ledger and, per broker, goes out in one ShareAcknowledge
(is_renew_ack) together with the decisions pending for that broker's partitions, at once: a renewal
due while another is on its way to the same broker does not wait for its answer (the broker answers
a connection's requests in order, both behind the same long poll; waiting would add a second long
poll to the first, past the lead locks.py allows for one). The answer's acquisition_lock_timeout_ms
(v2) gives the new deadline, counted from when the request was sent (the broker starts the lock over
when it reads it: later).

Records waiting in the buffer are renewed, not released: releasing a record no handler has seen
would raise its delivery count (and archive it early, at group.share.delivery.count.limit), while
this member hands it out next. A handler's record is renewed while the ShareConsumer's
``renewing()`` block runs. Both stop at ``bound`` seconds (share_lock_renewal_max_ms: from the
block's start, or from the acquisition) and then lapse; the member's poll deadline
(max_poll_interval_ms) ends them sooner, with its share sessions. A renewal that fails is tried
again after a backoff while the lock holds; it never fails the handler. A broker without RENEW
(below v2) ends renewing for this fetcher, said once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ...errors import IllegalStateError, UnsupportedVersionError
from ...structs import TopicPartition
from .acknowledge import Acknowledged, AckResults, has_final_decisions
from .buffer import AcquiredBuffer
from .ledger import AckType, Batch, ShareAcknowledgements, expand
from .locks import LockSchedule
from .records import AcquiredRecords, ShareRecord

log = logging.getLogger("aiokafka_lite.share.fetcher")

Send = Callable[[int, dict[TopicPartition, list[Batch]]], Awaitable[Acknowledged]]
Token = AcquiredRecords | tuple[TopicPartition, int]  # records waiting in the buffer, or a handler's record


class LockRenewals:
    """Keeps the acquisition locks of watched records: one timer, a request per broker and wake."""

    def __init__(self, *, acks: ShareAcknowledgements, buffer: AcquiredBuffer, nodes: Mapping[TopicPartition, int],
                 send: Send, session_open: Callable[[int], bool], on_results: Callable[[AckResults], None],
                 queue_wait: float, bound: float, retry_backoff: float) -> None:
        self._acks, self._buffer, self._nodes = acks, buffer, nodes  # the fetcher's, shared
        self._send, self._session_open, self._on_results = send, session_open, on_results
        self._schedule: LockSchedule[Token] = LockSchedule(queue_wait)
        self._bound, self._retry_backoff = bound, retry_backoff
        self._lock = 30.0  # seconds: the group's lock duration, as the last answer gave it
        # The timer and when it fires (kept here: uvloop's call_at for a time already past gives
        # a plain Handle, which has no when()).
        self._timer: asyncio.Handle | None = None
        self._timer_when = 0.0
        self._requests: dict[asyncio.Task[None], set[tuple[TopicPartition, int]]] = {}  # under way: what each renews
        self._stopped = bound <= 0  # 0: never renew
        self.renewed = self.failed = self.given_up = self.lapsed = 0  # records
        self._said: set[str] = set()  # what was logged once already

    def metrics(self) -> dict[str, int]:
        return {"records_renewed": self.renewed, "renewals_failed": self.failed, "given_up": self.given_up,
                "lapsed": self.lapsed, "watched": len(self._schedule)}

    def lock_is(self, lock_ms: int | None) -> None:
        """An answer said how long the group's locks last."""
        if lock_ms:
            self._lock = lock_ms / 1000

    # ------------------------------------------------------------------ what is watched

    def waiting(self, acquired: AcquiredRecords) -> None:
        """Acquired records buffered, not yet handed out: kept until handed out (or the bound)."""
        if not self._stopped:
            now = asyncio.get_running_loop().time()
            self._schedule.watch(acquired, acquired.deadline, now + self._bound)
            self._arm(self._schedule.wake_of(acquired, self._lock))

    def keep(self, record: ShareRecord) -> None:
        """A handler works on ``record`` now: keep its lock until ``release()`` (or the bound)."""
        if not self._stopped:
            now = asyncio.get_running_loop().time()
            key = _held(record)
            self._schedule.watch(key, record.acquisition_deadline, now + self._bound)
            if any(key in renewing for renewing in self._requests.values()):
                self._schedule.sending(key)  # handed out while its waiting batch is being renewed
            self._arm(self._schedule.wake_of(key, self._lock))

    def handed_out(self, acquired: AcquiredRecords) -> None:
        """Every record of ``acquired`` was handed out (or given back): none waits any more."""
        self._schedule.unwatch(acquired)

    def release(self, tp: TopicPartition, offset: int) -> None:
        """No longer kept (its handler ended, or it was decided)."""
        self._schedule.unwatch((tp, offset))

    def forget(self, tp: TopicPartition, offsets: list[int]) -> None:
        """These offsets were acquired again after their locks lapsed: their handlers' locks are gone."""
        self._schedule.unwatch_all((tp, offset) for offset in offsets)

    def halt(self, *, final: bool) -> list[asyncio.Task[None]]:
        """Stop renewing now (the share sessions end: the broker releases what they held); ``final``:
        for good (close). Returns the renewal requests under way, cancelled, for the caller to await."""
        self._stopped |= final
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        tasks = list(self._requests)
        for task in tasks:
            task.cancel()
        self._requests.clear()
        self._schedule.clear()
        return tasks

    # ------------------------------------------------------------------ renewing

    def _arm(self, wake: float | None = None) -> None:
        """The timer set for the next renewal due (``wake``: the one just watched, sooner than
        looking at every watched lock; the timer keeps the earlier of the two)."""
        if wake is None:
            wake = self._schedule.next_wake(self._lock)
        if wake is None or self._stopped:
            return
        if self._timer is not None:
            if self._timer_when <= wake:
                return
            self._timer.cancel()
        self._timer, self._timer_when = asyncio.get_running_loop().call_at(wake, self._wake), wake

    def _wake(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        due = self._schedule.due(now, self._lock)
        given_up, lapsed = self._kept(due.given_up), self._kept(due.lapsed)
        if given_up:
            self.given_up += _records(given_up)
            self._say_once("bound", logging.WARNING, "acquisition locks no longer renewed after %.0f s "
                           "(share_lock_renewal_max_ms): %d records so far; they go to any member when their locks "
                           "lapse", self._bound, self.given_up)
        self.lapsed += _records(lapsed)
        if lapsed:
            log.info("%d acquisition locks lapsed before their renewal got through", _records(lapsed))
        by_node: dict[int, list[Token]] = {}
        for token in due.renew:
            node = self._node_of(token)
            if node is None:
                self._schedule.unwatch(token)
            elif not self._session_open(node):  # after the next session's first fetch
                self._schedule.failed([token], now + self._retry_backoff)
            elif self._mark(token):  # marked only when it goes now: a mark left behind would go later,
                by_node.setdefault(node, []).append(token)  # perhaps after the record was decided
        for node, tokens in by_node.items():
            # Taken now, so no other request takes them: with the decisions pending for that broker.
            taken = self._acks.take(self._acks.pending(tp for tp, n in self._nodes.items() if n == node),
                                    renewals=True)
            renewing = {(tp, offset) for tp, batches in taken.items()
                        for offset, kind in expand(batches).items() if kind is AckType.RENEW}
            task = loop.create_task(self._renew(node, tokens, taken, renewing, now),
                                    name=f"aiokafka-lite share lock renewal to broker {node}")
            self._requests[task] = renewing
            task.add_done_callback(lambda done: self._requests.pop(done, None))
        self._arm()

    def _kept(self, tokens: list[Token]) -> list[Token]:
        """Of ``tokens`` (no longer watched), those whose records were still waiting or kept: a waiting
        token is watched until its renewal is due even when all its records were handed out."""
        return [t for t in tokens if not isinstance(t, AcquiredRecords) or (self._buffer.holds(t) and t.left)]

    def _node_of(self, token: Token) -> int | None:
        return token.node_id if isinstance(token, AcquiredRecords) else self._nodes.get(token[0])

    def _mark(self, token: Token) -> bool:
        """Mark ``token``'s records RENEW in the ledger; False (and no longer watched): nothing left to renew."""
        if isinstance(token, AcquiredRecords):
            offsets = token.remaining() if self._buffer.holds(token) else []
            if offsets:
                self._acks.renew_waiting(token.tp, offsets)
        else:
            tp, offset = token
            try:
                self._acks.acknowledge(tp, offset, AckType.RENEW)
                offsets = [offset]
            except IllegalStateError:  # decided meanwhile, or acquired again
                offsets = []
        if not offsets:
            self._schedule.unwatch(token)
        return bool(offsets)

    async def _renew(self, node: int, tokens: list[Token], taken: dict[TopicPartition, list[Batch]],
                     renewing: set[tuple[TopicPartition, int]], sent: float) -> None:
        done = await self._send(node, taken)
        self.lock_is(done.lock_ms)
        final = {tp: error for tp, error in done.results.items() if has_final_decisions(taken.get(tp, []))}
        if final:
            self._on_results(final)  # the decisions that went along: reported as any acknowledgement's
        renewed = [t for t in tokens if done.results.get(_tp_of(t)) is None]
        failed = [t for t in tokens if done.results.get(_tp_of(t)) is not None]
        deadline = sent + self._lock
        self._schedule.renewed(renewed, deadline)
        # A handler's record handed out while its waiting batch was being renewed: its token,
        # watched since with the older deadline, takes this request's outcome.
        self._schedule.renewed([key for key in renewing if done.results.get(key[0]) is None], deadline)
        self._schedule.failed([key for key in renewing if done.results.get(key[0]) is not None],
                              asyncio.get_running_loop().time() + self._retry_backoff)
        for token in renewed:
            if isinstance(token, AcquiredRecords):
                token.deadline = deadline  # the records handed out from it carry the new deadline
        self.renewed += _records(renewed)
        if failed:
            self._failed(failed, {_tp_of(t): done.results[_tp_of(t)] for t in failed})
        self._arm()

    def _failed(self, tokens: list[Token], errors: dict[TopicPartition, Any]) -> None:
        self.failed += len(tokens)
        if any(isinstance(error, UnsupportedVersionError) for error in errors.values()):
            self._say_once("version", logging.WARNING, "%s: records whose handlers outlast the group's "
                           "share.record.lock.duration.ms may be delivered again", next(iter(errors.values())))
            self._stopped = True
            self._schedule.clear()
            return
        self._schedule.failed(tokens, asyncio.get_running_loop().time() + self._retry_backoff)
        self._say_once("failed", logging.WARNING, "renewing acquisition locks failed (%s); retried while the "
                       "locks hold (%d records so far)", "; ".join(f"{tp}: {e}" for tp, e in errors.items()),
                       self.failed)

    def _say_once(self, what: str, level: int, message: str, *args: Any) -> None:
        """The first time at ``level``, then at DEBUG with the running count."""
        log.log(logging.DEBUG if what in self._said else level, message, *args)
        self._said.add(what)


def _held(record: ShareRecord) -> tuple[TopicPartition, int]:
    return TopicPartition(record.topic, record.partition), record.offset


def _records(tokens: list[Token]) -> int:
    return sum(token.left if isinstance(token, AcquiredRecords) else 1 for token in tokens)


def _tp_of(token: Token) -> TopicPartition:
    return token.tp if isinstance(token, AcquiredRecords) else token[0]
