"""process() with one handler that never returns (issue 39): does memory stay bounded and the loop
responsive while the other records go on? ``python -m benchmarks.processing_hung [--records N]
[--seconds S] [--broker kafka|tansu]``.

Produces N records over 1,000 keys to a one-partition topic, then runs process() (concurrency 100,
max_pending_records 1,000) with a handler that returns at once, except on the first record, where
it waits for ever (an HTTP call without a timeout, say): every record after it finishes above the
watermark it holds. Measured for S seconds
or until every other record is handled: records handled and their rate, the process's resident
memory growth from the first handler call, and the event loop's longest stall (a 10 ms ticker's
worst lateness). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid
from typing import Any

from aiokafka_lite import Consumer
from aiokafka_lite.processing import Processor
from aiokafka_lite.testing.helpers import create_topic, produce
from benchmarks.brokers import describe, start_broker

PARTITIONS = 1
TICK = 0.01


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class Stalls:
    """The event loop's worst lateness on a 10 ms tick."""

    def __init__(self) -> None:
        self.worst = 0.0

    async def watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(TICK)
            self.worst = max(self.worst, loop.time() - before - TICK)


async def run(bootstrap: str, topic: str, records: int, seconds: float) -> dict[str, Any]:
    hang, started = asyncio.Event(), asyncio.Event()
    handled = 0
    first: float | None = None

    async def handler(record: Any) -> None:
        nonlocal handled, first
        if first is None:
            first = time.monotonic()
            started.set()
        if record.offset == 0:
            await hang.wait()
        handled += 1

    stalls = Stalls()
    async with Consumer(topic, bootstrap_servers=bootstrap, group_id=f"bench-{uuid.uuid4().hex[:8]}",
                        enable_auto_commit=False, auto_offset_reset="earliest") as consumer:
        processor = Processor(consumer, handler, concurrency=100, max_pending_records=1000, commit_interval=1.0)
        task = asyncio.create_task(processor.run())
        await started.wait()
        assert first is not None
        rss_before = rss_mb()
        watcher = asyncio.create_task(stalls.watch())
        deadline = time.monotonic() + seconds
        most_held = 0
        while time.monotonic() < deadline and handled < records - 1:
            await asyncio.sleep(0.05)
            most_held = max(most_held, processor.metrics()["held"])
        elapsed = time.monotonic() - first
        rss_after = rss_mb()
        watcher.cancel()
        hang.set()
        processor.stop()
        await asyncio.gather(task, watcher, return_exceptions=True)
    return {"handled": handled, "per_s": round(handled / elapsed, 1), "seconds": round(elapsed, 1),
            "rss_growth_mb": round(rss_after - rss_before, 1), "worst_loop_stall_ms": round(stalls.worst * 1000, 1),
            "most_held": most_held}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.processing_hung")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--broker", choices=["kafka", "tansu"], default="kafka")
    args = parser.parse_args(argv)
    with start_broker(args.broker) as broker:
        topic = f"hung-{uuid.uuid4().hex[:8]}"
        create_topic(broker, topic, partitions=PARTITIONS)
        produce(broker, topic, ((f"k{i % 1000}", b"x" * 100) for i in range(args.records)))
        figures = asyncio.run(run(broker.bootstrap_servers, topic, args.records, args.seconds))
    print(json.dumps({"broker": describe(args.broker), "records": args.records, **figures}))


if __name__ == "__main__":
    main()
