"""KIP-1242, misrouted connections: an address the consumer knew is handed to a broker of another
cluster, and the consumer notices, rebootstraps and consumes on from there, with one WARNING.

Two one-node clusters A and B (their own cluster ids, both node 1) each advertise, on a PROXIED
listener, the port of one TCP proxy standing for the address (a DNS name or load balancer of a
real deployment): every connection the consumer opens, bootstrap or not, passes it. The consumer
reads A's records; then the proxy is switched to B and its connections cut, as when the address
moves to another machine. B has the same topic with its own, more, records.

On Kafka 4.4 the broker notices (ApiVersions v5 names cluster A and node 1: B answers
REBOOTSTRAP_REQUIRED); a 4.3 broker does not know v5, so the consumer's own check of the cluster id
in B's Metadata catches it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.testing._process import LOCALHOST, BrokerUnavailable, free_port
from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker, NodeRole, new_cluster_id
from aiokafka_lite.testing.helpers import create_topic, produce

from ..tcp_proxy import TcpProxy

pytestmark = pytest.mark.asyncio

ON_A, ON_B = 20, 30  # records; B has more, so the consumer reads on at A's end offset


@dataclass
class TwoClusters:
    a: ApacheKafkaBroker
    b: ApacheKafkaBroker
    proxy_port: int  # what both advertise

    def cluster_id(self, broker: ApacheKafkaBroker) -> str:
        assert broker.node.cluster_id is not None
        return broker.node.cluster_id


def _broker(version: str, proxy_port: int) -> ApacheKafkaBroker:
    return ApacheKafkaBroker(version, node=NodeRole(cluster_id=new_cluster_id()),
                             extra_listeners={"PROXIED": "PLAINTEXT"}, advertised_ports={"PROXIED": proxy_port})


@pytest.fixture(scope="module", params=["4.4.0", "4.3.1"])
def two_clusters(request: pytest.FixtureRequest) -> Iterator[TwoClusters]:
    proxy_port = free_port()
    clusters = TwoClusters(_broker(request.param, proxy_port), _broker(request.param, proxy_port), proxy_port)
    try:
        with ThreadPoolExecutor(2) as starting:
            for started in [starting.submit(broker.start) for broker in (clusters.a, clusters.b)]:
                started.result()
    except BrokerUnavailable as exc:
        clusters.a.stop()
        clusters.b.stop()
        pytest.skip(f"Apache Kafka {request.param} unavailable: {exc}")
    try:
        yield clusters
    finally:
        clusters.a.stop()
        clusters.b.stop()


async def _read(consumer: Consumer, count: int, seconds: float) -> list[bytes]:
    values: list[bytes] = []
    async with asyncio.timeout(seconds):
        while len(values) < count:
            values.extend(r.value for r in await consumer.poll(timeout=0.5))
    return values


async def test_an_address_handed_to_another_cluster_rebootstraps_and_consumes_on(
        two_clusters: TwoClusters, unique_topic: str, caplog: pytest.LogCaptureFixture) -> None:
    a, b = two_clusters.a, two_clusters.b
    for broker, prefix, count in ((a, "a", ON_A), (b, "b", ON_B)):
        create_topic(broker.bootstrap_servers, unique_topic)
        produce(broker.bootstrap_servers, unique_topic, [{"value": f"{prefix}-{i}"} for i in range(count)])
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    async with TcpProxy(LOCALHOST, a.listener_port("PROXIED"), port=two_clusters.proxy_port) as address:
        consumer = Consumer(bootstrap_servers=address.address, auto_offset_reset="earliest",
                            fetch_max_wait_ms=200, request_timeout_ms=5000, reconnect_backoff_max_ms=500)
        consumer.assign([TopicPartition(unique_topic, 0)])
        async with consumer:
            assert await _read(consumer, ON_A, 30) == [f"a-{i}".encode() for i in range(ON_A)]
            # The address moves to B's machine: connections to A end, new ones reach B.
            address.upstream = (LOCALHOST, b.listener_port("PROXIED"))
            address.reset_all()
            read_on = await _read(consumer, ON_B - ON_A, 60)
            rebootstraps = consumer.metrics()["rebootstraps"]
    assert read_on == [f"b-{i}".encode() for i in range(ON_A, ON_B)]
    assert rebootstraps >= 1
    ours = [r for r in caplog.records if r.name.startswith("aiokafka_lite")]
    loud = [r.getMessage() for r in ours if r.levelno >= logging.WARNING]
    assert len(loud) == 1, loud
    said = loud[0]
    for named in (f"{LOCALHOST}:{two_clusters.proxy_port}", two_clusters.cluster_id(a), two_clusters.cluster_id(b)):
        assert named in said, said
    # Who noticed: a 4.4 broker refusing ApiVersions v5 naming cluster A, else our own check.
    assert ("REBOOTSTRAP_REQUIRED" in said) == (a.version == "4.4.0"), said
    logging.getLogger(__name__).info("Kafka %s: %s; rebootstraps %d", a.version, said, rebootstraps)
