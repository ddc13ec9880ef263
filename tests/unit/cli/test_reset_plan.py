"""`groups reset-offsets` planning without a broker: each mode, clamping to [log start, log end],
shifting, the time's fallback to the log end, and the parsing of --topic and --to-datetime."""

from __future__ import annotations

import pytest

from aiokafka_lite.cli.reset_plan import PlanRow, ResetMode, parse_datetime, parse_topic, plan_reset
from aiokafka_lite.structs import TopicPartition

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))
PARTITIONS = [T2, T0, T1]  # any order in, sorted out
COMMITTED = {T0: 5, T1: 10}  # nothing committed on partition 2
STARTS = {T0: 2, T1: 0, T2: 4}  # partition 0 and 2 had records deleted
ENDS = {T0: 10, T1: 12, T2: 4}  # partition 2 is empty: start == end


def plan(mode: ResetMode, partitions: list[TopicPartition] = PARTITIONS,
         **kw: object) -> list[tuple[int | None, int, bool]]:
    rows = plan_reset(mode, partitions, COMMITTED, STARTS, ENDS, **kw)  # type: ignore[arg-type]
    assert [(r.topic, r.partition) for r in rows] == sorted((tp.topic, tp.partition) for tp in partitions)
    return [(r.current, r.new, r.clamped) for r in rows]


def test_earliest_and_latest_are_the_log_start_and_end():
    assert plan(ResetMode("to-earliest")) == [(5, 2, False), (10, 0, False), (None, 4, False)]
    assert plan(ResetMode("to-latest")) == [(5, 10, False), (10, 12, False), (None, 4, False)]


@pytest.mark.parametrize(("offset", "expected"), [
    (7, [(5, 7, False), (10, 7, False), (None, 4, True)]),
    (100, [(5, 10, True), (10, 12, True), (None, 4, True)]),  # above the end: the end
    (-5, [(5, 2, True), (10, 0, True), (None, 4, True)]),  # below the start: the start
    (2, [(5, 2, False), (10, 2, False), (None, 4, True)]),  # the bounds themselves are not clamped
])
def test_to_offset_is_clamped_to_the_log(offset, expected):
    assert plan(ResetMode("to-offset", offset)) == expected


def test_shift_by_moves_the_committed_offset_within_the_log():
    assert plan(ResetMode("shift-by", -4), [T0, T1]) == [(5, 2, True), (10, 6, False)]
    assert plan(ResetMode("shift-by", 2), [T0, T1]) == [(5, 7, False), (10, 12, False)]
    assert plan(ResetMode("shift-by", 3), [T0, T1]) == [(5, 8, False), (10, 12, True)]


def test_shift_by_refuses_a_partition_without_a_committed_offset():
    with pytest.raises(ValueError, match=r"^cannot shift t-2: the group has no committed offset for it$"):
        plan_reset(ResetMode("shift-by", 1), PARTITIONS, COMMITTED, STARTS, ENDS)


def test_to_datetime_takes_the_offset_for_the_time_or_else_the_log_end():
    by_time = {T0: 6, T1: None, T2: None}  # no record on 1 or 2 that recent
    assert plan(ResetMode("to-datetime", 1_000), by_time=by_time) == [(5, 6, False), (10, 12, False), (None, 4, False)]


def test_rows_carry_the_topic_and_partition():
    assert plan_reset(ResetMode("to-latest"), [T1], COMMITTED, STARTS, ENDS) == [PlanRow("t", 1, 10, 12)]


@pytest.mark.parametrize(("text", "millis"), [
    ("1970-01-01T00:00:01", 1000),  # no zone: UTC, as Kafka's tool reads it
    ("2026-11-27T09:30:00.123", 1795771800123),  # Kafka's own form, yyyy-MM-dd'T'HH:mm:ss.SSS
    ("2026-11-27T09:30:00.123Z", 1795771800123),
    ("2026-11-27T10:30:00.123+01:00", 1795771800123),
    ("2026-11-27T10:30:00.123+0100", 1795771800123),
    ("2026-11-27T09:30:00.123999", 1795771800123),  # below a millisecond: cut, not rounded
])
def test_parse_datetime(text, millis):
    assert parse_datetime(text) == millis


@pytest.mark.parametrize("text", ["2026-11-27", "yesterday", "2026-13-01T00:00:00", "2026-11-27T25:00:00", "",
                                  "1969-12-31T23:59:59Z"])
def test_parse_datetime_refuses_what_is_not_an_iso_date_time_after_1970(text):
    with pytest.raises(ValueError, match=r"^--to-datetime ") as caught:
        parse_datetime(text)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("text", "parsed"), [
    ("orders", ("orders", None)),
    ("orders:0,2", ("orders", [0, 2])),
    ("orders:2, 0,2", ("orders", [0, 2])),
])
def test_parse_topic(text, parsed):
    assert parse_topic(text) == parsed


@pytest.mark.parametrize(("text", "says"), [
    (":0", "names no topic"),
    ("orders:", "'' is not a partition number"),
    ("orders:a", "'a' is not a partition number"),
    ("orders:-1", "'-1' is not a partition number"),
    ("orders:0:1", "'0:1' is not a partition number"),
])
def test_parse_topic_refuses_malformed_partitions(text, says):
    with pytest.raises(ValueError, match=says):
        parse_topic(text)
