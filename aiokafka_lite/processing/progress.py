"""One partition's progress under process(): its watermark and what may be committed (pure).

Records arrive in offset order (gaps allowed: compaction, transaction markers) and finish in any
order. The watermark is the lowest offset received and not finished; when every record received
has finished, it is the offset after the last one. Committing the watermark never skips an
unfinished record; the finished ones above it go into the commit metadata (metadata.py).

After an assignment the partition starts at its committed offset with the finished ranges decoded
from that commit's metadata: a record inside them is counted as skipped and never handed out, and
the ranges not reached yet stay in every later commit's metadata until the watermark passes them.
"""

from __future__ import annotations

from collections import deque

from .metadata import Encoded, FinishedRanges, Range, encode, merge, ranges_of


class PartitionProgress:
    def __init__(self, committed: int | None = None, carried: FinishedRanges | None = None,
                 metadata: str = "") -> None:
        self._received: deque[int] = deque()  # unfinished offsets first; finished ones until passed
        self._finished: set[int] = set()  # received, finished, above the watermark
        self._next: int | None = committed  # the offset after the last record received
        self._carried = carried if carried is not None else FinishedRanges()
        self._started = False  # the first record is taken wherever it is (the position may differ)
        self.last_committed = Encoded(metadata, False) if committed is not None else None
        self.last_committed_offset: int | None = committed

    @property
    def next_offset(self) -> int | None:
        return self._next

    def accept(self, offset: int) -> bool:
        """A record arrives: True to hand it to the handler, False when it must be dropped (at or
        below one already received: a seek back) or skipped (finished before a restart: use
        ``was_finished`` to tell)."""
        if self._started and self._next is not None and offset < self._next:
            return False
        self._started = True
        self._received.append(offset)
        self._next = offset + 1
        if offset in self._carried:
            self._finished.add(offset)
            self._advance()
            return False
        return True

    def was_finished(self, offset: int) -> bool:
        """Whether ``offset`` was recorded finished in the metadata committed before this assignment."""
        return offset in self._carried

    def finish(self, offset: int) -> None:
        self._finished.add(offset)
        self._advance()

    def _advance(self) -> None:
        received, finished = self._received, self._finished
        while received and received[0] in finished:
            finished.discard(received.popleft())

    @property
    def unfinished(self) -> int:
        """Records held: received and not finished."""
        return len(self._received) - len(self._finished)

    def watermark(self) -> int | None:
        """The offset to commit: None before any record was received (nothing to say)."""
        if self._received:
            return self._received[0]
        return self._next

    def finished_above(self, watermark: int) -> list[Range]:
        """Finished offsets above the watermark: those received, and the carried ranges beyond."""
        mine = ranges_of(self._finished)
        beyond = self._next if self._next is not None else watermark
        return merge([*mine, *self._carried.above(max(beyond, watermark + 1))])

    def to_commit(self, max_bytes: int) -> tuple[int, Encoded] | None:
        """(offset, metadata) when they differ from the last commit, else None. Never lower
        than the last committed offset (monotonic)."""
        watermark = self.watermark()
        if watermark is None:
            return None
        if self.last_committed_offset is not None and watermark < self.last_committed_offset:
            return None  # cannot happen while records arrive in order; never commit backwards
        encoded = encode(watermark, self.finished_above(watermark), max_bytes)
        if watermark == self.last_committed_offset and self.last_committed is not None \
                and encoded.metadata == self.last_committed.metadata:
            return None
        return watermark, encoded

    def committed(self, offset: int, encoded: Encoded) -> None:
        """A commit of (offset, encoded) succeeded."""
        if self.last_committed_offset is None or offset >= self.last_committed_offset:
            self.last_committed_offset, self.last_committed = offset, encoded
