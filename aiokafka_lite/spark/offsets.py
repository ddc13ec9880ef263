"""Offsets as Spark checkpoints them, rate limiting, and planning ranges (pure functions).

A streaming offset is ``{"topic": {"partition": next_offset}}`` -- the format of Spark's own Kafka
source. Spark compares offsets by their JSON text, so every dict built here is in one canonical
order (topics by name, partitions by number): "no new data" must serialise to the very same string.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

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


def check_batch_bounds(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> None:
    """A batch read whose end lies before its start for some partition is a mistake in the options."""
    backwards = [f"{tp.topic}-{tp.partition} ({start[tp]} > {end[tp]})" for tp in sorted(end)
                 if tp in start and end[tp] < start[tp]]
    if backwards:
        raise ConfigError("endingOffsets lies before startingOffsets for " + ", ".join(backwards))

