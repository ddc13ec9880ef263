"""The rebalance tests' reference producer (tests/integration/_steady.py) delivers what it queued,
also when its path to the cluster runs on the test's own event loop.

Stop 47's CI failed the rebootstrap test with 2384 records "sent but never read": the consumers had
read every record in the log (each offset committed once, committed offsets at the end offsets), but
the producer had not delivered those records. It bootstraps through the test's TcpProxy, and its
flush() ran on the event loop that runs the proxy: while flush() waited, the proxy could not answer,
so a producer that had not yet found the replaced brokers never did (librdkafka's debug log of a
replay: five MetadataRequests sent through the proxy at once, answered only when flush() gave up 60 s
later). Its exit now flushes in a thread, and says so when a record stays undelivered.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokafka_lite.testing._process import LOCALHOST, free_port
from aiokafka_lite.testing.helpers import create_topic

from ..tcp_proxy import TcpProxy
from ._steady import SteadyProducer

pytestmark = pytest.mark.asyncio


async def test_the_producer_delivers_through_a_proxy_that_runs_on_the_tests_own_loop(
        apache_kafka_broker: Any, unique_topic: str) -> None:
    create_topic(apache_kafka_broker, unique_topic, partitions=1)
    _, _, broker_port = apache_kafka_broker.bootstrap_servers.rpartition(":")
    # Not started yet: the bootstrap address refuses, so records queue in the producer, which
    # reaches the cluster only through the proxy once it starts, right before the block ends.
    proxy = TcpProxy(LOCALHOST, int(broker_port), port=free_port())
    try:
        async with SteadyProducer(proxy.address, unique_topic, 1, per_second=100, flush_timeout=20) as producer:
            await asyncio.sleep(1.0)
            await proxy.start()
    finally:
        await proxy.stop()
    assert producer.sent > 50
    assert producer.delivered == producer.sent
