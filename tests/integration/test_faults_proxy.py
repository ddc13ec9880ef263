"""Network faults between the consumer and a real Apache Kafka 4.3.1 broker, through our own TCP
proxy (``tests/tcp_proxy.py``): connections reset mid-request, half-open connections (silence,
no FIN or RST: only the request timeout can notice), garbage injected into the stream, and a
restart of the broker process. A group of two processes every record with commits throughout.

The broker is dedicated to this module (it is restarted): its ``PROXIED`` listener advertises the
proxy's port, so every connection the consumers open, bootstrap or not, goes through the proxy.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from aiokafka_lite import Consumer
from aiokafka_lite.testing._process import BrokerUnavailable, free_port
from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker
from aiokafka_lite.testing.helpers import create_topic, produce

from ..tcp_proxy import TcpProxy
from ._faults import FaultRun, consume_through_fault

pytestmark = pytest.mark.asyncio

PARTITIONS = 4
RECORDS = 2000
REQUEST_TIMEOUT_MS = 3000


class ProxiedKafka:
    def __init__(self, broker: ApacheKafkaBroker, proxy_port: int) -> None:
        self.broker = broker
        self.proxy_port = proxy_port


@pytest.fixture(scope="module")
def proxied_kafka() -> Iterator[ProxiedKafka]:
    proxy_port = free_port()
    broker = ApacheKafkaBroker(extra_listeners={"PROXIED": "PLAINTEXT"},
                               advertised_ports={"PROXIED": proxy_port})
    try:
        broker.start()
    except BrokerUnavailable as exc:
        pytest.skip(f"Apache Kafka unavailable: {exc}")
    try:
        yield ProxiedKafka(broker, proxy_port)
    finally:
        broker.stop()


@pytest_asyncio.fixture
async def proxy(proxied_kafka: ProxiedKafka) -> AsyncIterator[TcpProxy]:
    upstream = proxied_kafka.broker.listener_port("PROXIED")
    async with TcpProxy("127.0.0.1", upstream, port=proxied_kafka.proxy_port) as running:
        yield running


def prepare(kafka: ProxiedKafka, topic: str) -> dict[int, int]:
    create_topic(kafka.broker.bootstrap_servers, topic, partitions=PARTITIONS)
    produce(kafka.broker.bootstrap_servers, topic,
            [{"value": f"v{i}", "partition": i % PARTITIONS} for i in range(RECORDS)])
    return dict.fromkeys(range(PARTITIONS), RECORDS // PARTITIONS)


def group_of(proxy: TcpProxy, topic: str, group: str, **extra: Any) -> list[Consumer]:
    settings: dict[str, Any] = dict(
        bootstrap_servers=proxy.address, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=500,
        request_timeout_ms=REQUEST_TIMEOUT_MS, fetch_max_wait_ms=500, retry_backoff_ms=50,
        reconnect_backoff_max_ms=500, default_api_timeout_ms=10000, max_poll_records=50)
    settings.update(extra)
    return [Consumer(topic, **settings) for _ in range(2)]


def check(run: FaultRun, proxy: TcpProxy) -> None:
    assert run.lost == 0, run.summary()
    print(f"\n{run.summary()}; proxy faults {dict(proxy.faults)}, connections {proxy.connections}")


async def test_connections_reset_mid_request(proxied_kafka: ProxiedKafka, proxy: TcpProxy,
                                             unique_topic: str, unique_group: str) -> None:
    ends = prepare(proxied_kafka, unique_topic)

    async def fault() -> None:
        for _ in range(3):
            proxy.reset_next_request()
            await asyncio.sleep(1.0)
        proxy.reset_all()

    run = await consume_through_fault(group_of(proxy, unique_topic, unique_group), unique_topic, ends,
                                      fault, inject_after=RECORDS // 4)
    check(run, proxy)
    assert proxy.faults["reset_mid_request"] == 3
    assert proxy.faults["reset"] == 1


async def test_half_open_connections_are_detected_and_replaced(proxied_kafka: ProxiedKafka, proxy: TcpProxy,
                                                               unique_topic: str, unique_group: str) -> None:
    ends = prepare(proxied_kafka, unique_topic)
    before = 0

    async def fault() -> None:
        nonlocal before
        before = proxy.connections
        proxy.half_open()  # every open connection goes silent; new ones work

    run = await consume_through_fault(group_of(proxy, unique_topic, unique_group), unique_topic, ends,
                                      fault, inject_after=RECORDS // 4, timeout=90)
    check(run, proxy)
    assert proxy.connections > before, "the consumers never opened a fresh connection"


async def test_garbage_in_the_stream_once(proxied_kafka: ProxiedKafka, proxy: TcpProxy,
                                          unique_topic: str, unique_group: str) -> None:
    ends = prepare(proxied_kafka, unique_topic)

    async def fault() -> None:
        proxy.inject_garbage(b"\x00\x00\x00\x0c\xde\xad\xbe\xefgarbage!")
        await asyncio.sleep(1.0)
        proxy.inject_garbage(b"\x7f\xff\xff\xff junk")

    run = await consume_through_fault(group_of(proxy, unique_topic, unique_group), unique_topic, ends,
                                      fault, inject_after=RECORDS // 4)
    check(run, proxy)
    assert proxy.faults["garbage"] == 2


async def test_broker_process_restart(proxied_kafka: ProxiedKafka, proxy: TcpProxy,
                                      unique_topic: str, unique_group: str) -> None:
    ends = prepare(proxied_kafka, unique_topic)

    async def fault() -> None:
        await asyncio.to_thread(proxied_kafka.broker.restart)

    run = await consume_through_fault(group_of(proxy, unique_topic, unique_group), unique_topic, ends,
                                      fault, inject_after=RECORDS // 4, timeout=150)
    check(run, proxy)
