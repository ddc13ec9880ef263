"""Fetch sessions (KIP-227) against Apache Kafka 4.3.1, which grants them: fetches after the first
name only the partitions that moved, data for the others still arrives, and a lost session is
replaced without losing or repeating a record. (Tansu and librdkafka's mock grant no session: the
consumer sends them full fetches, which every other integration test covers.)"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from aiokafka_lite import Consumer, ConsumerRecord, TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import poll_until

pytestmark = pytest.mark.asyncio
PARTITIONS = 12


def _records(first: int, count: int, partition: int | None = None) -> list[dict[str, Any]]:
    return [{"value": f"v{i}", "partition": i % PARTITIONS if partition is None else partition}
            for i in range(first, first + count)]


def _exactly(records: list[ConsumerRecord], values: set[bytes]) -> None:
    got = [r.value for r in records]
    assert len(got) == len(set(got)), "a record came twice"
    assert set(got) == values


def _session(consumer: Consumer) -> dict[str, int]:
    (session,) = consumer.metrics()["fetch_sessions"].values()  # one broker
    assert isinstance(session, dict)
    return session


async def test_fetches_name_only_moved_partitions_and_new_data_still_arrives(
        apache_kafka_broker: Any, unique_topic: str) -> None:
    create_topic(apache_kafka_broker, unique_topic, partitions=PARTITIONS)
    produce(apache_kafka_broker, unique_topic, _records(0, 120))
    async with Consumer(bootstrap_servers=apache_kafka_broker.bootstrap_servers, auto_offset_reset="earliest",
                        fetch_max_wait_ms=100) as consumer:
        consumer.assign([TopicPartition(unique_topic, p) for p in range(PARTITIONS)])
        first = await poll_until(consumer, lambda got: len(got) >= 120)
        _exactly(first, {f"v{i}".encode() for i in range(120)})
        for _ in range(4):  # idle long polls: the session holds every partition
            assert len(await consumer.poll(timeout=0.3)) == 0
        idle = _session(consumer)
        assert idle["session_id"] != 0
        assert idle["partitions"] == PARTITIONS
        for _ in range(4):
            assert len(await consumer.poll(timeout=0.3)) == 0
        later = _session(consumer)
        assert later["incremental_fetches"] > idle["incremental_fetches"]
        assert later["partitions_sent"] == idle["partitions_sent"]  # idle fetches named no partition
        # Partition 7 is in the session but in no request: its new records come all the same.
        produce(apache_kafka_broker, unique_topic, _records(120, 5, partition=7))
        second = await poll_until(consumer, lambda got: len(got) >= 5)
        _exactly(second, {f"v{i}".encode() for i in range(120, 125)})
        assert [r.offset for r in second] == list(range(10, 15))
        assert _session(consumer)["session_id"] == idle["session_id"]
        assert _session(consumer)["full_fetches"] == 1


async def test_seek_and_pause_inside_a_session(apache_kafka_broker: Any, unique_topic: str) -> None:
    create_topic(apache_kafka_broker, unique_topic, partitions=PARTITIONS)
    produce(apache_kafka_broker, unique_topic, _records(0, 120))
    tp3, tp5 = TopicPartition(unique_topic, 3), TopicPartition(unique_topic, 5)
    async with Consumer(bootstrap_servers=apache_kafka_broker.bootstrap_servers, auto_offset_reset="earliest",
                        fetch_max_wait_ms=100) as consumer:
        consumer.assign([TopicPartition(unique_topic, p) for p in range(PARTITIONS)])
        await poll_until(consumer, lambda got: len(got) >= 120)
        assert _session(consumer)["session_id"] != 0
        consumer.seek(tp3, 4)  # back: the session's offset for tp3 moves down
        again = await poll_until(consumer, lambda got: len(got) >= 6)
        assert [(r.partition, r.offset) for r in again] == [(3, o) for o in range(4, 10)]
        consumer.pause(tp5)  # forgotten by the session while paused
        produce(apache_kafka_broker, unique_topic, _records(200, 3, partition=5) + _records(300, 3, partition=6))
        while_paused = await poll_until(consumer, lambda got: len(got) >= 3)
        assert {r.partition for r in while_paused} == {6}
        assert len(await consumer.poll(timeout=0.5)) == 0
        consumer.resume(tp5)
        resumed = await poll_until(consumer, lambda got: len(got) >= 3)
        assert [(r.partition, r.offset, r.value) for r in resumed] == [
            (5, 10 + i, f"v{200 + i}".encode()) for i in range(3)]
        assert _session(consumer)["full_fetches"] == 1


async def test_a_broker_restart_replaces_the_session_without_loss_or_repeats(
        unique_topic: str, caplog: pytest.LogCaptureFixture) -> None:
    from aiokafka_lite.testing import ApacheKafkaBroker

    caplog.set_level(logging.WARNING, logger="aiokafka_lite")
    with ApacheKafkaBroker() as broker:
        create_topic(broker, unique_topic, partitions=PARTITIONS)
        produce(broker, unique_topic, _records(0, 120))
        async with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                            fetch_max_wait_ms=100, request_timeout_ms=5000,
                            reconnect_backoff_max_ms=300) as consumer:
            consumer.assign([TopicPartition(unique_topic, p) for p in range(PARTITIONS)])
            got = await poll_until(consumer, lambda got: len(got) >= 120)
            before = _session(consumer)["session_id"]
            assert before != 0
            broker.restart()
            produce(broker, unique_topic, _records(120, 60))
            got += await poll_until(consumer, lambda got: len(got) >= 60)
            _exactly(got, {f"v{i}".encode() for i in range(180)})
            after = _session(consumer)
            assert after["session_id"] not in (0, before)
            assert after["full_fetches"] >= 2
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "fetch" in r.getMessage()]


async def test_two_connections_per_broker_each_fetch_their_half_in_a_session_of_their_own(
        apache_kafka_broker: Any, unique_topic: str) -> None:
    create_topic(apache_kafka_broker, unique_topic, partitions=PARTITIONS)
    produce(apache_kafka_broker, unique_topic, _records(0, 600))
    async with Consumer(bootstrap_servers=apache_kafka_broker.bootstrap_servers, auto_offset_reset="earliest",
                        fetch_max_wait_ms=100, max_partition_fetch_bytes=200,
                        fetch_connections_per_broker=2) as consumer:
        consumer.assign([TopicPartition(unique_topic, p) for p in range(PARTITIONS)])
        # 200 bytes per partition and fetch: many rounds on both connections.
        got = await poll_until(consumer, lambda got: len(got) >= 600)
        _exactly(got, {f"v{i}".encode() for i in range(600)})
        for p in range(PARTITIONS):
            assert [r.offset for r in got if r.partition == p] == list(range(50))
        lanes = _session(consumer)["connections"]
        assert set(lanes) == {0, 1}
        assert lanes[0]["session_id"] != lanes[1]["session_id"]
        assert all(lane["session_id"] != 0 and lane["partitions"] == PARTITIONS // 2 for lane in lanes.values())
        assert all(lane["incremental_fetches"] > 0 for lane in lanes.values())
        # New data for partitions on either connection still arrives, once.
        produce(apache_kafka_broker, unique_topic, _records(600, 12))
        more = await poll_until(consumer, lambda got: len(got) >= 12)
        _exactly(more, {f"v{i}".encode() for i in range(600, 612)})


# ---------------------------------------------------------------- fetch_connections_per_broker="auto"

BACKLOG_PARTITIONS = 6
BACKLOG_PER_PARTITION = 4000  # 6 x 4000 x 1 KB = 24 MB: about 4 full answers a partition at 1 lane
VALUE_PAD = b"x" * 990


def _lanes(consumer: Consumer) -> int:
    lanes = _session(consumer)["lanes"]
    assert isinstance(lanes, int)
    return lanes


async def _idle_until_one_lane(consumer: Consumer, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while _lanes(consumer) != 1:
        assert loop.time() < deadline, f"still {_lanes(consumer)} lanes after {timeout} s idle"
        assert len(await consumer.poll(timeout=0.2)) == 0


async def test_auto_opens_a_second_connection_for_a_backlog_and_closes_it_when_idle(
        apache_kafka_broker: Any, unique_topic: str) -> None:
    create_topic(apache_kafka_broker, unique_topic, partitions=BACKLOG_PARTITIONS)
    produce(apache_kafka_broker, unique_topic,
            ({"value": b"%08d" % i + VALUE_PAD, "partition": i % BACKLOG_PARTITIONS}
             for i in range(BACKLOG_PARTITIONS * BACKLOG_PER_PARTITION)),
            timeout=60.0, enable_idempotence=True)
    # Default settings: fetch_connections_per_broker="auto", 500 ms long polls (about 5 s of them
    # over two connections before the second one closes).
    async with Consumer(bootstrap_servers=apache_kafka_broker.bootstrap_servers,
                        auto_offset_reset="earliest") as consumer:
        assert consumer.config.fetch_connections_per_broker == "auto"
        consumer.assign([TopicPartition(unique_topic, p) for p in range(BACKLOG_PARTITIONS)])
        lanes_seen: set[int] = set()
        offsets: dict[int, list[int]] = {p: [] for p in range(BACKLOG_PARTITIONS)}
        values: dict[int, list[int]] = {p: [] for p in range(BACKLOG_PARTITIONS)}
        total = BACKLOG_PARTITIONS * BACKLOG_PER_PARTITION
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60.0
        got = 0
        while got < total:
            assert loop.time() < deadline, f"{got} of {total} records after 60 s"
            for record in await consumer.poll(timeout=0.5):
                offsets[record.partition].append(record.offset)
                values[record.partition].append(int(record.value[:8]))
                got += 1
            if consumer.metrics()["fetch_sessions"]:
                lanes_seen.add(_lanes(consumer))
        assert 2 in lanes_seen, f"the backlog never opened a second connection: {lanes_seen}"
        for p in range(BACKLOG_PARTITIONS):  # every record exactly once, in order
            assert offsets[p] == list(range(BACKLOG_PER_PARTITION))
            assert values[p] == list(range(p, total, BACKLOG_PARTITIONS))
        connections = _session(consumer)["connections"]
        assert set(connections) == {0, 1}
        assert all(c["session_id"] != 0 for c in connections.values())  # each its own session
        # Drained: answers wait out the long poll, and the broker goes back to one connection.
        await _idle_until_one_lane(consumer, timeout=30.0)
        # New records still arrive, once, on the one connection left.
        produce(apache_kafka_broker, unique_topic, [{"value": b"late", "partition": p}
                                                     for p in range(BACKLOG_PARTITIONS)])
        late = await poll_until(consumer, lambda got: len(got) >= BACKLOG_PARTITIONS, timeout=30.0)
        assert sorted((r.partition, r.offset) for r in late) == [
            (p, BACKLOG_PER_PARTITION) for p in range(BACKLOG_PARTITIONS)]
        assert _lanes(consumer) == 1


async def test_auto_keeps_an_idle_consumer_on_one_connection(apache_kafka_broker: Any, unique_topic: str) -> None:
    create_topic(apache_kafka_broker, unique_topic, partitions=BACKLOG_PARTITIONS)
    async with Consumer(bootstrap_servers=apache_kafka_broker.bootstrap_servers, auto_offset_reset="earliest",
                        fetch_max_wait_ms=100) as consumer:
        consumer.assign([TopicPartition(unique_topic, p) for p in range(BACKLOG_PARTITIONS)])
        loop = asyncio.get_running_loop()
        until = loop.time() + 3.0
        while loop.time() < until:  # about 30 long polls that run out
            assert len(await consumer.poll(timeout=0.2)) == 0
        session = _session(consumer)
        assert session["lanes"] == 1
        assert "connections" not in session  # no second connection was ever used
        assert session["session_id"] != 0
        assert session["incremental_fetches"] >= 5
