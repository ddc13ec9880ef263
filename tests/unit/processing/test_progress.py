"""A partition's watermark and commits (progress.py) and the pause decision (pressure.py): pure."""

from __future__ import annotations

import random

from aiokafka_lite.processing.metadata import FinishedRanges, decode
from aiokafka_lite.processing.pressure import room, to_pause
from aiokafka_lite.processing.progress import PartitionProgress
from aiokafka_lite.structs import TopicPartition


def test_the_watermark_is_the_lowest_unfinished_offset():
    progress = PartitionProgress()
    assert progress.watermark() is None
    assert progress.to_commit(4096) is None
    for offset in range(10):
        assert progress.accept(offset)
    for offset in (5, 6, 9):
        progress.finish(offset)
    assert progress.watermark() == 0
    assert progress.unfinished == 7
    offset, encoded = progress.to_commit(4096)
    assert offset == 0
    assert decode(encoded.metadata, 0).ranges == [(5, 7), (9, 10)]
    for offset in range(5):
        progress.finish(offset)
    assert progress.watermark() == 7
    offset, encoded = progress.to_commit(4096)
    assert offset == 7
    assert decode(encoded.metadata, 7).ranges == [(9, 10)]
    progress.finish(7)
    progress.finish(8)
    assert progress.watermark() == 10
    assert progress.unfinished == 0
    assert progress.to_commit(4096)[1].metadata == ""


def test_gaps_in_offsets_do_not_hold_the_watermark():
    progress = PartitionProgress()
    for offset in (3, 4, 8, 20):  # compaction or transaction markers between them
        progress.accept(offset)
    for offset in (3, 4, 8):
        progress.finish(offset)
    assert progress.watermark() == 20
    progress.finish(20)
    assert progress.watermark() == 21


def test_random_completion_order_never_commits_past_an_unfinished_record():
    rng = random.Random(26)
    progress = PartitionProgress()
    offsets = list(range(500))
    for offset in offsets:
        progress.accept(offset)
    rng.shuffle(offsets)
    finished: set[int] = set()
    last = 0
    for offset in offsets:
        progress.finish(offset)
        finished.add(offset)
        watermark = progress.watermark()
        assert all(o in finished for o in range(watermark))
        assert watermark == 500 or watermark not in finished
        planned = progress.to_commit(4096)
        if planned is not None:
            assert planned[0] >= last
            progress.committed(*planned)
            last = planned[0]
            assert set(range(watermark, 500)) & finished == {
                o for start, end in decode(planned[1].metadata, watermark).ranges for o in range(start, end)}
    assert progress.watermark() == 500


def test_an_unchanged_state_is_not_committed_again():
    progress = PartitionProgress()
    progress.accept(0)
    progress.finish(0)
    progress.committed(*progress.to_commit(4096))
    assert progress.to_commit(4096) is None
    progress.accept(1)
    assert progress.to_commit(4096) is None  # watermark 1, already committed


def test_carried_offsets_are_skipped_and_stay_in_the_metadata_until_passed():
    carried = FinishedRanges([(5, 7), (50, 52)])
    progress = PartitionProgress(3, carried, "whatever was committed")
    assert progress.accept(3)
    assert progress.accept(4)
    assert not progress.accept(5)
    assert progress.was_finished(5)
    assert not progress.accept(6)
    assert progress.accept(7)
    progress.finish(3)
    offset, encoded = progress.to_commit(4096)
    assert offset == 4
    assert decode(encoded.metadata, 4).ranges == [(5, 7), (50, 52)]  # 50, 51 not reached yet
    progress.finish(4)
    progress.finish(7)
    offset, encoded = progress.to_commit(4096)
    assert offset == 8
    assert decode(encoded.metadata, 8).ranges == [(50, 52)]


def test_a_record_below_the_last_one_is_dropped():
    progress = PartitionProgress(10)
    assert progress.accept(10)
    assert progress.accept(11)
    assert not progress.accept(11)
    assert not progress.accept(4)
    assert not progress.was_finished(4)
    progress.finish(10)
    progress.finish(11)
    progress.committed(*progress.to_commit(4096))
    assert not progress.accept(11)  # also once everything received is finished and committed


def test_the_first_record_is_taken_wherever_it_is():
    progress = PartitionProgress(10)
    assert progress.accept(4)  # the application seeked back before process() began
    assert progress.watermark() == 4
    assert progress.to_commit(4096) is None  # never below the committed 10


TPS = [TopicPartition("t", p) for p in range(4)]


def test_nothing_is_paused_below_half_the_bound():
    assert to_pause({TPS[0]: 49}, set(TPS), set(), 100) == set()


def test_under_pressure_the_busiest_partitions_pause():
    held = {TPS[0]: 40, TPS[1]: 10, TPS[2]: 5}  # 55 of 100; fair share 25
    assert to_pause(held, set(TPS), set(), 100) == {TPS[0]}


def test_a_paused_partition_stays_paused_until_it_holds_half_its_share():
    held = {TPS[0]: 20, TPS[1]: 20, TPS[2]: 20}  # 60 of 100: share 25, nobody over it
    assert to_pause(held, set(TPS), {TPS[0]}, 100) == {TPS[0]}
    held[TPS[0]] = 12
    assert to_pause(held, set(TPS), {TPS[0]}, 100) == set()


def test_at_the_bound_every_partition_pauses():
    assert to_pause({TPS[0]: 100}, set(TPS), set(), 100) == set(TPS)
    assert room(100, 100) == 0
    assert room(120, 100) == 0
    assert room(30, 100) == 70


def test_one_stuck_record_keeps_the_bookkeeping_bounded_however_many_finish_after_it():
    """Issue 39: a hung handler held the watermark while every record finished after it was kept
    (about 85 B each) and re-sorted at each commit. Only the unfinished ones are kept now."""
    import tracemalloc

    progress = PartitionProgress()
    progress.accept(0)  # never finishes
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for offset in range(1, 200_001):
            progress.accept(offset)
            progress.finish(offset)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert progress.unfinished == 1
    assert grown < 64 * 1024, grown  # was about 17 MB for these 200,000 records
    offset, encoded = progress.to_commit(4096)
    assert offset == 0
    assert decode(encoded.metadata, 0).ranges == [(1, 200_001)]
