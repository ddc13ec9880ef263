"""Kafka's Java VerifiableConsumer (aiokafka_lite.testing.java_clients) against Apache Kafka 4.3.1."""

from __future__ import annotations

import pytest

from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing._process import processes_in_group
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.java_clients import JavaClientError, VerifiableConsumer

TIMEOUT = 60.0


def _offsets(java: VerifiableConsumer, tp: TopicPartition) -> list[int]:
    """Every offset ``java`` consumed from ``tp``, in order (ranges are whole polls, without gaps here)."""
    ranges = java.consumed.get(tp, [])
    assert all(r.last - r.first + 1 == r.count for r in ranges), ranges
    return [offset for r in ranges for offset in range(r.first, r.last + 1)]


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
def test_verifiable_consumer_reads_every_record_once_and_commits(apache_kafka_broker, unique_topic, unique_group,
                                                                  group_protocol):
    bootstrap = apache_kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=3)
    produce(bootstrap, unique_topic, [{"value": f"v{i}", "partition": i % 3} for i in range(30)])
    tps = {TopicPartition(unique_topic, p) for p in range(3)}
    java = VerifiableConsumer(bootstrap, unique_topic, unique_group, group_protocol=group_protocol)
    with java:
        java.wait_for(lambda: java.committed == {tp: 10 for tp in tps}, timeout=TIMEOUT,
                      what="offset 10 committed on all 3 partitions")
        assert java.assignment == tps
        assert java.consumed_count() == 30
        for tp in tps:
            assert _offsets(java, tp) == list(range(10))
        assert java.failed_commits == []
        pid = java.pid
        assert pid is not None
        assert processes_in_group(pid)
        assert java.stop() is True  # shutdown_complete printed: the consumer was closed cleanly
    assert not java.running
    assert processes_in_group(pid) == []
    names = [e["name"] for e in java.events]
    assert names[0] == "startup_complete"
    assert names[-1] == "shutdown_complete"


def test_two_consumer_protocol_members_split_partitions_and_read_each_record_once(
        apache_kafka_broker, unique_topic, unique_group):
    bootstrap = apache_kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=4)
    tps = frozenset(TopicPartition(unique_topic, p) for p in range(4))
    # Half the records before the second member joins, so partitions change hands mid-stream.
    produce(bootstrap, unique_topic, [{"value": f"a{i}", "partition": i % 4} for i in range(20)])
    with VerifiableConsumer(bootstrap, unique_topic, unique_group, group_protocol="consumer") as first:
        first.wait_for(lambda: first.consumed_count() == 20, timeout=TIMEOUT, what="first 20 records")
        assert first.assignment == tps
        with VerifiableConsumer(bootstrap, unique_topic, unique_group, group_protocol="consumer") as second:
            second.wait_for(lambda: len(second.assignment) == 2 and len(first.assignment) == 2,
                            timeout=TIMEOUT, what="the 4 partitions split 2 and 2")
            assert first.assignment | second.assignment == tps
            assert not first.assignment & second.assignment
            produce(bootstrap, unique_topic, [{"value": f"b{i}", "partition": i % 4} for i in range(20)])
            for java in (first, second):
                java.wait_for(lambda j=java: all(j.committed.get(tp) == 10 for tp in j.assignment),
                              timeout=TIMEOUT, what="offset 10 committed on its partitions")
            for tp in second.assignment:  # it took over after the first member's commits
                assert _offsets(second, tp) == list(range(5, 10))
            for tp in tps:
                assert sorted(_offsets(first, tp) + _offsets(second, tp)) == list(range(10)), tp
            assert first.consumed_count() + second.consumed_count() == 40
            assert second.stop() is True
        assert first.stop() is True


def test_a_failure_inside_the_block_kills_the_jvm(apache_kafka_broker, unique_topic, unique_group):
    create_topic(apache_kafka_broker.bootstrap_servers, unique_topic)
    java = VerifiableConsumer(apache_kafka_broker.bootstrap_servers, unique_topic, unique_group)
    pids: list[int | None] = []

    def fail_inside() -> None:
        with java:
            pids.append(java.pid)
            java.wait_for(lambda: False, timeout=0.5, what="never happens")

    with pytest.raises(JavaClientError, match=r"never happens not reached in 0\.5 s"):
        fail_inside()
    [pid] = pids
    assert pid is not None
    assert processes_in_group(pid) == []
    assert not java.running


def test_a_jvm_that_exits_early_fails_start_with_its_log(apache_kafka_broker, unique_topic, unique_group):
    java = VerifiableConsumer(apache_kafka_broker.bootstrap_servers, unique_topic, unique_group,
                              reset_policy="sometimes")
    with pytest.raises(JavaClientError, match=r"exited before startup_complete(.|\n)*auto.offset.reset"):
        java.start()
    assert not java.running
