"""Every entry of ``aiokafka_lite.testing.tansu.DEVIATIONS`` is reproduced on Tansu and not on Apache Kafka.

Each check answers "does the broker deviate?" with the experiment its entry describes, so the
table stays a record of what brokers do: when a Tansu release fixes one, its check fails here and
the entry goes.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite import Consumer, OffsetAndMetadata, TopicPartition
from aiokafka_lite._net.connection import Connection
from aiokafka_lite._net.negotiation import IntendedBroker
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite._net.requests import metadata_request
from aiokafka_lite._net.sasl import UNSUPPORTED_SASL_MECHANISM
from aiokafka_lite.cli.groups import describe_group
from aiokafka_lite.errors import KafkaConnectionError
from aiokafka_lite.protocol.messages import API_VERSIONS, METADATA, SASL_HANDSHAKE
from aiokafka_lite.testing.helpers import create_topic, produce, produce_transactional
from aiokafka_lite.testing.tansu import DEVIATIONS

from ._consumers import poll_until

pytest.importorskip("confluent_kafka")

# A check answers whether the broker deviates, and what it saw.
Check = Callable[[Any, str], Awaitable[tuple[bool, str]]]


async def list_offsets_latest(broker: Any, topic: str) -> tuple[bool, str]:
    create_topic(broker, topic, partitions=3)
    produce(broker, topic, [(f"k{i}", f"v{i}") for i in range(1000)])
    tps = [TopicPartition(topic, p) for p in range(3)]
    async with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as consumer:
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        records = await poll_until(consumer, lambda got: len(got) >= 1000)
    stored = {tp: 1 + max(r.offset for r in records if r.partition == tp.partition) for tp in tps}
    return ends != stored, f"end offsets {sorted(ends.values())}, stored {sorted(stored.values())}"


async def list_offsets_timestamp(broker: Any, topic: str) -> tuple[bool, str]:
    create_topic(broker, topic, partitions=1)
    stamp = int(time.time() * 1000) - 60_000
    produce(broker, topic, [{"value": f"v{i}", "partition": 0, "timestamp": stamp + i} for i in range(10)])
    tp = TopicPartition(topic, 0)
    async with Consumer(bootstrap_servers=broker.bootstrap_servers) as consumer:
        found = await consumer.offsets_for_times({tp: stamp + 5})
    return found[tp] is None or found[tp].offset != 5, f"offsets_for_times: {found[tp]}"


async def join_delay(broker: Any, topic: str) -> tuple[bool, str]:
    create_topic(broker, topic, partitions=1)
    session_ms = 10000
    began = time.monotonic()
    async with Consumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic}",
                        session_timeout_ms=session_ms, heartbeat_interval_ms=1000) as consumer:
        while not consumer.assignment():
            await consumer.poll(timeout=0.1)
    took = time.monotonic() - began
    return took > session_ms / 1000 / 4, f"first assignment after {took:.2f} s"


async def read_committed(broker: Any, topic: str) -> tuple[bool, str]:
    create_topic(broker, topic, partitions=1)
    produce_transactional(broker.bootstrap_servers, topic, [(b"k", b"aborted")], commit=False)
    produce_transactional(broker.bootstrap_servers, topic, [(b"k", b"committed")])
    tp = TopicPartition(topic, 0)
    async with Consumer(bootstrap_servers=broker.bootstrap_servers, isolation_level="read_committed",
                        auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        records = await poll_until(consumer, lambda got: any(r.value == b"committed" for r in got))
    values = [r.value for r in records]
    return b"aborted" in values, f"read_committed read {values}"


_MEMBER = """
import sys, confluent_kafka
consumer = confluent_kafka.Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                                     "session.timeout.ms": 2000, "heartbeat.interval.ms": 500})
consumer.subscribe([sys.argv[3]])
while not consumer.assignment():
    consumer.poll(0.2)
print("joined", flush=True)
while True:
    consumer.poll(0.2)
"""


def _crash_a_member(bootstrap: str, group: str, topic: str) -> None:
    """A librdkafka member joins ``group`` and is SIGKILLed: no LeaveGroup, only its session can end."""
    member = subprocess.Popen([sys.executable, "-c", _MEMBER, bootstrap, group, topic],
                              stdout=subprocess.PIPE, text=True)
    assert member.stdout is not None
    try:
        assert member.stdout.readline().strip() == "joined"
    finally:
        member.send_signal(signal.SIGKILL)
        member.wait()
        member.stdout.close()


async def lazy_session_expiry(broker: Any, topic: str) -> tuple[bool, str]:
    create_topic(broker, topic, partitions=1)
    group = f"g-{topic}"
    await asyncio.to_thread(_crash_a_member, broker.bootstrap_servers, group, topic)
    crashed = time.monotonic()
    while time.monotonic() - crashed < 8.0:  # four session timeouts
        if not (await describe_group(broker.bootstrap_servers, group)).members:
            return False, f"member gone {time.monotonic() - crashed:.1f} s after the crash"
        await asyncio.sleep(0.5)
    return True, "member still listed 8 s after the crash"


async def sasl_handshake(broker: Any, topic: str) -> tuple[bool, str]:
    """Asked for PLAIN, does the broker refuse it while listing PLAIN as enabled?"""
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    conn = await Connection.open(host, int(port), ConnectionOptions(), timeout=10.0)
    try:
        answer = await conn.send(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, timeout=10.0)
    finally:
        await conn.close()
    refused = answer["error_code"] == UNSUPPORTED_SASL_MECHANISM
    return refused and "PLAIN" in answer["mechanisms"], f"SaslHandshake(PLAIN): {answer}"


async def commit_metadata(broker: Any, topic: str) -> tuple[bool, str]:
    """Committed with metadata, is it answered back empty?"""
    create_topic(broker, topic, partitions=1)
    tp = TopicPartition(topic, 0)
    async with Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=f"g-{topic}",
                        enable_auto_commit=False) as consumer:
        consumer.assign([tp])
        await consumer.commit({tp: OffsetAndMetadata(5, "akl1:x")})
        read = (await consumer.committed([tp]))[tp]
    assert read is not None
    assert read.offset == 5
    return read.metadata == "", f"committed offset 5 with 'akl1:x', read back {read.metadata!r}"


async def api_versions_v5(broker: Any, topic: str) -> tuple[bool, str]:
    """Is ApiVersions v5 answered though v4 is the newest listed, and one naming the broker's own
    cluster and node (KIP-1242) met with a closed connection?"""
    host, port = broker.bootstrap_servers.split(",")[0].rsplit(":", 1)
    plain = await Connection.open(host, int(port), ConnectionOptions(), timeout=10.0)
    try:
        listed, answered = plain.broker_versions[API_VERSIONS.key][1], plain.api_versions_version
        version = plain.version_for(METADATA)
        metadata = await plain.send(METADATA, version, metadata_request(version, []))
    finally:
        await plain.close()
    cluster_id, node_id = metadata["cluster_id"], metadata["brokers"][0]["node_id"]
    try:
        named = await Connection.open(host, int(port), ConnectionOptions(), node_id=node_id, timeout=10.0,
                                      intended=IntendedBroker(cluster_id, node_id))
    except KafkaConnectionError as exc:
        closed = f"closed ({exc})"
    else:
        closed = ""
        await named.close()
    return answered > listed and bool(closed), (
        f"lists ApiVersions v0-v{listed}, answered v{answered}; naming cluster {cluster_id!r} and node "
        f"{node_id}: {closed or 'answered'}")


CHECKS: dict[str, Check] = {
    "list_offsets_latest": list_offsets_latest,
    "list_offsets_timestamp": list_offsets_timestamp,
    "join_delay": join_delay,
    "read_committed": read_committed,
    "lazy_session_expiry": lazy_session_expiry,
    "sasl_handshake": sasl_handshake,
    "commit_metadata": commit_metadata,
    "api_versions_v5": api_versions_v5,
}


def test_every_deviation_has_a_check_and_its_evidence() -> None:
    assert set(CHECKS) == set(DEVIATIONS)
    for deviation in DEVIATIONS.values():
        assert deviation.differs
        assert deviation.effect
        assert deviation.observed


def test_the_testing_docs_list_every_deviation() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    rows = {line.split("`")[1] for line in page.splitlines() if line.startswith("| `")}
    assert set(DEVIATIONS) <= rows


@pytest.mark.asyncio
@pytest.mark.parametrize("name", sorted(DEVIATIONS))
@pytest.mark.parametrize("fixture", ["tansu_broker", "apache_kafka_broker"])
async def test_deviation_is_seen_on_tansu_only(name: str, fixture: str, request: pytest.FixtureRequest,
                                               unique_topic: str) -> None:
    broker = request.getfixturevalue(fixture)
    deviates, seen = await CHECKS[name](broker, unique_topic)
    assert deviates == (fixture == "tansu_broker"), seen
