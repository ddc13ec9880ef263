"""Offsets as Spark checkpoints them, rate limiting, and planning ranges (pure functions).

A streaming offset is ``{"topic": {"partition": next_offset}}`` -- the format of Spark's own Kafka
source. Spark compares offsets by their JSON text, so every dict built here is in one canonical
order (topics by name, partitions by number): "no new data" must serialise to the very same string.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ..errors import ConfigError
from ..structs import TopicPartition
from .options import EARLIEST

JsonOffsets = dict[str, dict[str, int]]


@dataclass(frozen=True)
class OffsetRange:
    """Records ``start <= offset < end`` of one partition; ``start`` may be EARLIEST (the log start)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        """How many offsets the range spans (records, but for compaction and transaction markers)."""
        return self.end - self.start


def to_json(offsets: Mapping[TopicPartition, int]) -> JsonOffsets:
    """The canonical checkpoint form of per-partition offsets."""
    result: JsonOffsets = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return result


def from_json(offsets: Mapping[str, Mapping[str, int]] | None) -> dict[TopicPartition, int]:
    """Per-partition offsets from the checkpoint form (or from a JSON option)."""
    if not offsets:
        return {}
    return {TopicPartition(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


def cap(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
        max_records: int) -> dict[TopicPartition, int]:
    """End offsets that admit at most ``max_records`` in total, shared in proportion to each backlog.

    Whole shares go first; the records left over (fewer than the number of partitions) go one each to
    the partitions with the largest fractional shares, so a tiny limit still makes progress and the
    total never exceeds the limit. Partitions without a start begin at their latest offset.
    """
    backlog = {tp: max(latest[tp] - start.get(tp, latest[tp]), 0) for tp in sorted(latest)}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(latest)
    shares = {tp: max_records * size / total for tp, size in backlog.items()}
    granted = {tp: int(share) for tp, share in shares.items()}
    leftover = max_records - sum(granted.values())
    by_fraction = sorted(shares, key=lambda tp: (-(shares[tp] - granted[tp]), tp))
    for tp in by_fraction[:leftover]:
        granted[tp] += 1
    return {tp: (start.get(tp, latest[tp]) + granted[tp]) if backlog[tp] else latest[tp] for tp in latest}


def plan_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                missing_start: int = EARLIEST) -> list[OffsetRange]:
    """One range per partition that has records to read; partitions new since ``start`` read from
    ``missing_start`` (the log start, as Spark's Kafka source does for partitions added later)."""
    ranges = []
    for tp in sorted(end):
        begin = start.get(tp, missing_start)
        if begin == EARLIEST or end[tp] > begin:
            ranges.append(OffsetRange(tp.topic, tp.partition, begin, end[tp]))
    return ranges


def split_ranges(ranges: Sequence[OffsetRange], min_partitions: int | None,
                 max_records: int | None) -> list[OffsetRange]:
    """Spark tasks for ``ranges`` (whose starts are resolved), as Spark's Kafka source plans them.

    ``max_records`` (maxRecordsPerPartition) first cuts every range into the fewest even pieces of at
    most that many offsets. Then, while there are fewer pieces than ``min_partitions``, the large
    pieces are cut further in proportion to their share of all offsets: a piece whose share rounds
    to at most one task stays whole, and the others share the tasks left. The count is therefore
    about ``min_partitions``, not exactly it. Empty ranges are dropped.
    """
    if min_partitions is None and max_records is None:
        return list(ranges)
    if any(r.start == EARLIEST for r in ranges):
        raise ValueError("split_ranges needs resolved start offsets, not EARLIEST")
    pieces = [r for r in ranges if r.size > 0]
    if max_records is not None:
        pieces = [piece for r in pieces for piece in _divide(r, -(-r.size // max_records))]
    if min_partitions is None or len(pieces) >= min_partitions:
        return pieces
    total = sum(r.size for r in pieces)
    whole = {i for i, r in enumerate(pieces) if _share(r.size, total, min_partitions) == 1}
    cut_total = total - sum(pieces[i].size for i in whole)
    cut_tasks = max(min_partitions - len(whole), 1)
    return [piece for i, r in enumerate(pieces)
            for piece in _divide(r, 1 if i in whole else _share(r.size, cut_total, cut_tasks))]


def _share(size: int, total: int, tasks: int) -> int:
    """This range's share of ``tasks``, rounded half up (as Spark rounds it), at least one."""
    return max(math.floor(size / total * tasks + 0.5), 1)


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``r`` in ``parts`` consecutive ranges whose sizes differ by at most one (the larger last)."""
    pieces, start, remaining = [], r.start, r.size
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        pieces.append(replace(r, start=start, end=start + size))
        start += size
    return [piece for piece in pieces if piece.size > 0]


def check_batch_bounds(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                       starting: str = "startingOffsets", ending: str = "endingOffsets") -> None:
    """A batch read whose end lies before its start for some partition is a mistake in the options
    (named ``starting`` and ``ending``: the options the offsets came from)."""
    backwards = [f"{tp.topic}-{tp.partition} ({start[tp]} > {end[tp]})" for tp in sorted(end)
                 if tp in start and end[tp] < start[tp]]
    if backwards:
        raise ConfigError(f"{ending} lies before {starting} for " + ", ".join(backwards))

