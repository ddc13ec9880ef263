"""Fetch sessions the consumer is done with leave the broker's session cache (KIP-227: a last Fetch
with the session's id and epoch -1): the one of a second connection ("lane") that
fetch_connections_per_broker="auto" opened and then retired, and at close() those of the lanes with
no fetch in flight (a long poll in flight would hold the closing request up: left as before). Counted by
the broker itself: a dedicated Apache Kafka 4.3.1 with JMX on, its FetchSessionCache
NumIncrementalFetchSessions gauge read with Kafka's own JmxTool. (The cache is shared by every
client of the broker, and a consumer's new session cannot evict one younger than two minutes: a
session left behind keeps another consumer from getting one.)"""

from __future__ import annotations

import asyncio
import functools
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from aiokafka_lite import Consumer, ConsumerRecord, TopicPartition
from aiokafka_lite.consumer import wiring
from aiokafka_lite.fetch.fetcher import Fetcher
from aiokafka_lite.fetch.lane_policy import LanePolicy
from aiokafka_lite.testing import ApacheKafkaBroker
from aiokafka_lite.testing._kafka_jars import kafka_jars
from aiokafka_lite.testing._process import free_port
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.plugin import started_or_skipped

pytestmark = pytest.mark.asyncio

PARTITIONS = 6
RECORDS = 600
GAUGE = "kafka.server:type=FetchSessionCache,name=NumIncrementalFetchSessions"


def _jmx_options(port: int) -> list[str]:
    return ["-Dcom.sun.management.jmxremote", f"-Dcom.sun.management.jmxremote.port={port}",
            f"-Dcom.sun.management.jmxremote.rmi.port={port}", "-Dcom.sun.management.jmxremote.authenticate=false",
            "-Dcom.sun.management.jmxremote.ssl=false", "-Djava.rmi.server.hostname=127.0.0.1"]


def _broker_sessions(broker: ApacheKafkaBroker, port: int) -> int:
    """The broker's NumIncrementalFetchSessions now (every client's sessions, all cache shards)."""
    java = shutil.which("java")
    assert java is not None
    argv = [java, "-XX:TieredStopAtLevel=1", "-cp", f"{kafka_jars(broker.version)}/*", "org.apache.kafka.tools.JmxTool",
            "--jmx-url", f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{port}/jmxrmi", "--object-name", GAUGE,
            "--one-time", "true", "--report-format", "csv", "--wait"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    for line in result.stdout.splitlines():
        if line.startswith(f"{GAUGE}:Value,"):
            return int(line.rsplit(",", 1)[1].strip('"'))
    raise AssertionError(f"JmxTool read no {GAUGE} (exit {result.returncode}): {result.stdout} {result.stderr[-2000:]}")


def _node(consumer: Consumer) -> dict[str, Any]:
    nodes = list(consumer.metrics()["fetch_sessions"].values())  # one broker, once it was fetched from
    assert len(nodes) <= 1
    return dict(nodes[0]) if nodes else {}


def _lane_session(consumer: Consumer, lane: int) -> int:
    return int(_node(consumer).get("connections", {}).get(lane, {}).get("session_id", 0))


async def _poll_until(consumer: Consumer, done: Callable[[], bool], timeout: float,
                      got: list[ConsumerRecord] | None = None) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        if loop.time() >= deadline:
            return False
        records = await consumer.poll(timeout=0.1)
        if got is not None:
            got.extend(records)
    return True


async def test_a_retired_lane_and_close_leave_no_fetch_session_on_the_broker(
        unique_topic: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # "auto" with low thresholds: a second lane after one busy answer, retired after 3 calm ones.
    policy = LanePolicy("auto", open_after=1, close_after=3, close_after_seconds=0.0)
    monkeypatch.setattr(wiring, "Fetcher", functools.partial(Fetcher, lane_policy=policy))
    port = free_port()
    with started_or_skipped(ApacheKafkaBroker("4.3.1", jvm_options=_jmx_options(port))) as broker:
        count = functools.partial(_broker_sessions, broker, port)
        create_topic(broker, unique_topic, partitions=PARTITIONS)
        # Batches of 8 small records (~200 bytes each), 200 bytes a partition and fetch: each answer
        # is one batch a partition, full: busy rounds, a dozen per partition.
        produce(broker, unique_topic, ({"value": b"%04d" % i, "partition": i % PARTITIONS}
                                       for i in range(RECORDS)), batch_num_messages=8)
        counts = {"before": count()}
        async with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                            fetch_max_wait_ms=100, max_partition_fetch_bytes=200) as consumer:
            consumer.assign([TopicPartition(unique_topic, p) for p in range(PARTITIONS)])
            got: list[ConsumerRecord] = []
            assert await _poll_until(consumer, lambda: _lane_session(consumer, 1) != 0, 30.0, got), \
                f"no second lane with a session of its own: {_node(consumer)}"
            # Not polling: the buffer fills and fetching stops, both lanes' sessions stay.
            counts["two lanes"] = await asyncio.to_thread(count)
            assert await _poll_until(consumer, lambda: len(got) >= RECORDS, 30.0, got), f"{len(got)} records"
            assert sorted(r.value for r in got) == [b"%04d" % i for i in range(RECORDS)]
            # Drained: calm answers retire lane 1; once its last long poll is answered its session
            # ends (on the code before this fix it never did: wait a while, then count anyway).
            await _poll_until(consumer, lambda: _node(consumer)["lanes"] == 1 and _lane_session(consumer, 1) == 0,
                              5.0)
            assert _node(consumer)["lanes"] == 1
            assert _node(consumer)["session_id"] != 0  # lane 0 fetches on in its session
            counts["lane retired"] = await asyncio.to_thread(count)
            # Nothing to fetch: lane 0's last long poll (100 ms) ends, and no other starts.
            consumer.pause(*consumer.assignment())
            await _poll_until(consumer, lambda: False, 0.5)
        counts["closed"] = count()
        print(f"broker's NumIncrementalFetchSessions: {counts}")
        before = counts["before"]
        assert counts == {"before": before, "two lanes": before + 2, "lane retired": before + 1, "closed": before}
