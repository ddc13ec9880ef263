"""minPartitions and maxRecordsPerPartition: how one batch's offset ranges become Spark tasks, with
the semantics of Spark's own Kafka source (its KafkaOffsetRangeCalculator). No broker, no Spark."""

from __future__ import annotations

import itertools

import pytest

pytest.importorskip("pyspark")  # aiokafka_lite.spark imports it

from aiokafka_lite.spark.offsets import OffsetRange, split_ranges
from aiokafka_lite.spark.options import EARLIEST


def _spans(ranges: list[OffsetRange]) -> list[tuple[int, int, int]]:
    return [(r.partition, r.start, r.end) for r in ranges]


def _covers_each_offset_once(before: list[OffsetRange], after: list[OffsetRange]) -> None:
    for r in before:
        pieces = [(p.start, p.end) for p in after if p.tp == r.tp]
        assert pieces[0][0] == r.start
        assert pieces[-1][1] == r.end
        assert all(a_end == b_start for (_, a_end), (b_start, _) in itertools.pairwise(pieces))


def test_without_either_option_each_kafka_partition_is_one_task() -> None:
    ranges = [OffsetRange("t", 0, EARLIEST, 10), OffsetRange("t", 1, 5, 5)]
    assert split_ranges(ranges, None, None) == ranges


def test_min_partitions_splits_one_large_partition_evenly() -> None:
    ranges = [OffsetRange("t", 0, 0, 1_000_000)]
    tasks = split_ranges(ranges, 4, None)
    assert _spans(tasks) == [(0, 0, 250_000), (0, 250_000, 500_000), (0, 500_000, 750_000),
                             (0, 750_000, 1_000_000)]


def test_min_partitions_splits_in_proportion_and_leaves_small_partitions_whole() -> None:
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 100, 150), OffsetRange("t", 2, 0, 50)]
    tasks = split_ranges(ranges, 10, None)
    # Shares of 10 tasks: 9.0, 0.5 (rounded half up: 1) and 0.5; the two small ones stay whole and
    # the 900 share the 8 tasks left: 112 or 113 offsets each, the larger last.
    assert _spans(tasks) == [(0, 0, 112), (0, 112, 224), (0, 224, 336), (0, 336, 448), (0, 448, 561),
                             (0, 561, 674), (0, 674, 787), (0, 787, 900), (1, 100, 150), (2, 0, 50)]
    _covers_each_offset_once(ranges, tasks)


def test_min_partitions_at_or_below_the_partition_count_changes_nothing_but_drops_empty_ranges() -> None:
    ranges = [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 7, 7), OffsetRange("t", 2, 0, 3)]
    assert _spans(split_ranges(ranges, 2, None)) == [(0, 0, 10), (2, 0, 3)]


def test_max_records_per_partition_caps_every_task() -> None:
    ranges = [OffsetRange("t", 0, 10, 35), OffsetRange("t", 1, 0, 10)]
    tasks = split_ranges(ranges, None, 10)
    assert _spans(tasks) == [(0, 10, 18), (0, 18, 26), (0, 26, 35), (1, 0, 10)]
    assert max(t.size for t in tasks) <= 10


def test_both_options_cap_first_then_split_up_to_min_partitions() -> None:
    ranges = [OffsetRange("t", 0, 0, 100)]
    assert len(split_ranges(ranges, None, 50)) == 2
    tasks = split_ranges(ranges, 8, 50)
    assert len(tasks) == 8
    assert max(t.size for t in tasks) <= 50
    _covers_each_offset_once(ranges, tasks)
    assert len(split_ranges(ranges, 2, 10)) == 10  # the larger of the two counts


def test_more_tasks_than_offsets_gives_one_offset_each() -> None:
    tasks = split_ranges([OffsetRange("t", 0, 0, 3)], 8, None)
    assert _spans(tasks) == [(0, 0, 1), (0, 1, 2), (0, 2, 3)]


def test_unresolved_starts_cannot_be_split() -> None:
    with pytest.raises(ValueError, match="resolved"):
        split_ranges([OffsetRange("t", 0, EARLIEST, 10)], 4, None)
