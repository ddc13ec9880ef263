"""lane_policy.py: when an answer is busy, and how many fetch connections a broker gets for it.

Pure: each test passes the figures and the time itself.
"""

from __future__ import annotations

import pytest

from aiokafka_lite.fetch.lane_policy import (
    BUSY_BYTES,
    CLOSE_AFTER_CALM,
    CLOSE_AFTER_SECONDS,
    OPEN_AFTER_BUSY,
    LanePolicy,
    busy_response,
)

MIB = 1 << 20


def busy(seconds: float = 0.01, max_wait: float = 0.5, record_bytes: int = 0, partitions: int = 6,
         partition_max_bytes: int = MIB, max_bytes: int = 50 * MIB) -> bool:
    return busy_response(seconds=seconds, max_wait=max_wait, record_bytes=record_bytes, partitions=partitions,
                         partition_max_bytes=partition_max_bytes, max_bytes=max_bytes)


# ---------------------------------------------------------------- busy_response


def test_an_answer_half_as_full_as_it_could_be_is_busy() -> None:
    # 3 partitions of 100 KiB each: the request could carry 300 KiB.
    kib = 1024
    assert busy(record_bytes=150 * kib, partitions=3, partition_max_bytes=100 * kib)
    assert not busy(record_bytes=150 * kib - 1, partitions=3, partition_max_bytes=100 * kib)


def test_the_cap_is_fetch_max_bytes_when_the_partitions_could_carry_more() -> None:
    # 6 x 1 MiB asked, but fetch_max_bytes 512 KiB: half of that is enough.
    assert busy(record_bytes=256 * 1024, partitions=6, max_bytes=512 * 1024)
    assert not busy(record_bytes=256 * 1024 - 1, partitions=6, max_bytes=512 * 1024)


def test_a_mebibyte_is_busy_however_much_more_the_request_could_carry() -> None:
    # 200 partitions at 1 MiB, 50 MiB fetch_max_bytes: a backlog on a few partitions still shows.
    assert busy(record_bytes=BUSY_BYTES, partitions=200)
    assert not busy(record_bytes=BUSY_BYTES - 1, partitions=200)


def test_an_answer_that_waited_out_the_long_poll_is_not_busy_however_full() -> None:
    # fetch_min_bytes batching: the broker held it the whole fetch_max_wait_ms.
    assert not busy(seconds=0.5, record_bytes=6 * MIB)
    assert not busy(seconds=0.7, record_bytes=6 * MIB)
    assert busy(seconds=0.49, record_bytes=6 * MIB)


def test_without_a_long_poll_the_bytes_alone_decide() -> None:
    # fetch_max_wait_ms=0: the broker never holds an answer, so none waited anything out.
    assert busy(seconds=0.2, max_wait=0.0, record_bytes=6 * MIB)
    assert not busy(seconds=0.0, max_wait=0.0, record_bytes=1000)


def test_an_empty_answer_is_never_busy() -> None:
    assert not busy(record_bytes=0)
    assert not busy(record_bytes=0, partition_max_bytes=0)  # a capacity of 0 is no excuse
    assert not busy(record_bytes=0, max_wait=0.0, seconds=0.0)


def test_a_consumer_keeping_up_with_a_trickle_is_not_busy() -> None:
    # 6 partitions, default limits: a few KB arriving per round trip is far below 1 MiB.
    assert not busy(record_bytes=20_000)


# ---------------------------------------------------------------- a fixed number of lanes


@pytest.mark.parametrize("lanes", [1, 2, 8])
def test_a_number_is_exactly_that_many_lanes_whatever_the_answers(lanes: int) -> None:
    policy = LanePolicy(lanes)
    assert not policy.adaptive
    for t in range(50):
        assert policy.observe(1, busy=t % 2 == 0, now=float(t)) is False
        assert policy.lanes(1) == policy.lanes(2) == lanes
    assert policy.widest() == lanes


@pytest.mark.parametrize("setting", [0, -1, "two", "AUTO", 1.5])
def test_a_setting_the_config_would_refuse_is_refused_here_too(setting: object) -> None:
    with pytest.raises(ValueError, match="lanes"):
        LanePolicy(setting)  # type: ignore[arg-type]


# ---------------------------------------------------------------- auto


def open_second_lane(policy: LanePolicy, node: int = 1, now: float = 0.0) -> None:
    for i in range(OPEN_AFTER_BUSY):
        changed = policy.observe(node, busy=True, now=now)
        assert changed is (i == OPEN_AFTER_BUSY - 1)
    assert policy.lanes(node) == 2


def test_auto_starts_every_broker_at_one_lane() -> None:
    policy = LanePolicy("auto")
    assert policy.adaptive
    assert policy.lanes(1) == policy.lanes(99) == 1
    assert policy.widest() == 1


def test_auto_opens_the_second_lane_after_busy_answers_in_a_row() -> None:
    policy = LanePolicy("auto")
    for _ in range(OPEN_AFTER_BUSY - 1):
        assert not policy.observe(1, busy=True, now=0.0)
    assert policy.lanes(1) == 1
    assert policy.observe(1, busy=True, now=0.0)
    assert policy.lanes(1) == 2
    assert policy.widest() == 2
    for _ in range(20):  # at most two
        assert not policy.observe(1, busy=True, now=0.0)
    assert policy.lanes(1) == 2


def test_a_calm_answer_between_busy_ones_starts_the_count_again() -> None:
    policy = LanePolicy("auto")
    for t in range(30):
        for _ in range(OPEN_AFTER_BUSY - 1):
            policy.observe(1, busy=True, now=float(t))
        policy.observe(1, busy=False, now=float(t))
    assert policy.lanes(1) == 1


def test_each_broker_is_judged_by_its_own_answers() -> None:
    policy = LanePolicy("auto")
    for _ in range(OPEN_AFTER_BUSY - 1):
        policy.observe(1, busy=True, now=0.0)
        policy.observe(2, busy=True, now=0.0)
    policy.observe(2, busy=False, now=0.0)
    policy.observe(1, busy=True, now=0.0)
    policy.observe(2, busy=True, now=0.0)
    assert (policy.lanes(1), policy.lanes(2)) == (2, 1)


def test_back_to_one_lane_after_calm_answers_in_a_row_and_some_seconds() -> None:
    policy = LanePolicy("auto")
    open_second_lane(policy, now=100.0)
    t = 100.0 + CLOSE_AFTER_SECONDS  # late enough: the count decides
    for _ in range(CLOSE_AFTER_CALM - 1):
        assert not policy.observe(1, busy=False, now=t)
    assert policy.lanes(1) == 2
    assert policy.observe(1, busy=False, now=t)
    assert policy.lanes(1) == 1
    assert policy.widest() == 1


def test_quick_calm_answers_alone_do_not_close_the_lane() -> None:
    # A trickle: many small answers within a second of the last busy one.
    policy = LanePolicy("auto")
    open_second_lane(policy, now=10.0)
    for i in range(CLOSE_AFTER_CALM * 5):
        assert not policy.observe(1, busy=False, now=10.0 + i * 0.001)
    assert policy.lanes(1) == 2
    # Time alone does not either: one more calm answer once the seconds are up does.
    assert policy.observe(1, busy=False, now=10.0 + CLOSE_AFTER_SECONDS)
    assert policy.lanes(1) == 1


def test_slow_calm_answers_must_still_be_many() -> None:
    policy = LanePolicy("auto")
    open_second_lane(policy, now=0.0)
    for i in range(CLOSE_AFTER_CALM - 1):
        assert not policy.observe(1, busy=False, now=60.0 + i)  # long past the seconds
    assert policy.lanes(1) == 2


def test_one_busy_lane_keeps_both_open() -> None:
    # Two lanes, one reading a backlog, the other's partitions idle: answers alternate.
    policy = LanePolicy("auto")
    open_second_lane(policy, now=0.0)
    for i in range(200):
        policy.observe(1, busy=i % 2 == 0, now=i * 0.1)
    assert policy.lanes(1) == 2


def test_no_flapping_on_alternating_bursts() -> None:
    policy = LanePolicy("auto")
    changes = 0
    t = 0.0
    for _ in range(50):  # 2 busy, 2 calm, over and over: never a stream of either
        for is_busy in (True, True, False, False):
            changes += policy.observe(1, busy=is_busy, now=t)
            t += 0.05
    assert changes == 0
    assert policy.lanes(1) == 1


def test_opened_again_after_closing() -> None:
    policy = LanePolicy("auto", close_after=2, close_after_seconds=1.0)
    open_second_lane(policy, now=0.0)
    policy.observe(1, busy=False, now=1.0)
    assert policy.observe(1, busy=False, now=1.5)
    assert policy.lanes(1) == 1
    open_second_lane(policy, now=2.0)


def test_a_failed_broker_starts_again_at_one_lane() -> None:
    policy = LanePolicy("auto")
    open_second_lane(policy, node=1)
    open_second_lane(policy, node=2)
    policy.forget(1)
    assert (policy.lanes(1), policy.lanes(2)) == (1, 2)
    assert policy.widest() == 2
    for _ in range(OPEN_AFTER_BUSY - 1):  # and needs a whole streak again
        policy.observe(1, busy=True, now=0.0)
    assert policy.lanes(1) == 1


def test_more_lanes_each_take_a_streak_of_their_own() -> None:
    policy = LanePolicy("auto", max_lanes=3)
    open_second_lane(policy)
    for _ in range(OPEN_AFTER_BUSY - 1):
        assert not policy.observe(1, busy=True, now=0.0)
    assert policy.observe(1, busy=True, now=0.0)
    assert policy.lanes(1) == 3
