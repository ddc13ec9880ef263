"""Log truncation (KIP-320) on a real cluster: an unclean leader election takes away records our
consumers already read, and each one notices.

The partition has two replicas and ``min.insync.replicas`` 1. The follower is stopped, so records
written next exist on the leader only; the consumers read them. Then the leader is killed, the
follower comes back, and an unclean election makes it the leader: its log, which lacks those
records, wins, and new records are written over the same offsets. A consumer with a reset
strategy must log a WARNING (partition, both offsets) and go on from the divergence point,
reading the new records; one with ``auto_offset_reset="none"`` must raise ``LogTruncationError``.
Without KIP-320 the first would re-read from the start or skip silently, depending on timing.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite._net import Cluster, ConnectionOptions
from aiokafka_lite.errors import LogTruncationError
from aiokafka_lite.fetch.epoch_validation import EpochEnd, epoch_ends, supported
from aiokafka_lite.testing.helpers import produce
from aiokafka_lite.testing.kafka_cluster import BROKER_IDS, KafkaCluster

from ._consumers import poll_until

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]
KEPT, LOST, NEW = 50, 30, 20  # replicated / on the old leader only / written after the election


def values(prefix: str, count: int) -> list[tuple[None, str]]:
    return [(None, f"{prefix}-{i}") for i in range(count)]


async def test_an_unclean_election_that_truncates_consumed_records_is_detected(
        kafka_cluster: KafkaCluster, unique_topic: str, caplog: pytest.LogCaptureFixture) -> None:
    cluster = kafka_cluster
    cluster.create_topic(unique_topic, replication_factor=2, config={"min.insync.replicas": "1"})
    tp = TopicPartition(unique_topic, 0)
    leader = cluster.leader_of(tp)
    [follower] = [node for node in cluster.replicas_of(tp)[0] if node != leader]
    produce(cluster.bootstrap_servers, unique_topic, values("kept", KEPT), acks="all", enable_idempotence=True)
    cluster.stop_broker(follower)
    cluster.wait_for_isr(tp, {leader})
    produce(cluster.bootstrap_servers, unique_topic, values("lost", LOST), acks="1")

    def consumer(reset: str) -> Consumer:
        c = Consumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset=reset,
                     metadata_max_age_ms=2000)
        c.assign([tp])
        return c

    async with consumer("earliest") as resetting, consumer("none") as strict:
        strict.seek(tp, 0)
        for c in (resetting, strict):
            got = await poll_until(c, lambda got: len(got) >= KEPT + LOST)
            assert [r.value for r in got] == [v.encode() for _k, v in values("kept", KEPT) + values("lost", LOST)]
        lost_epoch = got[-1].leader_epoch
        assert lost_epoch is not None

        cluster.kill_broker(leader)
        cluster.broker(follower).start()
        cluster.wait_for_brokers({node for node in BROKER_IDS if node != leader})
        cluster.elect_leaders([tp], unclean=True)
        produce(cluster.bootstrap_servers, unique_topic, values("new", NEW), acks="1")

        with caplog.at_level(logging.WARNING, "aiokafka_lite"):
            got = await poll_until(resetting, lambda got: len(got) >= NEW, timeout=60)
        # Read on from the divergence point: the records written over the lost ones, once each.
        assert [(r.offset, r.value) for r in got] == [(KEPT + i, f"new-{i}".encode()) for i in range(NEW)]
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, warnings
        assert f"{unique_topic}-0" in warnings[0]
        assert f"consumed up to offset {KEPT + LOST}" in warnings[0]
        assert f"diverges from offset {KEPT}" in warnings[0]

        with pytest.raises(LogTruncationError) as raised:
            await poll_until(strict, lambda got: False, timeout=60)
        error = raised.value
        assert (error.topic, error.partition) == (unique_topic, 0)
        assert (error.fetch_offset, error.divergent_offset) == (KEPT + LOST, KEPT)
        assert await strict.position(tp) == KEPT + LOST  # unchanged until the application seeks
        strict.seek(tp, error.divergent_offset)
        got = await poll_until(strict, lambda got: len(got) >= NEW)
        assert [r.value for r in got] == [f"new-{i}".encode() for i in range(NEW)]

    # What a broker without Fetch v12 needs instead: the new leader says where the lost records'
    # epoch ends, in the OffsetForLeaderEpoch answer the fetcher would check (and does, in
    # tests/unit/fetch/test_fetcher_truncation.py, against scripted brokers).
    client = Cluster(ConnectionOptions(request_timeout=10.0),
                     [(h, int(p)) for h, p in (a.rsplit(":", 1) for a in cluster.bootstrap_servers.split(","))
                      if int(p) != cluster.broker(leader).port])
    try:
        await client.refresh_metadata([unique_topic], timeout=10)
        current = client.leader_epoch_for(tp)
        assert current is not None
        assert current > lost_epoch
        conn = await client.connection(follower, timeout=10)
        assert supported(conn)
        answer = await epoch_ends(conn, {tp: (current, lost_epoch)}, timeout=10)
        assert answer == {tp: EpochEnd(0, lost_epoch, KEPT)}
    finally:
        await client.close()

    # The old leader comes back as a follower: it truncates its log to the new leader's.
    await asyncio.to_thread(cluster.start_broker, leader)
