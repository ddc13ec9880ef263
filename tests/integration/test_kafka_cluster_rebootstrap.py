"""Rebootstrap (KIP-899, KIP-1102) on a three-broker Apache Kafka cluster: every broker replaced by
a new process on a new port (same node ids, cluster id and data) while a group consumes.

The consumers bootstrap through a stable address, a TCP proxy standing in for the DNS name or
service of a real deployment: it refuses connections while the brokers are swapped, then forwards
to a new broker. The brokers
advertise their own ports, so the consumers talk to them directly once bootstrapped, and only a
rebootstrap can lead them to the new ones.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.testing._process import LOCALHOST
from aiokafka_lite.testing.kafka_cluster import KafkaCluster

from ..tcp_proxy import TcpProxy
from ._consumers import until
from ._steady import SteadyProducer
from .test_kafka_cluster import PARTITIONS, Group

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]
# Every broker is down while the replacement runs (tens of seconds): a longer session than the
# model test's keeps the members in the group, so the replacement alone is what is measured.
SESSION_TIMEOUT_MS = 60000


class StrandedReader:
    """A consumer with metadata_recovery_strategy="none", reading every partition by hand: it
    must not find the new brokers, and its poll() must keep returning on time meanwhile."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer(bootstrap_servers=bootstrap, metadata_recovery_strategy="none",
                                 auto_offset_reset="earliest", request_timeout_ms=10000, fetch_max_wait_ms=200)
        self.consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        self.records = 0
        self.since_mark = 0  # records read since mark()
        self.longest_poll = 0.0  # seconds, since mark()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> StrandedReader:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self.consumer.close()

    def mark(self) -> None:
        self.since_mark, self.longest_poll = 0, 0.0

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            began = loop.time()
            batch = await self.consumer.poll(timeout=0.5)
            self.longest_poll = max(self.longest_poll, loop.time() - began)
            self.records += len(batch)
            self.since_mark += len(batch)


async def test_every_broker_replaced_on_new_ports_the_group_rebootstraps_and_goes_on(
        kafka_cluster: KafkaCluster, unique_topic: str, unique_group: str,
        caplog: pytest.LogCaptureFixture) -> None:
    cluster = kafka_cluster
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    cluster.create_topic(unique_topic, partitions=PARTITIONS)
    loop = asyncio.get_running_loop()
    async with TcpProxy(LOCALHOST, cluster.broker(1).port) as bootstrap:
        group = Group(cluster, unique_topic, unique_group, bootstrap_servers=bootstrap.address,
                      session_timeout_ms=SESSION_TIMEOUT_MS)
        try:
            async with StrandedReader(bootstrap.address, unique_topic) as stranded:
                async with SteadyProducer(bootstrap.address, unique_topic, PARTITIONS, per_second=200) as producer:
                    assignments = await group.start()
                    await until(lambda: stranded.records > 0, 30, "the stranded reader reading")
                    caplog.clear()
                    began = loop.time()
                    # The name resolves to nothing while the machines are swapped (connections
                    # refused, as a Kubernetes service without endpoints), then to a new broker.
                    await bootstrap.stop()
                    old = await asyncio.to_thread(cluster.replace_brokers)
                    bootstrap.upstream = (LOCALHOST, cluster.broker(1).port)
                    await bootstrap.start()
                    replaced_at = loop.time()
                    stranded.mark()
                    resumed = await group.resumed_after(replaced_at, 90)
                    moved = {n: (old[n], cluster.broker(n).bootstrap_servers) for n in old}
                assert all(was != now for was, now in moved.values()), moved
                assert resumed < 20.0, f"consumption resumed {resumed:.1f} s after the bootstrap address came back"
                await group.drained(producer.sent)
                # The group found the new brokers long ago; the reader that may not rebootstrap has not.
                assert stranded.since_mark == 0, f"{stranded.since_mark} records read without a rebootstrap"
                assert stranded.longest_poll < 2.0, f"poll(timeout=0.5) took {stranded.longest_poll:.1f} s"
                assert stranded.consumer.metrics()["rebootstraps"] == 0
            rebootstraps = [m.consumer.metrics()["rebootstraps"] for m in group.members]
        finally:
            await group.close()
    replacing = [r for r in caplog.records if r.name.startswith("aiokafka_lite")]
    loud = [f"{r.levelname} {r.name}: {r.getMessage()}" for r in replacing if r.levelno >= logging.WARNING]
    assert not loud, loud[:5]
    said = [r.getMessage() for r in replacing if "rebootstrapping from" in r.getMessage()]
    assert said, "no rebootstrap was logged"
    assert all(n >= 1 for n in rebootstraps), rebootstraps
    assert len(said) == sum(rebootstraps), said  # one INFO line per rebootstrap
    logging.getLogger(__name__).info(
        "replacement %.1f s, consumption resumed %.1f s after it; %d records; rebootstraps %s; "
        "assignments %s -> %s; moved %s", replaced_at - began, resumed, producer.sent, rebootstraps,
        assignments, group.assignments(), moved)
