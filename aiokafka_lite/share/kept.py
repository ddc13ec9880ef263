"""Records taken from the fetcher but not handed out: those behind a record the deserializer failed
on, and a record whose deserializer must first do I/O (DeserializerNotReadyError: a schema lookup)
with those behind it, kept until poll() has awaited that preparation.

poll() hands out the records before a bad record and the next poll() raises its error (the
Consumer's contract); the bad record alone is released. The records behind it are still acquired by
this member, their delivery counts untouched: they wait here and the poll after that hands them out
first, whichever task polls. Releasing them with the bad record would raise their delivery counts
for another record's fault, and archive them early at group.share.delivery.count.limit.

Kept records are in the fetcher's ledger as handed out (awaiting a decision) but held by no task.
The ShareConsumer releases them at close() and when their partition leaves the assignment, and
forgets them at a poll lapse (its share sessions end: the broker releases them). No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..fetch.share.records import ShareRecord
from ..structs import TopicPartition


class KeptRecords:
    """In order, the records the next polls hand out before any fetched ones."""

    def __init__(self) -> None:
        self._records: list[ShareRecord] = []

    def __len__(self) -> int:
        return len(self._records)

    def keep(self, records: list[ShareRecord]) -> None:
        """``records`` (behind a bad one) go first: they came before any kept earlier and not yet taken."""
        if records:
            self._records[:0] = records

    def take(self, limit: int) -> list[ShareRecord]:
        """Up to ``limit`` kept records, the oldest first."""
        out, self._records = self._records[:limit], self._records[limit:]
        return out

    def drop(self) -> list[ShareRecord]:
        """Every kept record, no longer kept."""
        out, self._records = self._records, []
        return out

    def outside(self, tps: Iterable[TopicPartition]) -> list[ShareRecord]:
        """The kept records of partitions not in ``tps`` (they left the assignment), no longer kept."""
        wanted = {(tp.topic, tp.partition) for tp in tps}
        gone = [r for r in self._records if (r.topic, r.partition) not in wanted]
        if gone:
            self._records = [r for r in self._records if (r.topic, r.partition) in wanted]
        return gone
