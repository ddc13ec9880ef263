"""The records a share group member acquired: ``ShareRecord`` and one partition's acquired data.

A ShareFetch answer carries whole batches, but the broker may have acquired only some of their
offsets for us (``acquired_records``: ranges, each with its delivery count); only those are handed
out. ``AcquiredRecords`` decodes lazily through ``PartitionRecords`` (the same decoder, Rust or
Python, as the Consumer's), from the first acquired offset, and skips the rest. Acquired offsets
with no record (control records, records compacted away) come back as gaps, to be acknowledged as
such.

Why a type of its own: each handed-out record carries its delivery count and acquisition deadline.
``ShareRecord`` has ConsumerRecord's fields, in the same order, and those two after them; the
Consumer's ConsumerRecord (and its hot path, which builds tuples straight from columns) stays as it
is, and a side table keyed by (partition, offset) would cost a lookup per record and live on after
the record. Sans-IO: the deadline is given in (the event loop's clock, seconds).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from ...errors import KafkaError
from ...protocol.records.decode import Buffer, PartitionRecords
from ...structs import TopicPartition


class ShareRecord(NamedTuple):
    """One acquired record as handed to the application: ConsumerRecord's fields, then how many
    times it was delivered (1 the first time) and when its acquisition lock lapses (the event
    loop's clock, ``loop.time()``, in seconds): after that the broker may give it to another member."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: Sequence[tuple[str, bytes | None]]
    leader_epoch: int | None
    delivery_count: int
    acquisition_deadline: float


class AcquiredRange(NamedTuple):
    first_offset: int
    last_offset: int  # inclusive
    delivery_count: int


class AcquiredRecords:
    """One partition's part of a ShareFetch answer, waiting to be handed out."""

    __slots__ = ("_cursor", "_error", "_index", "_ranges", "_records", "deadline", "node_id", "tp")

    def __init__(self, tp: TopicPartition, node_id: int, data: Buffer | None, acquired: Iterable[AcquiredRange],
                 deadline: float, *, check_crcs: bool = True) -> None:
        self.tp = tp
        self.node_id = node_id  # the broker that acquired them: acknowledgements go there
        self._ranges = sorted(acquired)
        self.deadline = deadline  # when the lock lapses; a renewal (renewals.py) moves it
        self._index = 0  # the range the cursor is in
        self._cursor = self._ranges[0].first_offset if self._ranges else 0  # the next acquired offset not yet passed
        self._records = (PartitionRecords(tp.topic, tp.partition, data, self._cursor, check_crcs=check_crcs)
                         if data and self._ranges else None)
        self._error: KafkaError | None = None

    @property
    def exhausted(self) -> bool:
        return self._index >= len(self._ranges)

    @property
    def left(self) -> int:
        """How many acquired offsets are not yet handed out or passed as gaps."""
        return sum(r.last_offset + 1 - max(r.first_offset, self._cursor) for r in self._ranges[self._index:])

    def remaining(self) -> list[int]:
        """The acquired offsets not yet handed out or passed as gaps."""
        out: list[int] = []
        for i in range(self._index, len(self._ranges)):
            r = self._ranges[i]
            out.extend(range(max(r.first_offset, self._cursor), r.last_offset + 1))
        return out

    def take(self, max_records: int) -> tuple[list[ShareRecord], list[int]]:
        """Up to ``max_records`` acquired records, and the acquired offsets passed without a record
        (gaps). A decoding error is raised once the records before it are out; the offsets after
        it stay acquired (``remaining()``)."""
        out: list[ShareRecord] = []
        gaps: list[int] = []
        while len(out) < max_records and not self.exhausted:
            chunks = self._next_chunks(max_records - len(out))
            if chunks is None:
                break
            if not chunks:  # the data ended: what is left was acquired without a record for us
                gaps.extend(self.remaining())
                self._index = len(self._ranges)
                break
            for record in chunks:
                self._hand_out(record, out, gaps)
        if not out and not gaps and self._error is not None:
            raise self._error
        return out, gaps

    def _next_chunks(self, wanted: int) -> Any:
        """The next decoded records (empty: the data ended; None: an error is pending)."""
        if self._records is None or self._error is not None:
            return None if self._error is not None else ()
        try:
            return self._records.take(wanted)
        except KafkaError as exc:
            self._error = exc
            return None

    def _hand_out(self, record: Sequence[Any], out: list[ShareRecord], gaps: list[int]) -> None:
        offset: int = record[2]
        ranges = self._ranges
        while self._index < len(ranges) and self._cursor < offset:
            r = ranges[self._index]
            stop = min(offset, r.last_offset + 1)
            gaps.extend(range(self._cursor, stop))  # acquired, but no record at these offsets
            if stop > r.last_offset:
                self._index += 1
                if self._index < len(ranges):
                    self._cursor = max(stop, ranges[self._index].first_offset)
                    continue
            self._cursor = max(stop, self._cursor)
        if self._index >= len(ranges) or offset < self._cursor or offset < ranges[self._index].first_offset:
            return  # not acquired for us (before the cursor or between ranges)
        r = ranges[self._index]
        out.append(ShareRecord._make((*record, r.delivery_count, self.deadline)))
        self._cursor = offset + 1
        if self._cursor > r.last_offset:
            self._index += 1
            if self._index < len(ranges):
                self._cursor = ranges[self._index].first_offset
