"""AcquiredBuffer: per partition the answer being handed out and at most one more, in turn; which
brokers not to ask again; what is given back when a partition or everything is dropped."""

from __future__ import annotations

import pytest

from aiokafka_lite.fetch.share.buffer import AcquiredBuffer
from aiokafka_lite.fetch.share.records import AcquiredRange, AcquiredRecords
from aiokafka_lite.structs import TopicPartition

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def acquired(tp: TopicPartition, node: int, first: int, last: int) -> AcquiredRecords:
    return AcquiredRecords(tp, node, None, [AcquiredRange(first, last, 1)], 0.0)


def test_a_second_answer_waits_its_turn_and_a_third_is_refused() -> None:
    buffer = AcquiredBuffer(refill_at=4)
    buffer.add(acquired(A, 1, 0, 9))
    buffer.add(acquired(B, 1, 0, 1))
    buffer.add(acquired(A, 1, 10, 19))
    assert buffer.has_next(A)
    assert not buffer.has_next(B)
    with pytest.raises(ValueError, match="two answers already"):
        buffer.add(acquired(A, 1, 20, 29))
    assert buffer.partitions() == [A, B]
    buffer.finished(A)
    assert buffer.partitions() == [B, A]  # the next answer takes its turn last
    assert buffer.current(A).remaining()[0] == 10
    buffer.rotate(B)
    assert buffer.partitions() == [A, B]


def test_busy_brokers_have_more_than_refill_at_left_or_an_answer_waiting() -> None:
    buffer = AcquiredBuffer(refill_at=4)
    assert buffer.busy_nodes() == set()
    assert not buffer
    buffer.add(acquired(A, 1, 0, 2))  # 3 left
    buffer.add(acquired(B, 2, 0, 1))  # 2 left
    assert buffer.busy_nodes() == set()
    buffer.add(acquired(TopicPartition("u", 0), 1, 0, 1))  # node 1: 5 left
    assert buffer.busy_nodes() == {1}
    buffer.add(acquired(B, 2, 2, 2))  # node 2: an answer waits
    assert buffer.busy_nodes() == {1, 2}


def test_drop_and_drain_give_back_every_offset_not_handed_out() -> None:
    buffer = AcquiredBuffer(refill_at=4)
    buffer.add(acquired(A, 1, 0, 2))
    buffer.add(acquired(A, 1, 3, 4))
    buffer.add(acquired(B, 1, 7, 8))
    assert buffer.drop(A) == [0, 1, 2, 3, 4]
    assert buffer.drop(A) == []
    assert buffer.drain() == {B: [7, 8]}
    assert not buffer
    assert buffer.busy_nodes() == set()
