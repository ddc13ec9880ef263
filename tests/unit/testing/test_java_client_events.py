"""The bookkeeping behind testing.java_clients.VerifiableConsumer, fed the tool's JSON lines (no JVM)."""

from __future__ import annotations

import json

import pytest

from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing.java_clients import ConsumedRange, ConsumerEvents, VerifiableConsumer

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


def _line(name: str, **fields: object) -> str:
    return json.dumps({"timestamp": 1, "name": name, **fields})


def _parts(*tps: TopicPartition) -> list[dict[str, object]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in tps]


def test_eager_rebalance_revokes_all_then_assigns_all():
    state = ConsumerEvents()
    for line in (_line("startup_complete"), _line("partitions_assigned", partitions=_parts(T0, T1, T2)),
                 _line("partitions_revoked", partitions=_parts(T0, T1, T2)),
                 _line("partitions_assigned", partitions=_parts(T1))):
        state.feed_line(line)
    assert state.assignment == {T1}
    assert state.seen("startup_complete")
    assert not state.seen("shutdown_complete")


def test_incremental_rebalance_adds_and_removes_only_what_changed():
    state = ConsumerEvents()
    state.feed_line(_line("partitions_assigned", partitions=_parts(T0, T1)))
    state.feed_line(_line("partitions_revoked", partitions=_parts(T1)))
    state.feed_line(_line("partitions_assigned", partitions=_parts(T2)))
    assert state.assignment == {T0, T2}


def test_consumed_ranges_and_commits_are_kept_per_partition():
    state = ConsumerEvents()
    state.feed_line(_line("records_consumed", count=7, partitions=[
        {"topic": "t", "partition": 0, "count": 5, "minOffset": 0, "maxOffset": 4},
        {"topic": "t", "partition": 1, "count": 2, "minOffset": 10, "maxOffset": 11}]))
    state.feed_line(_line("records_consumed", count=1, partitions=[
        {"topic": "t", "partition": 0, "count": 1, "minOffset": 5, "maxOffset": 5}]))
    state.feed_line(_line("offsets_committed", success=True, offsets=[
        {"topic": "t", "partition": 0, "offset": 6}]))
    failed = _line("offsets_committed", success=False, error="fenced", offsets=[
        {"topic": "t", "partition": 1, "offset": 12}])
    state.feed_line(failed)
    assert state.consumed == {T0: [ConsumedRange(0, 4, 5), ConsumedRange(5, 5, 1)],
                              T1: [ConsumedRange(10, 11, 2)]}
    assert state.committed == {T0: 6}  # a failed commit moves nothing
    assert state.failed_commits == [json.loads(failed)]


def test_lines_that_are_not_events_are_kept_apart():
    state = ConsumerEvents()
    state.feed_line("Bad data can't be written as json: oops")
    state.feed_line("[1, 2]")
    assert state.events == []
    assert state.stray_output == ["Bad data can't be written as json: oops", "[1, 2]"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"group_protocol": "eager"}, "must be 'classic' or 'consumer'"),
    ({"group_protocol": "consumer", "session_timeout_ms": 10000}, "classic-protocol settings"),
    ({"group_protocol": "consumer", "assignment_strategy": "range"}, "classic-protocol settings"),
    ({"group_remote_assignor": "uniform"}, "needs group_protocol='consumer'"),
])
def test_settings_of_the_other_protocol_are_refused_before_starting_java(kwargs, message):
    with pytest.raises(ValueError, match=message):
        VerifiableConsumer("127.0.0.1:1", "t", "g", **kwargs)
