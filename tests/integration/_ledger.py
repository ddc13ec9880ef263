"""Exactly-once accounting for groups whose members keep partitions through a rebalance
(cooperative, KIP-848) as well as eager ones.

A record counts when the member that read it commits an offset past it while still holding its
partition. Records read but not committed when the partition goes away are dropped: the next
owner reads them again from the committed offset, and counts them then. So each record must be
counted exactly once overall: none lost, none committed twice.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any


class CommitLedger:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # confluent-kafka members run in threads
        self._pending: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.seen: Counter[tuple[int, int]] = Counter()
        self.by_member: Counter[str] = Counter()
        self.last_read: dict[tuple[str, int], tuple[float, int]] = {}  # (member, partition) -> (when, offset)

    def read(self, member: str, partition: int, offsets: Iterable[int]) -> None:
        with self._lock:
            pending = self._pending[(member, partition)]
            pending.extend(offsets)
            if pending:
                self.last_read[(member, partition)] = (time.time(), pending[-1])

    def committed(self, member: str, offsets: Mapping[int, int]) -> None:
        """A successful commit: {partition: next offset to read}."""
        with self._lock:
            for partition, upto in offsets.items():
                pending = self._pending[(member, partition)]
                done = [o for o in pending if o < upto]
                self._pending[(member, partition)] = [o for o in pending if o >= upto]
                self.seen.update((partition, o) for o in done)
                self.by_member[member] += len(done)

    def released(self, member: str, partitions: Iterable[int]) -> None:
        """Revoked or lost: what was read and not committed is the next owner's to read."""
        with self._lock:
            for partition in partitions:
                self._pending.pop((member, partition), None)

    def total(self) -> int:
        with self._lock:
            return len(self.seen)

    def replay_java(self, member: str, events: list[dict[str, Any]]) -> None:
        """The same accounting from a VerifiableConsumer's events, in the order it printed them."""
        for event in events:
            name = event["name"]
            if name == "records_consumed":
                for p in event["partitions"]:
                    self.read(member, p["partition"], range(p["minOffset"], p["maxOffset"] + 1))
            elif name == "offsets_committed" and event.get("success"):
                self.committed(member, {o["partition"]: o["offset"] for o in event["offsets"]})
            elif name in ("partitions_revoked", "partitions_lost"):
                self.released(member, [p["partition"] for p in event["partitions"]])

    def describe(self) -> str:
        """Per partition: records counted, and the members with records read but not committed."""
        with self._lock:
            counted = Counter(p for p, _o in self.seen)
            pending = {f"{m}/{p}": len(v) for (m, p), v in self._pending.items() if v}
        return f"counted per partition {dict(sorted(counted.items()))}, pending {pending}"

    def readers(self) -> str:
        """Per partition, who read it last, when, and up to which offset: who was really reading
        what, whatever the assignments said."""
        with self._lock:
            reads = sorted(self.last_read.items(), key=lambda item: (item[0][1], item[1][0]))
        return "; ".join(f"{p}: {member} {when:.1f} @{offset}" for (member, p), (when, offset) in reads)

    def duplicates(self) -> int:
        """Commits counted beyond the first, over every record."""
        with self._lock:
            return sum(n - 1 for n in self.seen.values())

    def check(self, expected: int) -> None:
        duplicates = {pos: n for pos, n in self.seen.items() if n > 1}
        assert not duplicates, f"{len(duplicates)} records committed twice, e.g. {list(duplicates.items())[:5]}"
        assert len(self.seen) == expected, f"{expected - len(self.seen)} records never committed"
