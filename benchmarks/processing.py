"""process()'s speed-up over one record at a time per partition (issue #26):
``python -m benchmarks.processing [--records N] [--keys K] [--handler-ms MS] [--concurrency C]
[--baseline-records M]``.

Starts Apache Kafka 4.3.1, produces N records over K keys to a 6-partition topic, then measures, each
with a fresh consumer group and a handler that awaits MS milliseconds:

- the baseline, one record at a time per partition (process() with ordering="partition": a task per
  partition, as an asyncio service would write it), over the first M records handed out;
- process() with ordering="key" at concurrency C over all N records.

Each rate runs from the first handler call to the last one's end (the group join is not counted).
Prints one JSON line: both rates, their ratio, and whether each key's records ran in offset order.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections import defaultdict
from typing import Any

from aiokafka_lite import Consumer
from aiokafka_lite.processing import Processor
from aiokafka_lite.testing.helpers import create_topic, produce
from benchmarks.brokers import KAFKA_VERSION, start_broker

PARTITIONS = 6


class Clocked:
    """The handler: awaits the handler time, notes when the first call began and the last one ended."""

    def __init__(self, seconds: float, target: int) -> None:
        self.seconds, self.target = seconds, target
        self.reached = asyncio.Event()
        self.first: float | None = None
        self.last = 0.0
        self.handled = 0
        self.by_key: dict[tuple[int, Any], list[int]] = defaultdict(list)

    async def __call__(self, record: Any) -> None:
        if self.first is None:
            self.first = time.monotonic()
        self.by_key[(record.partition, record.key)].append(record.offset)
        await asyncio.sleep(self.seconds)
        self.handled += 1
        self.last = time.monotonic()
        if self.handled >= self.target:
            self.reached.set()

    def rate(self) -> float:
        assert self.first is not None
        return self.handled / (self.last - self.first)

    def in_key_order(self) -> bool:
        return all(offsets == sorted(offsets) for offsets in self.by_key.values())


async def measure(bootstrap: str, topic: str, handler: Clocked, **settings: Any) -> Clocked:
    async with Consumer(topic, bootstrap_servers=bootstrap, group_id=f"bench-{uuid.uuid4().hex[:8]}",
                        enable_auto_commit=False, auto_offset_reset="earliest") as consumer:
        processor = Processor(consumer, handler, **settings)
        task = asyncio.create_task(processor.run())
        reached = asyncio.create_task(handler.reached.wait())
        await asyncio.wait([task, reached], return_when=asyncio.FIRST_COMPLETED)
        reached.cancel()
        processor.stop()
        await task
    return handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.processing")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--handler-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--baseline-records", type=int, default=1_800)
    args = parser.parse_args(argv)
    seconds = args.handler_ms / 1000
    with start_broker("kafka") as broker:
        bootstrap = broker.bootstrap_servers
        topic = f"processing-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, partitions=PARTITIONS)
        produce(bootstrap, topic, [(f"k{i % args.keys}", str(i)) for i in range(args.records)])
        baseline = asyncio.run(measure(bootstrap, topic, Clocked(seconds, args.baseline_records),
                                       concurrency=PARTITIONS, ordering="partition"))
        fast = asyncio.run(measure(bootstrap, topic, Clocked(seconds, args.records),
                                   concurrency=args.concurrency, ordering="key"))
    print(json.dumps({"broker": f"Apache Kafka {KAFKA_VERSION}", "records": args.records, "keys": args.keys,
                      "handler_ms": args.handler_ms, "concurrency": args.concurrency,
                      "baseline_records": baseline.handled, "baseline_per_s": round(baseline.rate(), 1),
                      "process_records": fast.handled, "process_per_s": round(fast.rate(), 1),
                      "process_seconds": round(fast.last - (fast.first or 0.0), 2),
                      "ratio": round(fast.rate() / baseline.rate(), 1), "key_order_kept": fast.in_key_order()}))


if __name__ == "__main__":
    main()
