"""One consumer assigned many partitions (issue 43): ``python -m benchmarks.many_partitions``.

    python -m benchmarks.many_partitions [--partitions 10000] [--per-partition 20] [--runs 3]

Starts Apache Kafka 4.3.1 and produces the same number of 100 B records twice: spread over
``--partitions`` partitions (topics of at most 1,000 partitions each: KRaft refuses one request
creating more than 10,000 records) and over 6 partitions. Then, run after run and alternating, one
aiokafka-lite consumer (a group of its own, ``poll()``) reads every record of each. Per read:

- records/s from the first record to the last (the figure compared: many / six in the same run);
- seconds from ``subscribe`` to the first record (the join, then one full fetch naming every partition);
- the fetch session: full and incremental requests, and the partitions named per request
  (``metrics()["fetch_sessions"]``: after the full fetch, an incremental one names only the
  partitions whose position moved).

A read that does not get every record within ``--timeout`` seconds is a failure (exit 1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from typing import Any

from aiokafka_lite import Consumer
from aiokafka_lite.testing.helpers import create_topic, produce
from benchmarks.brokers import describe, start_broker
from benchmarks.timed_read import read_timed

PARTITIONS_PER_TOPIC = 1_000
VALUE = b"x" * 100


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def make_topics(bootstrap: str, partitions: int, per_partition: int) -> list[str]:
    """Topics of up to PARTITIONS_PER_TOPIC partitions, ``partitions`` in all, each with
    ``per_partition`` records."""
    topics = []
    left = partitions
    while left > 0:
        count = min(left, PARTITIONS_PER_TOPIC)
        topic = f"bench-parts-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, partitions=count, timeout=300)
        records = [{"value": VALUE, "partition": p} for p in range(count) for _ in range(per_partition)]
        produce(bootstrap, topic, records, timeout=300, linger_ms=20)
        topics.append(topic)
        left -= count
    return topics


async def read_all(bootstrap: str, topics: list[str], expected: int, timeout: float) -> dict[str, Any]:
    async with Consumer(*topics, bootstrap_servers=bootstrap, group_id=f"bench-parts-{uuid.uuid4().hex[:8]}",
                        auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        timed = await read_timed(consumer, expected, give_up=timeout)
        sessions = consumer.metrics()["fetch_sessions"]
    requests = sum(s["full_fetches"] + s["incremental_fetches"] for s in sessions.values())
    sent = sum(s["partitions_sent"] for s in sessions.values())
    full = sum(s["full_fetches"] for s in sessions.values())
    incremental = sum(s["incremental_fetches"] for s in sessions.values())
    partitions = sum(s["partitions"] for s in sessions.values())
    return {"records": timed.records, "complete": timed.records == expected,
            "records_per_s": timed.records_per_s, "first_record_s": timed.first_record_s,
            "full_fetches": full, "incremental_fetches": incremental, "session_partitions": partitions,
            "partitions_per_request": sent / requests if requests else None,
            "partitions_per_incremental": (sent - full * partitions) / incremental if incremental else None}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.many_partitions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--per-partition", type=int, default=20, help="records per partition (default 20)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a read may take")
    parser.add_argument("--bootstrap", help="use this running broker instead of starting one")
    args = parser.parse_args(argv)
    if args.partitions < 1 or args.per_partition < 1 or args.runs < 1:
        parser.error("--partitions, --per-partition and --runs must be at least 1")
    total = args.partitions * args.per_partition

    def measure(bootstrap: str) -> dict[str, list[dict[str, Any]]]:
        _log(f"creating {args.partitions:,} partitions with {total:,} records")
        many = make_topics(bootstrap, args.partitions, args.per_partition)
        _log(f"creating 6 partitions with {total:,} records")
        six = f"bench-parts-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, six, partitions=6)
        produce(bootstrap, six, [{"value": VALUE, "partition": i % 6} for i in range(total)], timeout=300)
        runs: dict[str, list[dict[str, Any]]] = {"many": [], "six": []}
        for k in range(args.runs):
            for label, topics in (("many", many), ("six", [six])) if k % 2 == 0 else (("six", [six]), ("many", many)):
                _log(f"run {k + 1}/{args.runs}: {label}")
                runs[label].append(asyncio.run(read_all(bootstrap, topics, total, args.timeout)))
                _log(f"    {json.dumps(runs[label][-1])}")
        return runs

    if args.bootstrap:
        runs, where = measure(args.bootstrap), args.bootstrap
    else:
        with start_broker("kafka") as broker:
            runs = measure(broker.bootstrap_servers)
        where = describe("kafka")
    ratios = [m["records_per_s"] / s["records_per_s"] for m, s in zip(runs["many"], runs["six"], strict=True)
              if m["records_per_s"] and s["records_per_s"]]
    summary = {"broker": where, "partitions": args.partitions, "records": total, "value_bytes": len(VALUE),
               "runs": runs, "many_vs_six": ratios,
               "many_vs_six_median": statistics.median(ratios) if ratios else None}
    print(f"{total:,} x 100 B records: {args.partitions:,} partitions vs 6, {where}, {args.runs} runs")
    for label in ("many", "six"):
        rates = [r["records_per_s"] or 0 for r in runs[label]]
        first = [r["first_record_s"] or 0 for r in runs[label]]
        last = runs[label][-1]
        print(f"  {label:4}: records/s median {statistics.median(rates):,.0f} (min {min(rates):,.0f}, max "
              f"{max(rates):,.0f}); first record after {statistics.median(first):.2f} s; partitions per request "
              f"{last['partitions_per_request']}, per incremental {last['partitions_per_incremental']}")
    print(f"  many / six: {summary['many_vs_six_median']}")
    print(json.dumps(summary))
    if not all(r["complete"] for rs in runs.values() for r in rs):
        sys.exit(1)


if __name__ == "__main__":
    main()
