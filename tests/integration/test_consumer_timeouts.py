"""KIP-266 against librdkafka's mock cluster: with brokers down or an RTT of 10 s, every awaitable
method returns or raises KafkaTimeoutError within its timeout + 0.5 s, and poll() returns empty."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.errors import KafkaTimeoutError
from aiokafka_lite.testing.helpers import produce

from ._consumers import poll_until

pytestmark = pytest.mark.asyncio

TIMEOUT = 1.5
SLACK = 0.5


async def _joined_consumer(mock_cluster, topic, group):
    mock_cluster.create_topic(topic, partitions=2)
    produce(mock_cluster.bootstrap_servers, topic, [(None, b"x")] * 10)
    consumer = Consumer(topic, bootstrap_servers=mock_cluster.bootstrap_servers, group_id=group,
                        auto_offset_reset="earliest", enable_auto_commit=False,
                        session_timeout_ms=10000, heartbeat_interval_ms=1000, request_timeout_ms=5000)
    await consumer.start()
    await poll_until(consumer, lambda got: len(got) >= 10, timeout=60)
    return consumer


async def _assert_bounded(what, make_call):
    loop = asyncio.get_running_loop()
    start = loop.time()
    with contextlib.suppress(KafkaTimeoutError):
        await make_call()
    took = loop.time() - start
    assert took <= TIMEOUT + SLACK, f"{what} took {took:.2f} s"


def _calls(consumer, tp):
    return {
        "commit": lambda: consumer.commit({tp: 1}, timeout=TIMEOUT),
        "committed": lambda: consumer.committed([tp], timeout=TIMEOUT),
        "beginning_offsets": lambda: consumer.beginning_offsets([tp], timeout=TIMEOUT),
        "end_offsets": lambda: consumer.end_offsets([tp], timeout=TIMEOUT),
        "offsets_for_times": lambda: consumer.offsets_for_times({tp: 0}, timeout=TIMEOUT),
        "partitions_for": lambda: consumer.partitions_for(tp.topic, timeout=TIMEOUT),
        "list_topics": lambda: consumer.list_topics(timeout=TIMEOUT),
        "seek_to_end": lambda: consumer.seek_to_end(tp, timeout=TIMEOUT),
        "position": lambda: consumer.position(tp, timeout=TIMEOUT),
    }


@pytest.mark.parametrize("fault", ["brokers_down", "rtt_10s"])
async def test_every_call_is_bounded(mock_cluster, unique_topic, unique_group, fault):
    consumer = await _joined_consumer(mock_cluster, unique_topic, unique_group)
    tp = TopicPartition(unique_topic, 0)
    try:
        for broker_id in (1, 2, 3):
            if fault == "brokers_down":
                mock_cluster.broker_set_down(broker_id)
            else:
                mock_cluster.broker_set_rtt(broker_id, 10_000)
        loop = asyncio.get_running_loop()
        for _ in range(3):
            start = loop.time()
            assert len(await consumer.poll(timeout=TIMEOUT)) == 0
            assert loop.time() - start <= TIMEOUT + SLACK
        for name, call in _calls(consumer, tp).items():
            await _assert_bounded(name, call)
    finally:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await consumer.close(timeout=TIMEOUT)
        assert loop.time() - start <= TIMEOUT + SLACK


async def test_consumer_recovers_after_brokers_come_back(mock_cluster, unique_topic, unique_group):
    consumer = await _joined_consumer(mock_cluster, unique_topic, unique_group)
    async with consumer:
        for broker_id in (1, 2, 3):
            mock_cluster.broker_set_down(broker_id)
        assert len(await consumer.poll(timeout=1.0)) == 0
        for broker_id in (1, 2, 3):
            mock_cluster.broker_set_up(broker_id)
        produce(mock_cluster.bootstrap_servers, unique_topic, [(None, b"after")] * 5)
        records = await poll_until(consumer, lambda got: len(got) >= 5, timeout=60)
        assert {r.value for r in records} == {b"after"}
