"""The bookkeeping behind testing.java_share.VerifiableShareConsumer, fed the tool's JSON lines (no JVM)."""

from __future__ import annotations

import json

import pytest

from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing.java_share import ShareConsumerEvents, VerifiableShareConsumer

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _line(name: str, **fields: object) -> str:
    return json.dumps({"timestamp": 1, "name": name, **fields})


def _offsets(tp: TopicPartition, offsets: list[int]) -> dict[str, object]:
    return {"topic": tp.topic, "partition": tp.partition, "count": len(offsets), "offsets": offsets}


def test_consumed_and_acknowledged_offsets_are_kept_per_partition():
    state = ShareConsumerEvents()
    for line in (_line("startup_complete"),
                 _line("records_consumed", count=3, partitions=[_offsets(T0, [0, 1]), _offsets(T1, [5])]),
                 _line("offsets_acknowledged", count=3, success=True,
                       partitions=[_offsets(T0, [0, 1]), _offsets(T1, [5])]),
                 _line("records_consumed", count=1, partitions=[_offsets(T0, [1])]),  # redelivered
                 _line("offsets_acknowledged", count=1, success=False, error="lock lapsed",
                       partitions=[_offsets(T0, [1])])):
        state.feed_line(line)
    assert state.consumed == {T0: [0, 1, 1], T1: [5]}
    assert state.acknowledged == {T0: [0, 1], T1: [5]}
    assert [e["error"] for e in state.failed_acknowledgements] == ["lock lapsed"]
    assert state.seen("startup_complete")
    assert not state.seen("shutdown_complete")


def test_lines_that_are_not_events_are_kept_apart():
    state = ShareConsumerEvents()
    state.feed_line("SLF4J: no binding")
    state.feed_line('{"no": "name"}')
    assert state.events == []
    assert state.stray_output == ["SLF4J: no binding", '{"no": "name"}']


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"acknowledgement_mode": "explicit"}, "acknowledgement_mode must be one of"),
    ({"offset_reset_strategy": "none"}, "offset_reset_strategy must be"),
    ({"kafka_version": "3.9.1"}, "share groups need Kafka 4.0"),
])
def test_bad_settings_are_refused_before_any_jvm(kwargs: dict[str, str], match: str):
    with pytest.raises(ValueError, match=match):
        VerifiableShareConsumer("127.0.0.1:1", "t", "g", **kwargs)


def test_a_wrapper_never_started_has_nothing_to_stop():
    java = VerifiableShareConsumer("127.0.0.1:1", "t", "g", acknowledgement_mode="sync")
    assert (java.acknowledged_count(), java.consumed_count(T1), java.accepted()) == (0, 0, {})
    assert not java.running
    assert java.stop() is False  # no shutdown_complete
