"""The records `async for` fetched but has not handed out yet. A poll() made after an `async
for` stopped early hands them out first; a seek or a revocation drops those of its partitions;
a commit of what was consumed stops before the first of them."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from ..structs import ConsumerRecord, ConsumerRecords, OffsetAndMetadata, TopicPartition


class IterationBuffer:
    def __init__(self) -> None:
        self._records: deque[ConsumerRecord] = deque()

    def __bool__(self) -> bool:
        return bool(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def append(self, record: ConsumerRecord) -> None:
        self._records.append(record)

    def extend(self, records: Iterable[ConsumerRecord]) -> None:
        self._records.extend(records)

    def popleft(self) -> ConsumerRecord:
        return self._records.popleft()

    def take(self, limit: int) -> ConsumerRecords:
        """Up to `limit` records, oldest first, as one batch."""
        by_partition: dict[TopicPartition, list[ConsumerRecord]] = {}
        for _ in range(min(limit, len(self._records))):
            record = self._records.popleft()
            by_partition.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
        return ConsumerRecords(by_partition)

    def drop(self, tps: set[TopicPartition]) -> None:
        """Records of `tps` are no longer next (a seek, a revocation)."""
        if self._records:
            self._records = deque(r for r in self._records if TopicPartition(r.topic, r.partition) not in tps)

    def before_buffered(self, consumed: dict[TopicPartition, OffsetAndMetadata]
                        ) -> dict[TopicPartition, OffsetAndMetadata]:
        """`consumed` with each partition's offset moved back to its first buffered record:
        those records were not handed to the user yet."""
        for record in reversed(self._records):
            tp = TopicPartition(record.topic, record.partition)
            if tp in consumed:
                consumed[tp] = OffsetAndMetadata(record.offset, "", record.leader_epoch)
        return consumed
