"""The acknowledgement ledger of a KIP-932 share group member: which acquired records were handed
out, what the application decided for each, and the ``acknowledgement_batches`` that tell the broker.

Per partition, an acquired offset goes: handed out (``delivered``) -> decided (``acknowledge``:
accept, release, reject; renew keeps it handed out and only extends its lock) -> taken into a request
(``take``). Offsets the broker acquired but that carry no record for us (control records, records
compacted away) are decided as gaps (type 0) as soon as they are known. ``take`` coalesces one
partition's decisions into contiguous ranges: one type for a range whose offsets all have the same
type, else one type per offset (as the ShareFetch/ShareAcknowledge schemas allow).

Implicit mode accepts everything handed out at the next fetch or flush (``accept_delivered``); in
explicit mode the caller decides each record, and handing out more while some are undecided is an
error, as in Java's KafkaShareConsumer (IllegalStateException from poll). Sans-IO: no asyncio, no clocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import Any, Protocol

from ...errors import IllegalStateError, InvalidArgumentError
from ...structs import TopicPartition


class AckType(IntEnum):
    """The acknowledge types on the wire (KIP-932; RENEW from ShareFetch/ShareAcknowledge v2, KIP-1222)."""

    GAP = 0  # acquired, but no record to hand out: the client says so, the broker archives it
    ACCEPT = 1  # processed: never delivered again
    RELEASE = 2  # give it back: delivered again (to anyone), its delivery count one higher
    REJECT = 3  # unprocessable: never delivered again
    RENEW = 4  # still working on it: extend the acquisition lock (v2 brokers)


# What the caller may decide for a record (GAP is the client's own).
_DECISIONS = frozenset({AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.RENEW})
_FINAL = _DECISIONS - {AckType.RENEW}
Batch = dict[str, Any]  # one acknowledgement_batches entry: first_offset, last_offset, acknowledge_types


class HandedOut(Protocol):
    """A handed-out record, as far as the ledger cares (records.ShareRecord)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...


def coalesce(decided: Mapping[int, int]) -> list[Batch]:
    """``decided`` (offset -> acknowledge type) as acknowledgement batches, by ascending offset: each
    run of contiguous offsets is one batch, with one type if they all agree, else one per offset."""
    batches: list[Batch] = []
    run: list[int] = []  # the types of the current run of contiguous offsets
    first = 0
    for offset in sorted(decided):
        if run and offset != first + len(run):
            batches.append(_batch(first, run))
            run = []
        if not run:
            first = offset
        run.append(int(decided[offset]))
    if run:
        batches.append(_batch(first, run))
    return batches


def expand(batches: Iterable[Batch]) -> dict[int, AckType]:
    """Acknowledgement batches back to offset -> acknowledge type (``coalesce``'s inverse)."""
    out: dict[int, AckType] = {}
    for batch in batches:
        types = batch["acknowledge_types"]
        for i, offset in enumerate(range(batch["first_offset"], batch["last_offset"] + 1)):
            out[offset] = AckType(types[0] if len(types) == 1 else types[i])
    return out


def _batch(first: int, types: list[int]) -> Batch:
    uniform = all(t == types[0] for t in types)
    return {"first_offset": first, "last_offset": first + len(types) - 1,
            "acknowledge_types": [types[0]] if uniform else types}


class ShareAcknowledgements:
    """Every partition's handed-out records and decisions not yet sent."""

    def __init__(self) -> None:
        self._delivered: dict[TopicPartition, set[int]] = {}  # handed out, awaiting a decision
        self._decided: dict[TopicPartition, dict[int, AckType]] = {}  # decided, not yet sent
        self._renewals: dict[TopicPartition, set[int]] = {}  # renew decided, not yet sent
        self.lapsed = 0  # records acquired again while they awaited a decision or its sending (metrics)

    def delivered(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        """Records at ``offsets`` of ``tp`` were handed out: each awaits a decision."""
        self._delivered.setdefault(tp, set()).update(offsets)

    def gaps(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        """Acquired offsets of ``tp`` that hold no record for us: acknowledged as gaps."""
        self._decide(tp, dict.fromkeys(offsets, AckType.GAP))

    def release(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        """Acquired offsets of ``tp`` never handed out (dropped, or left at close): given back."""
        self._decide(tp, dict.fromkeys(offsets, AckType.RELEASE))

    def renew_waiting(self, tp: TopicPartition, offsets: Iterable[int]) -> None:
        """Acquired offsets of ``tp`` not yet handed out: renew their locks (they wait their turn)."""
        self._renewals.setdefault(tp, set()).update(offsets)

    def acknowledge(self, tp: TopicPartition, offset: int, ack_type: AckType | int) -> None:
        """The caller's decision for the handed-out record at ``offset`` of ``tp``."""
        try:
            kind = ack_type if type(ack_type) is AckType else AckType(ack_type)
        except ValueError:
            raise InvalidArgumentError(f"unknown acknowledge type {ack_type!r}") from None
        if kind not in _DECISIONS:
            raise InvalidArgumentError("acknowledge type GAP is the client's own, not a decision")
        waiting = self._delivered.get(tp)
        if waiting is None or offset not in waiting:
            raise IllegalStateError(f"the record at {tp.topic}-{tp.partition} offset {offset} is not "
                                    "awaiting acknowledgement (not handed out, or already acknowledged)")
        if kind is AckType.RENEW:
            self._renewals.setdefault(tp, set()).add(offset)  # still handed out: decided later
            return
        waiting.discard(offset)
        self._decided.setdefault(tp, {})[offset] = kind  # _decide's, without a dict per record (the hot path)
        renew = self._renewals.get(tp)
        if renew:
            renew.discard(offset)

    def acknowledge_all(self, records: Iterable[HandedOut], kind: AckType) -> int:
        """``acknowledge`` for many handed-out records at once (accept, release or reject), by
        partition; a record not awaiting a decision is skipped. Returns how many were decided."""
        if kind not in _FINAL:
            raise InvalidArgumentError(f"acknowledge_all takes ACCEPT, RELEASE or REJECT, not {kind!r}")
        by_partition: dict[tuple[str, int], list[int]] = {}
        for record in records:
            by_partition.setdefault((record.topic, record.partition), []).append(record.offset)
        done = 0
        for (topic, partition), offsets in by_partition.items():
            tp = TopicPartition(topic, partition)
            waiting = self._delivered.get(tp)
            if not waiting:
                continue
            hits = waiting.intersection(offsets)
            waiting.difference_update(hits)
            self._decide(tp, dict.fromkeys(hits, kind))
            done += len(hits)
        return done

    def accept_delivered(self) -> None:
        """Implicit mode: every record handed out and not decided is accepted."""
        for tp, waiting in self._delivered.items():
            if waiting:
                self._decide(tp, dict.fromkeys(waiting, AckType.ACCEPT))
                waiting.clear()

    def _decide(self, tp: TopicPartition, decisions: Mapping[int, AckType]) -> None:
        """Final decisions, in place of any renewal not sent yet: a RENEW of a decided record, sent
        after the decision went in a fetch, would fail its whole partition's acknowledgements."""
        self._decided.setdefault(tp, {}).update(decisions)
        renew = self._renewals.get(tp)
        if renew:
            renew.difference_update(decisions)

    def undecided(self) -> int:
        """How many handed-out records await a decision."""
        return sum(len(waiting) for waiting in self._delivered.values())

    def pending(self, tps: Iterable[TopicPartition] | None = None) -> set[TopicPartition]:
        """The partitions (of ``tps``, or all) with decisions not yet sent."""
        wanted = self._decided.keys() | self._renewals.keys() if tps is None else tps
        return {tp for tp in wanted if self._decided.get(tp) or self._renewals.get(tp)}

    def take(self, tps: Iterable[TopicPartition], *, renewals: bool) -> dict[TopicPartition, list[Batch]]:
        """The decisions for ``tps`` as acknowledgement batches, removed from the ledger; renewals
        too when ``renewals`` (a request that may carry them: v2 with is_renew_ack)."""
        out: dict[TopicPartition, list[Batch]] = {}
        for tp in tps:
            decided = self._decided.pop(tp, None) or {}
            renew = self._renewals.pop(tp, None) if renewals else None
            for offset in renew or ():
                decided.setdefault(offset, AckType.RENEW)
            if decided:
                out[tp] = coalesce(decided)
        return out

    def restore(self, taken: Mapping[TopicPartition, list[Batch]]) -> None:
        """Put back decisions ``take`` gave for a request the broker refused whole (its share session
        had ended): they go with the first request of the new session. Newer decisions win."""
        for tp, batches in taken.items():
            for offset, kind in expand(batches).items():
                if kind is AckType.RENEW:
                    self._renewals.setdefault(tp, set()).add(offset)
                else:
                    self._decided.setdefault(tp, {}).setdefault(offset, kind)

    def has_renewals(self, tps: Iterable[TopicPartition]) -> bool:
        return any(self._renewals.get(tp) for tp in tps)

    def reacquired(self, tp: TopicPartition, offsets: Iterable[int]) -> int:
        """``offsets`` of ``tp`` were acquired for us again: their lock had lapsed, so a decision
        not yet sent would settle the new delivery, and the old one awaits none. Both are dropped;
        returns how many. Each such record (a gap aside) counts as ``lapsed``: its lock lapsed while
        this member held it."""
        dropped = gaps = 0
        delivered, decided, renewals = self._delivered.get(tp), self._decided.get(tp), self._renewals.get(tp)
        if not (delivered or decided or renewals):
            return 0
        for offset in offsets:
            for held in (delivered, renewals):
                if held and offset in held:
                    held.discard(offset)
                    dropped += held is delivered
            kind = decided.pop(offset, None) if decided else None
            if kind is not None:
                dropped += 1
                gaps += kind is AckType.GAP  # acquired, but no record: not a record's lapse
        self.lapsed += dropped - gaps
        return dropped

    def forget(self, tps: Iterable[TopicPartition]) -> int:
        """Drop everything about ``tps`` (the partition left the assignment, or its share session
        ended: the broker releases what it had acquired for us); returns how many decisions were lost."""
        lost = 0
        for tp in tps:
            self._delivered.pop(tp, None)
            self._renewals.pop(tp, None)
            lost += sum(1 for t in (self._decided.pop(tp, None) or {}).values() if t is not AckType.GAP)
        return lost
