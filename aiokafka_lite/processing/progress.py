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

from .metadata import Encoded, FinishedRanges, Range, encode, merge


class PartitionProgress:
    def __init__(self, committed: int | None = None, carried: FinishedRanges | None = None,
                 metadata: str = "") -> None:
        # Only the unfinished offsets are kept, in offset order (records arrive in order; a dict
        # keeps insertion order and removes any key at once). Everything received between them is
        # finished, or no record (compaction, transaction markers): the bookkeeping is bounded by
        # the records held, whatever a handler does, never by how many finished after a stuck one.
        self._unfinished: dict[int, None] = {}
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
        self._next = offset + 1
        if offset in self._carried:
            return False
        self._unfinished[offset] = None
        return True

    def was_finished(self, offset: int) -> bool:
        """Whether ``offset`` was recorded finished in the metadata committed before this assignment."""
        return offset in self._carried

    def finish(self, offset: int) -> None:
        self._unfinished.pop(offset, None)

    @property
    def unfinished(self) -> int:
        """Records held: received and not finished (also all that this object keeps per offset)."""
        return len(self._unfinished)

    def watermark(self) -> int | None:
        """The offset to commit: None before any record was received (nothing to say)."""
        for offset in self._unfinished:
            return offset
        return self._next

    def finished_above(self, watermark: int) -> list[Range]:
        """Finished offsets above the watermark: the spans between unfinished ones up to the last
        record received, and the carried ranges beyond. Work in proportion to the records held."""
        mine: list[Range] = []
        previous = watermark
        for offset in self._unfinished:
            if offset > previous + 1:
                mine.append((previous + 1, offset))
            previous = max(previous, offset)
        beyond = self._next if self._next is not None else watermark
        if beyond > previous + 1:
            mine.append((previous + 1, beyond))
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
