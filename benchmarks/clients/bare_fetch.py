"""A bare Fetch loop on aiokafka-lite's own asyncio connection, one Fetch in flight per broker.

It decodes no record, only batch headers to advance offsets, and uses the consumer's wire path
(``Connection``: the event loop's thread or, with the extension, its reader thread) and its Fetch
schema with the same fetch sizes.
It was the benchmark's limit until confluent-kafka, receiving on librdkafka's own threads, read
1.45x it at 1 KB; it stays a row (one of the limit's candidates, ``throughput.LIMITS``) for what
the consumer's connection alone can carry. The limit is now ``limit.py``'s pipelined loop.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from aiokafka_lite._net import Cluster, ConnectionOptions
from aiokafka_lite.protocol.messages import FETCH
from aiokafka_lite.structs import TopicPartition
from benchmarks.clients._harness import Result, Spec, Stopwatch, run
from benchmarks.clients.limit import fetch_body, walk

MAX_FETCH_VERSION = 12
_wire = {"bytes": 0}


async def _fetch_loop(cluster: Cluster, spec: Spec, node: int, offsets: dict[tuple[str, int], int], totals: list[int],
                      watch: Stopwatch) -> None:
    conn = await cluster.connection(node)
    version = conn.version_for(FETCH, MAX_FETCH_VERSION)
    while totals[0] < spec.records:
        response = await conn.send(FETCH, version, fetch_body(spec, offsets))
        before = totals[0]
        for topic in response["responses"]:
            for part in topic["partitions"]:
                data = part["records"] or b""
                _wire["bytes"] += len(data)
                next_offset, records = walk(data)
                if next_offset > 0:
                    offsets[topic["topic"], part["partition_index"]] = next_offset
                    totals[0] += records
        watch.first(totals[0] - before)


async def _consume(spec: Spec, watch: Stopwatch) -> Result:
    host, port = spec.bootstrap.split(":")
    cluster = Cluster(ConnectionOptions(), [(host, int(port))])
    await cluster.bootstrap()
    try:
        await cluster.refresh_metadata(spec.topics)
        by_node: dict[int, dict[tuple[str, int], int]] = defaultdict(dict)
        for topic, p in spec.assignment():
            leader = cluster.leader_for(TopicPartition(topic, p))
            assert leader is not None
            by_node[leader][topic, p] = 0
        totals = [0]
        await asyncio.gather(*(_fetch_loop(cluster, spec, node, offsets, totals, watch)
                               for node, offsets in by_node.items()))
        watch.stop()
    finally:
        await cluster.close()
    return totals[0], totals[0] * spec.value_size


def consume(spec: Spec, watch: Stopwatch) -> Result:
    return asyncio.run(_consume(spec, watch))


def _extra(spec: Spec) -> dict[str, Any]:
    return {"wire_bytes": _wire["bytes"]}


if __name__ == "__main__":
    run(consume, _extra)
