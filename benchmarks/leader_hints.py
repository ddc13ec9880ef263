"""Time to resume after a partition's leader moves, with and without leader hints (KIP-951).

Starts a 3-broker Apache Kafka 4.3.1 cluster (with its request logs) and, per run, a topic of one
partition (replication factor 3): a consumer reads 100 records from the leader, is paused once its
long poll in flight is answered, 100 more records are written, the leader moves to another replica
with every broker up (``KafkaCluster.move_leader``), and the consumer is resumed. The time to
resume is from ``resume()`` until ``poll()`` has handed out the 100 new records, all fetched from
the new leader. Runs alternate between hints used and hints ignored (``MetadataCache.apply_leader_hint``
patched to refuse every hint: the consumer refreshes metadata and backs off ``retry_backoff_ms``,
as before KIP-951); each run also counts the Metadata requests the brokers logged after the move.

    python -m benchmarks.leader_hints --runs 5          # 5 runs of each

Writes benchmarks/results/leader_hints.json (``--no-save``: print only).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any
from unittest import mock

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite._net.metadata import MetadataCache
from aiokafka_lite.testing.helpers import produce
from aiokafka_lite.testing.kafka_cluster import BROKER_IDS, KafkaCluster

METADATA = 3
RESULTS = Path(__file__).parent / "results" / "leader_hints.json"


def _answered(consumer: Consumer, node_id: int) -> int:
    session = consumer.metrics()["fetch_sessions"].get(node_id, {})
    return int(session.get("full_fetches", 0) + session.get("incremental_fetches", 0))


async def _until(consumer: Consumer, done: Any, want: int = 0, timeout: float = 30.0) -> int:
    got = 0
    deadline = time.monotonic() + timeout
    while not done(got):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{got} of {want} records after {timeout} s")
        got += len(await consumer.poll(timeout=0.05))
    return got


async def one_run(cluster: KafkaCluster, topic: str, hints: bool) -> dict[str, Any]:
    cluster.create_topic(topic)
    tp = TopicPartition(topic, 0)
    old = cluster.leader_of(tp)
    new = next(node for node in cluster.replicas_of(tp)[0] if node != old)
    produce(cluster.bootstrap_servers, topic, [{"value": f"v{i}", "partition": 0} for i in range(100)],
            enable_idempotence=True)
    client_id = f"bench-{topic}"
    async with Consumer(bootstrap_servers=cluster.bootstrap_servers, client_id=client_id,
                        auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=200,
                        request_timeout_ms=5000) as consumer:
        consumer.assign([tp])
        await _until(consumer, lambda n: n >= 100, 100)
        answered = _answered(consumer, old)
        consumer.pause(tp)
        await _until(consumer, lambda _n: _answered(consumer, old) > answered, timeout=10)
        produce(cluster.bootstrap_servers, topic, [{"value": f"v{i}", "partition": 0} for i in range(100, 200)],
                enable_idempotence=True)
        cluster.move_leader(tp, new)
        metadata_before = sum(cluster.served(n, client_id, METADATA) for n in BROKER_IDS)
        began = time.monotonic()
        consumer.resume(tp)
        await _until(consumer, lambda n: n >= 100, 100)
        seconds = time.monotonic() - began
    metadata = sum(cluster.served(n, client_id, METADATA) for n in BROKER_IDS) - metadata_before
    return {"hints": hints, "resume_ms": round(seconds * 1000, 1), "metadata_requests": metadata,
            "from": old, "to": new}


async def main(runs: int) -> list[dict[str, Any]]:
    results = []
    with KafkaCluster(request_log=True) as cluster:
        for i in range(runs * 2):
            hints = i % 2 == 0
            ignored = mock.patch.object(MetadataCache, "apply_leader_hint", return_value=False)
            with contextlib.nullcontext() if hints else ignored:
                result = await one_run(cluster, f"leader-hints-{i}", hints)
            print(result, flush=True)
            results.append(result)
    return results


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    out = {}
    for hints in (True, False):
        ms = [r["resume_ms"] for r in results if r["hints"] is hints]
        out["hints" if hints else "hints_ignored"] = {
            "runs": len(ms), "median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms),
            "metadata_requests": [r["metadata_requests"] for r in results if r["hints"] is hints]}
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    found = asyncio.run(main(args.runs))
    table = summary(found)
    print(json.dumps(table, indent=2))
    if not args.no_save:
        RESULTS.write_text(json.dumps({"summary": table, "runs": found, "cpus": os.cpu_count(),
                                       "load_average": os.getloadavg(), "python": platform.python_version(),
                                       "broker": "Apache Kafka 4.3.1, 3 brokers"}, indent=2) + "\n")
