"""Leader hints (KIP-951) on a 3-broker Apache Kafka 4.3.1 cluster. The partition's leader moves
while every broker stays up (same replicas, reordered, then a preferred leader election); the old
leader, now a follower, refuses the consumer's next Fetch with FENCED_LEADER_EPOCH and, at Fetch
v16+, names the new leader and its address. The consumer fetches from there at once: no Metadata
request (the brokers' request logs show none), no record lost or repeated. With the hints ignored
(``MetadataCache.apply_leader_hint`` patched to refuse them) the consumer takes the old way, a
Metadata refresh and a retry backoff, and still loses nothing. Each run prints its time to resume."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite._net.connection import Connection
from aiokafka_lite._net.metadata import MetadataCache
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite._net.requests import metadata_request
from aiokafka_lite.protocol.messages import METADATA as METADATA_API
from aiokafka_lite.testing.helpers import produce
from aiokafka_lite.testing.kafka_cluster import BROKER_IDS, KafkaCluster

from ._consumers import poll_until, until

pytestmark = [pytest.mark.asyncio]
FETCH, METADATA = 1, 3  # API keys, as the request log names them


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with KafkaCluster(request_log=True) as running:
        yield running


def _send(cluster: KafkaCluster, topic: str, first: int, count: int) -> set[bytes]:
    produce(cluster.bootstrap_servers, topic, [{"value": f"v{i}", "partition": 0} for i in range(first, first + count)],
            enable_idempotence=True)
    return {f"v{i}".encode() for i in range(first, first + count)}


def _answered(consumer: Consumer, node_id: int) -> int:
    """Fetch requests broker ``node_id`` answered the consumer (its fetch session's counts)."""
    session = consumer.metrics()["fetch_sessions"].get(node_id, {})
    return int(session.get("full_fetches", 0) + session.get("incremental_fetches", 0))


async def until_leader_known(cluster: KafkaCluster, node_id: int, tp: TopicPartition, leader: int) -> None:
    """Wait until broker ``node_id``'s own metadata names ``leader`` as the leader of ``tp``."""
    host, _, port = cluster.brokers[node_id].bootstrap_servers.rpartition(":")
    conn = await Connection.open(host, int(port), ConnectionOptions(), timeout=10)
    try:
        async def leader_seen() -> int:
            version = conn.version_for(METADATA_API)
            response = await conn.send(METADATA_API, version, metadata_request(version, [tp.topic]))
            (topic,) = response["topics"]
            return next(p["leader_id"] for p in topic["partitions"] if p["partition_index"] == tp.partition)
        deadline = time.monotonic() + 15
        while (seen := await leader_seen()) != leader:
            assert time.monotonic() < deadline, f"broker {node_id} still names {seen} as the leader of {tp}"
            await asyncio.sleep(0.05)
    finally:
        await conn.close()


def _metadata_served(cluster: KafkaCluster, client_id: str) -> int:
    return sum(cluster.served(node, client_id, METADATA) for node in BROKER_IDS)


@pytest.mark.parametrize("hints", [True, False], ids=["hints", "hints-ignored"])
async def test_a_moved_leader_is_fetched_from_without_a_metadata_round_trip(
        cluster: KafkaCluster, unique_topic: str, hints: bool, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    if not hints:
        monkeypatch.setattr(MetadataCache, "apply_leader_hint", lambda *_args: False)
    cluster.create_topic(unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    old = cluster.leader_of(tp)
    new = next(node for node in cluster.replicas_of(tp)[0] if node != old)
    client_id = f"hints-{unique_topic}"
    sent = _send(cluster, unique_topic, 0, 100)
    async with Consumer(bootstrap_servers=cluster.bootstrap_servers, client_id=client_id,
                        auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=200,
                        request_timeout_ms=5000) as consumer:
        consumer.assign([tp])
        got = await poll_until(consumer, lambda got: len(got) >= 100)
        # Pause, and wait for the long poll in flight to be answered: then nothing is fetched
        # until resume(), and the records sent next wait in the log for the new leader to serve.
        answered = _answered(consumer, old)
        consumer.pause(tp)
        await poll_until(consumer, lambda _got: _answered(consumer, old) > answered, timeout=10, poll_timeout=0.05)
        sent |= _send(cluster, unique_topic, 100, 100)
        cluster.move_leader(tp, new)
        # The old leader names the new one only once its own metadata has it (a Fetch meanwhile
        # is answered without a hint): wait for that, as the brokers converge within moments.
        await until_leader_known(cluster, old, tp, new)
        metadata_before = _metadata_served(cluster, client_id)
        began = time.monotonic()
        consumer.resume(tp)
        got += await poll_until(consumer, lambda got: len(got) >= 100, timeout=30, poll_timeout=0.05)
        resumed = time.monotonic() - began
        assert consumer.metrics()["fetching_from"][f"{unique_topic}-0"] == new
    # The new leader served the records. Its request log reaches server.log a little later: wait.
    await until(lambda: cluster.served(new, client_id, FETCH) > 0, 15, f"broker {new}'s log of our fetches")
    if not hints:
        await until(lambda: _metadata_served(cluster, client_id) > metadata_before, 15, "a Metadata request logged")
    metadata_requests = _metadata_served(cluster, client_id) - metadata_before
    print(f"\nleader {old} -> {new}, hints {'used' if hints else 'ignored'}: resumed in {resumed * 1000:.0f} ms, "
          f"{metadata_requests} Metadata request(s)")
    if hints:
        assert metadata_requests == 0
    else:
        assert metadata_requests > 0
    values = [r.value for r in got]
    assert len(values) == len(set(values)) == len(sent) == 200
    assert set(values) == sent
    assert not [r for r in caplog.records if r.name.startswith("aiokafka_lite") and r.levelno >= logging.WARNING]
