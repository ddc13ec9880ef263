"""The options of Spark's Kafka source added to the aiokafka_lite source: the timestamp options with
Spark's precedence (startingTimestamp over startingOffsetsByTimestamp over startingOffsets, the same
for the ending ones, which streaming queries refuse), the trigger options, and those that mean nothing
here. How they read against a broker, beside Spark's own source: tests/integration/test_spark.py."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark")  # aiokafka_lite.spark imports it

from aiokafka_lite.errors import ConfigError
from aiokafka_lite.spark.options import EARLIEST, parse_options
from aiokafka_lite.structs import TopicPartition

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def _parse(streaming: bool = False, **options: str) -> Any:
    return parse_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a", **options},
                         streaming=streaming)


def test_starting_timestamp_wins_over_the_other_starting_options() -> None:
    parsed = _parse(startingTimestamp="1700000000000", startingOffsetsByTimestamp='{"a": {"0": 5}}',
                    startingOffsets="earliest")
    assert (parsed.starting.option, parsed.starting.default, parsed.starting.by_timestamp) == (
        "startingTimestamp", 1700000000000, True)
    assert parsed.starting.on_no_match == "error"  # Spark's default strategy
    assert parsed.starting.for_partitions([A0, A1]) == {A0: 1700000000000, A1: 1700000000000}


def test_timestamps_per_partition_win_over_starting_offsets_and_must_name_every_partition() -> None:
    parsed = _parse(startingOffsetsByTimestamp='{"a": {"0": 10, "1": 20}}', startingOffsets="latest",
                    startingOffsetsByTimestampStrategy="LATEST")
    assert parsed.starting.per_partition == {A0: 10, A1: 20}
    assert parsed.starting.on_no_match == "latest"
    with pytest.raises(ConfigError, match="gives timestamps per partition but not for a-2"):
        parsed.starting.for_partitions([A0, A1, TopicPartition("a", 2)])


def test_ending_timestamps_end_at_the_latest_offset_where_no_record_matches() -> None:
    parsed = _parse(endingTimestamp="42", endingOffsetsByTimestamp='{"a": {"0": 7}}')
    assert (parsed.ending.option, parsed.ending.default, parsed.ending.on_no_match) == ("endingTimestamp", 42, "latest")
    assert _parse(endingOffsetsByTimestamp='{"a": {"0": 7}}').ending.per_partition == {A0: 7}
    assert _parse().starting.default == EARLIEST  # without them, the offsets options as before


@pytest.mark.parametrize("option", ["endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets"])
def test_a_streaming_query_refuses_an_ending_option(option: str) -> None:
    value = '{"a": {"0": 1}}' if option != "endingTimestamp" else "1"
    with pytest.raises(ConfigError, match=f"option {option} is for batch reads only"):
        _parse(streaming=True, **{option: value})


def test_a_streaming_query_may_start_at_a_timestamp() -> None:
    parsed = _parse(streaming=True, startingTimestamp="5")
    assert (parsed.starting.default, parsed.starting.by_timestamp) == (5, True)


@pytest.mark.parametrize(("options", "message"), [
    ({"startingTimestamp": "-5"}, "startingTimestamp must be a timestamp in ms since the epoch, got '-5'"),
    ({"endingTimestamp": "1.5"}, "endingTimestamp must be a timestamp in ms since the epoch, got '1.5'"),
    ({"startingOffsetsByTimestamp": '{"a": [0]}'}, "topic 'a' must map to {partition: number}"),
    ({"startingOffsetsByTimestamp": '{"a": {"x": 1}}'}, "partition 'x' -> 1 is not a partition number and a "
                                                         "timestamp"),
    ({"startingOffsetsByTimestamp": "soon"}, "startingOffsetsByTimestamp is not valid JSON"),
])
def test_bad_timestamps_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _parse(**options)
    assert message in str(caught.value)


def test_split_options_are_positive_integers() -> None:
    parsed = _parse(minPartitions="4", maxRecordsPerPartition="1000")
    assert (parsed.min_partitions, parsed.max_records_per_partition) == (4, 1000)
    with pytest.raises(ConfigError, match="maxRecordsPerPartition must be a positive integer, got 'many'"):
        _parse(maxRecordsPerPartition="many")


@pytest.mark.parametrize(("raw", "seconds"), [("15m", 900.0), ("30s", 30.0), ("500", 0.5), ("250ms", 0.25),
                                              ("2h", 7200.0), ("1d", 86400.0), ("3 min", 180.0)])
def test_max_trigger_delay_takes_sparks_time_strings(raw: str, seconds: float) -> None:
    parsed = _parse(streaming=True, minOffsetsPerTrigger="100", maxTriggerDelay=raw)
    assert (parsed.min_offsets_per_trigger, parsed.max_trigger_delay) == (100, seconds)


def test_max_trigger_delay_defaults_to_sparks_15_minutes() -> None:
    assert _parse(streaming=True).max_trigger_delay == 900.0


def test_options_without_meaning_here_are_accepted_as_spark_accepts_them() -> None:
    # No consumer group is used, and offset look-ups retry within kafka.default.api.timeout.ms.
    _parse(groupIdPrefix="etl", **{"fetchOffset.numRetries": "5", "fetchOffset.retryIntervalMs": "100"})
    with pytest.raises(ConfigError, match=r"fetchOffset\.retryIntervalMs must be a non-negative integer, got '1s'"):
        _parse(**{"fetchOffset.retryIntervalMs": "1s"})
