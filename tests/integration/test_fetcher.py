"""Cluster + Fetcher + OffsetLookup against real brokers, with data produced by librdkafka.

10,000 records (keys, headers, explicit timestamps; a third uncompressed, a third lz4, a third
zstd) go to a 3-partition topic; the fetcher must deliver each exactly once, byte for byte.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from aiokafka_lite._net.cluster import Cluster
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite.fetch.fetcher import Fetcher
from aiokafka_lite.fetch.offset_lookup import OffsetLookup
from aiokafka_lite.structs import ConsumerRecord, TopicPartition
from aiokafka_lite.subscription import SubscriptionState
from aiokafka_lite.testing.helpers import produce

pytestmark = pytest.mark.asyncio

log = logging.getLogger(__name__)

PARTITIONS = 3
COUNT = 10_000
BASE_TS = 1_700_000_000_000


def _records() -> list[dict[str, Any]]:
    """Deterministic records: varied value sizes (incl. empty and None), two headers (one null)."""
    out = []
    for i in range(COUNT):
        size = (i * 37) % 700
        value = None if i % 997 == 0 else os.urandom(size)
        out.append({"key": f"key-{i}".encode(), "value": value, "partition": i % PARTITIONS,
                    "timestamp": BASE_TS + i,
                    "headers": [("i", str(i).encode()), ("empty", None if i % 2 else b"")]})
    return out


@pytest.fixture
def produced(any_broker: Any, unique_topic: str) -> list[dict[str, Any]]:
    any_broker.create_topic(unique_topic, partitions=PARTITIONS)
    records = _records()
    third = COUNT // 3
    for chunk, codec in ((records[:third], "none"), (records[third:2 * third], "lz4"),
                         (records[2 * third:], "zstd")):
        produce(any_broker.bootstrap_servers, unique_topic, chunk, compression=codec)
    return records


def _bootstrap(servers: str) -> list[tuple[str, int]]:
    host, _, port = servers.split(",")[0].rpartition(":")
    return [(host, int(port))]


@pytest_asyncio.fixture
async def cluster(any_broker: Any) -> AsyncIterator[Cluster]:
    cluster = Cluster(ConnectionOptions(request_timeout=30.0), _bootstrap(any_broker.bootstrap_servers))
    await cluster.bootstrap(30.0)
    try:
        yield cluster
    finally:
        await cluster.close()


async def _fetch_all(fetcher: Fetcher, cluster: Cluster, topic: str, expected: int) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60.0
    while len(got) < expected:
        assert loop.time() < deadline, f"only {len(got)} of {expected} records after 60 s"
        if fetcher.metadata_refresh_needed:
            await cluster.refresh_metadata([topic], timeout=10.0)
            fetcher.metadata_refresh_needed = False
        for records in fetcher.fetched_records(500).values():
            got.extend(records)
        fetcher.send_fetches()
        if len(got) < expected:
            await fetcher.wait_for_data(0.5)
    return got


async def _fetch_from_beginning(cluster: Cluster, topic: str
                                ) -> tuple[list[ConsumerRecord], SubscriptionState, float]:
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    await cluster.refresh_metadata([topic], timeout=30.0)
    beginnings = await OffsetLookup(cluster).beginning_offsets(tps, 30.0)
    assert beginnings == dict.fromkeys(tps, 0)
    sub = SubscriptionState()
    sub.assign_manually(tps)
    for tp, offset in beginnings.items():
        sub.seek(tp, offset)
    fetcher = Fetcher(cluster, sub, fetch_max_wait_ms=200, request_timeout=30.0)
    began = time.perf_counter()
    try:
        got = await _fetch_all(fetcher, cluster, topic, COUNT)
    finally:
        await fetcher.close()
    return got, sub, time.perf_counter() - began


async def test_fetches_every_record_exactly_once_byte_for_byte(
        any_broker: Any, unique_topic: str, produced: list[dict[str, Any]], cluster: Cluster) -> None:
    got, sub, elapsed = await _fetch_from_beginning(cluster, unique_topic)
    log.warning("fetched %d records in %.3f s: %.0f records/s (%s)", len(got), elapsed,
                len(got) / elapsed, any_broker.kind)
    assert len(got) == COUNT
    assert len({(r.partition, r.offset) for r in got}) == COUNT
    by_key = {r.key: r for r in got}
    assert len(by_key) == COUNT
    for sent in produced:
        record = by_key[sent["key"]]
        assert record.topic == unique_topic
        assert record.partition == sent["partition"]
        assert record.value == sent["value"]
        assert record.timestamp == sent["timestamp"]
        assert record.timestamp_type == 0
        assert [(k, v) for k, v in record.headers] == sent["headers"]
    for tp, state in sub.assignment.items():
        sent_here = sum(1 for r in produced if r["partition"] == tp.partition)
        offsets = sorted(r.offset for r in got if r.partition == tp.partition)
        assert offsets == list(range(sent_here))
        assert state.position == state.high_watermark == sent_here


async def test_end_offsets_and_offsets_for_times(
        any_broker: Any, unique_topic: str, produced: list[dict[str, Any]], cluster: Cluster) -> None:
    # Tansu's ListOffsets answers are not Kafka's (librdkafka sees the same numbers there):
    # DEVIATIONS["list_offsets_latest"] and ["list_offsets_timestamp"] in aiokafka_lite.testing.tansu.
    any_broker.require("end_offsets")
    got, _sub, _elapsed = await _fetch_from_beginning(cluster, unique_topic)
    tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
    lookup = OffsetLookup(cluster, retry_backoff=0.1)
    ends = await lookup.end_offsets(tps, 30.0)
    assert ends == {tp: sum(1 for r in produced if r["partition"] == tp.partition) for tp in tps}
    if "offsets_for_times" not in any_broker.capabilities:
        # The mock keeps no timestamp index: librdkafka's own offsets_for_times() gets -1 there too.
        return
    # offsets_for_times: the first offset whose timestamp is >= the one asked.
    asked = {tps[0]: BASE_TS + 4_000, tps[1]: BASE_TS + 4_000, tps[2]: BASE_TS + COUNT + 1}
    found = await lookup.offsets_for_times(asked, 30.0)
    for tp in tps[:2]:
        later = [r for r in got if r.partition == tp.partition and r.timestamp >= asked[tp]]
        first = min(later, key=lambda r: r.offset)
        assert found[tp] == (first.offset, first.timestamp)
    assert found[tps[2]] is None


async def test_a_fetch_lane_is_a_connection_of_its_own_and_closes_with_the_cluster(
        any_broker: Any, cluster: Cluster) -> None:
    node = cluster.least_loaded_node()
    assert node is not None
    shared = await cluster.connection(node, timeout=10.0)
    lane = await cluster.connection(node, timeout=10.0, lane=1)
    assert lane is not shared
    assert not lane.closed
    assert await cluster.connection(node, timeout=10.0, lane=1) is lane  # kept, not opened again
    assert await cluster.connection(node, timeout=10.0) is shared
    await cluster.close()
    assert shared.closed
    assert lane.closed
