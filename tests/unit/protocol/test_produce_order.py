"""produce()'s delivery check: with idempotence asked for, a partition whose log order differs from the
send order is an error; without, only failed deliveries are."""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite.testing.helpers import ProduceError, _Deliveries


class _Delivered:
    """What librdkafka hands a delivery callback: the message's partition and offset."""

    def __init__(self, partition: int, offset: int) -> None:
        self._partition, self._offset = partition, offset

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


def _deliver(landed: list[tuple[int, int, int]], error: Any = None) -> _Deliveries:
    """``landed``: (send index, partition, offset), in the order the reports arrive."""
    deliveries = _Deliveries()
    for index, partition, offset in landed:
        deliveries.callback(index)(error, _Delivered(partition, offset))
    return deliveries


def test_send_order_kept_per_partition_passes() -> None:
    # Reports may arrive in any order, and partitions interleave: only each partition's order counts.
    _deliver([(1, 0, 1), (0, 0, 0), (2, 1, 0), (3, 0, 2), (4, 1, 1)]).check(5)


def test_a_retried_batch_landing_after_a_later_one_is_refused() -> None:
    # Records 0-1 retried after records 2-3 were written: offsets 2,3 then 0,1 in send order.
    deliveries = _deliver([(2, 0, 0), (3, 0, 1), (0, 0, 2), (1, 0, 3)])
    with pytest.raises(ProduceError, match=r"out of send order \(partition 0: a record sent later landed at "
                                           r"offset 0, before 3\)"):
        deliveries.check(4)


def test_failures_are_reported_first() -> None:
    deliveries = _deliver([(0, 0, 0)], error="timed out")
    with pytest.raises(ProduceError, match=r"1 of 1 records failed: \['t\[0\]: timed out'\]"):
        deliveries.check(1)


def test_without_idempotence_the_order_is_not_checked() -> None:
    _deliver([(2, 0, 0), (3, 0, 1), (0, 0, 2), (1, 0, 3)]).check(4, in_order=False)
