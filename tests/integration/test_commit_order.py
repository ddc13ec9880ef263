"""Commits land in the order they were made (issue #11, item 3), and a consumer that assigns its
partitions by hand commits as a standalone consumer (item 4). Java's commitSync contract: commits
made earlier, sync or async, complete (callbacks invoked) before commit() returns, and an older
commit never overwrites a newer one. On Apache Kafka, and on librdkafka's mock with retriable
OffsetCommit errors injected."""

from __future__ import annotations

import asyncio
import random

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.errors import CommitFailedError
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.mock_cluster import ApiKey, MockCluster

from ._consumers import poll_until
from ._protocols import GroupProtocol

pytestmark = pytest.mark.asyncio

CLASSIC = GroupProtocol("classic")  # librdkafka's mock cluster has no KIP-848
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, REQUEST_TIMED_OUT = 14, 16, 7


def settings(bootstrap: str, group: str, protocol: GroupProtocol = CLASSIC, **extra):
    base = dict(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500,
                retry_backoff_ms=20, request_timeout_ms=5000)
    return protocol.settings(base, **extra)


class CallbackLog:
    def __init__(self) -> None:
        self.done: list[int] = []
        self.errors: list[BaseException] = []

    def callback_for(self, offset: int):
        def done(offsets, error):
            if error is not None:
                self.errors.append(error)
            self.done.append(offset)
        return done


async def _joined(consumer: Consumer, topic: str) -> TopicPartition:
    tp = TopicPartition(topic, 0)
    await poll_until(consumer, lambda _: consumer.assignment() == {tp}, timeout=30)
    return tp


async def test_commit_waits_for_earlier_async_commits(apache_kafka_broker, unique_topic, unique_group,
                                                      group_protocol):
    """The issue's case: five commit_async(400..404), then commit(500): 500 is what stays."""
    create_topic(apache_kafka_broker, unique_topic, partitions=1)
    bootstrap = apache_kafka_broker.bootstrap_servers
    async with Consumer(unique_topic, **settings(bootstrap, unique_group, group_protocol)) as c:
        tp = await _joined(c, unique_topic)
        log = CallbackLog()
        futures = [c.commit_async({tp: offset}, callback=log.callback_for(offset)) for offset in range(400, 405)]
        await c.commit({tp: 500})
        assert all(f.done() for f in futures)
        assert log.done == [400, 401, 402, 403, 404]  # every earlier callback ran, in order
        assert log.errors == []
        assert (await c.committed([tp]))[tp].offset == 500


async def test_many_interleaved_commits_end_at_the_newest(
        apache_kafka_broker, unique_topic, unique_group, group_protocol):
    create_topic(apache_kafka_broker, unique_topic, partitions=1)
    bootstrap = apache_kafka_broker.bootstrap_servers
    rng = random.Random(11)
    async with Consumer(unique_topic, **settings(bootstrap, unique_group, group_protocol)) as c:
        tp = await _joined(c, unique_topic)
        log = CallbackLog()
        made: list[int] = []
        asyncs: list[int] = []
        for offset in range(1000, 1200):
            made.append(offset)
            if rng.random() < 0.15:
                await c.commit({tp: offset})
                assert log.done == asyncs  # every earlier async commit completed, in order
            else:
                c.commit_async({tp: offset}, callback=log.callback_for(offset))
                asyncs.append(offset)
        await c.commit({tp: 1200})
        assert log.errors == []
        assert log.done == asyncs
        assert (await c.committed([tp]))[tp].offset == 1200


async def test_commits_keep_their_order_through_retried_requests(mock_cluster: MockCluster, unique_topic,
                                                                  unique_group):
    """OffsetCommit answers retriable errors (the coordinator moves, loads, times out): each commit
    is retried before any later one is sent, so the newest still wins."""
    mock_cluster.create_topic(unique_topic, partitions=1)
    async with Consumer(unique_topic, **settings(mock_cluster.bootstrap_servers, unique_group)) as c:
        tp = await _joined(c, unique_topic)
        mock_cluster.push_request_errors(ApiKey.OFFSET_COMMIT, [
            COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, REQUEST_TIMED_OUT, 0, NOT_COORDINATOR,
            COORDINATOR_LOAD_IN_PROGRESS, 0, REQUEST_TIMED_OUT])
        log = CallbackLog()
        for offset in range(10, 30):
            c.commit_async({tp: offset}, callback=log.callback_for(offset))
        await c.commit({tp: 30})
        assert log.done == list(range(10, 30))
        assert log.errors == []
        assert (await c.committed([tp]))[tp].offset == 30


async def test_close_lands_pending_commits_in_order(apache_kafka_broker, unique_topic, unique_group,
                                                    group_protocol):
    create_topic(apache_kafka_broker, unique_topic, partitions=1)
    bootstrap = apache_kafka_broker.bootstrap_servers
    c = Consumer(unique_topic, **settings(bootstrap, unique_group, group_protocol))
    tp = await _joined(c, unique_topic)
    log = CallbackLog()
    for offset in range(70, 80):
        c.commit_async({tp: offset}, callback=log.callback_for(offset))
    await c.close(timeout=10)
    assert log.done == list(range(70, 80))
    assert log.errors == []
    async with Consumer(**settings(bootstrap, unique_group, group_protocol)) as reader:
        assert (await reader.committed([tp]))[tp].offset == 79


# ---------------------------------------------------------------- item 4: assign() + group_id


async def test_manual_assignment_commits_as_a_standalone_consumer(apache_kafka_broker, unique_topic,
                                                                   unique_group, group_protocol):
    create_topic(apache_kafka_broker, unique_topic, partitions=1)
    bootstrap = apache_kafka_broker.bootstrap_servers
    produce(apache_kafka_broker, unique_topic, [(None, f"v{i}") for i in range(5)])
    tp = TopicPartition(unique_topic, 0)
    async with Consumer(**settings(bootstrap, unique_group, group_protocol)) as c:
        c.assign([tp])
        got = await poll_until(c, lambda g: len(g) >= 5, timeout=30)
        assert len(got) == 5
        await c.commit()  # what was handed out
        assert (await c.committed([tp]))[tp].offset == 5
        await c.commit({tp: 3})
        assert (await c.committed([tp]))[tp].offset == 3
        metrics = c.metrics()
        assert metrics["group_state"] == group_protocol.idle_state  # never joined: no watchdog, no heartbeats
        assert "poll_interval_lapses" not in metrics or metrics["poll_interval_lapses"] == 0
    # A new consumer of the group starts where the standalone one committed.
    async with Consumer(**settings(bootstrap, unique_group, group_protocol)) as again:
        again.assign([tp])
        got = await poll_until(again, lambda g: len(g) >= 2, timeout=30)
        assert [r.offset for r in got] == [3, 4]


async def test_manual_assignment_auto_commits_and_commits_on_close(apache_kafka_broker, unique_topic,
                                                                    unique_group, group_protocol):
    create_topic(apache_kafka_broker, unique_topic, partitions=1)
    bootstrap = apache_kafka_broker.bootstrap_servers
    produce(apache_kafka_broker, unique_topic, [(None, f"v{i}") for i in range(4)])
    tp = TopicPartition(unique_topic, 0)
    c = Consumer(**settings(bootstrap, unique_group, group_protocol,
                            enable_auto_commit=True,
                            auto_commit_interval_ms=100000))
    c.assign([tp])
    await poll_until(c, lambda g: len(g) >= 4, timeout=30)
    await c.close(timeout=10)
    async with Consumer(**settings(bootstrap, unique_group, group_protocol)) as reader:
        assert (await reader.committed([tp]))[tp].offset == 4


async def test_standalone_commit_to_a_group_with_members_is_a_clear_error(apache_kafka_broker, unique_topic,
                                                                           unique_group, group_protocol):
    create_topic(apache_kafka_broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    bootstrap = apache_kafka_broker.bootstrap_servers
    async with Consumer(unique_topic, **settings(bootstrap, unique_group, group_protocol)) as member:
        await _joined(member, unique_topic)
        async with Consumer(**settings(bootstrap, unique_group, group_protocol)) as outsider:
            outsider.assign([tp])
            with pytest.raises(CommitFailedError, match="has active members"):
                await asyncio.wait_for(outsider.commit({tp: 1}), 10)
