"""Back-pressure: which partitions process() keeps paused (pure: counts in, a set out).

``max_pending_records`` bounds the records held (handlers running plus records waiting for their
key). poll() goes on being called whatever is paused (KIP-62: no poll gap), and is asked for at most
the room left, so the bound holds; pausing keeps the fetcher from filling its buffers meanwhile.

    held >= bound            every assigned partition is paused
    held >= bound / 2        under pressure: the busiest partitions are paused, those holding at
                             least their fair share (bound / assigned partitions); a partition
                             already paused stays so until it holds at most half its share
    held <  bound / 2        nothing is paused by process()

Only what process() paused is resumed: a partition the application paused stays paused.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from ..structs import TopicPartition


def to_pause(held: Mapping[TopicPartition, int], assigned: Set[TopicPartition], paused_by_us: Set[TopicPartition],
             bound: int) -> set[TopicPartition]:
    """The partitions that should be paused by process() now."""
    total = sum(held.get(tp, 0) for tp in assigned)
    if total >= bound:
        return set(assigned)
    if total * 2 < bound or not assigned:
        return set()
    share = bound / len(assigned)
    busiest = {tp for tp in assigned if held.get(tp, 0) >= share}
    staying = {tp for tp in paused_by_us & assigned if held.get(tp, 0) * 2 > share}
    return busiest | staying


def room(held_total: int, bound: int) -> int:
    """How many more records a poll may take."""
    return max(0, bound - held_total)
