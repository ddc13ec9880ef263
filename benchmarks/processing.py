"""process()'s speed-up over one record at a time per partition (issue #26):
``python -m benchmarks.processing [--records N] [--keys K] [--handler-ms MS] [--concurrency C]
[--baseline-records M]``.

Starts Apache Kafka 4.3.1, produces N records over K keys to a 6-partition topic, then measures, each
with a fresh consumer group and a handler that awaits MS milliseconds:

- the baseline, one record at a time per partition (process() with ordering="partition": a task per
  partition, as an asyncio service would write it), over the first M records handed out;
- process() with ordering="key" at concurrency C over all N records.

With ``--peers``, the same handler time in the other clients' natural best, side by side:

- aiokafka 0.14: ``getmany()``, then a task per partition handling its records one at a time
  (``asyncio.gather``), then ``commit()``: one record at a time per partition;
- confluent-kafka: ``consume(500)``, the batch through a ``ThreadPoolExecutor`` of C threads
  (``time.sleep`` as the handler), then a synchronous ``commit()``: no key order kept.

Each rate runs from the first handler call to the last one's end (the group join is not counted).
Prints one JSON line: the rates, the ratios, and whether each key's records ran in offset order.

With ``--rates`` (issue 43) it measures instead, on the same N records, each with a fresh group:
plain ``poll()`` (first record to last); process() with a no-op handler (a coroutine that does not
await) against that; and process() with the ``--handler-ms`` handler at each of ``--sweep``'s
concurrencies against concurrency x (1000 / handler-ms) records/s, the rate the handlers allow.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiokafka_lite import Consumer
from aiokafka_lite.processing import Processor
from aiokafka_lite.testing.helpers import create_topic, produce
from benchmarks.brokers import KAFKA_VERSION, start_broker
from benchmarks.timed_read import read_timed

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
        self._finished(time.monotonic())

    def _finished(self, now: float) -> None:
        self.handled += 1
        self.last = now
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


async def aiokafka_per_partition(bootstrap: str, topic: str, handler: Clocked) -> Clocked:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"bench-{uuid.uuid4().hex[:8]}",
                                enable_auto_commit=False, auto_offset_reset="earliest")

    async def one_partition(records: list[Any]) -> None:
        for record in records:
            await handler(record)

    await consumer.start()
    try:
        while handler.handled < handler.target:
            batches = await consumer.getmany(timeout_ms=100)
            await asyncio.gather(*(one_partition(records) for records in batches.values()))
            if batches:
                await consumer.commit()
    finally:
        await consumer.stop()
    return handler


def confluent_thread_pool(bootstrap: str, topic: str, seconds: float, target: int, workers: int) -> dict[str, Any]:
    from confluent_kafka import Consumer as ConfluentConsumer

    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    lock = threading.Lock()
    times: dict[str, float] = {}

    def handle(message: Any) -> None:
        with lock:
            times.setdefault("first", time.monotonic())
        time.sleep(seconds)
        with lock:
            times["last"] = time.monotonic()

    handled = 0
    try:
        with ThreadPoolExecutor(workers) as pool:
            while handled < target:
                batch = [m for m in consumer.consume(num_messages=500, timeout=0.5) if m.error() is None]
                list(pool.map(handle, batch))
                handled += len(batch)
                if batch:
                    consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return {"handled": handled, "per_s": round(handled / (times["last"] - times["first"]), 1)}


class NoOp(Clocked):
    """A handler that does nothing and never awaits: process()'s own cost per record."""

    async def __call__(self, record: Any) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = now
        self._finished(now)


async def plain_poll(bootstrap: str, topic: str, target: int) -> float:
    """records/s of poll() alone, first record to last."""
    async with Consumer(topic, bootstrap_servers=bootstrap, group_id=f"bench-{uuid.uuid4().hex[:8]}",
                        enable_auto_commit=False, auto_offset_reset="earliest") as consumer:
        timed = await read_timed(consumer, target)
    assert timed.records_per_s is not None
    return timed.records_per_s


def rates(bootstrap: str, topic: str, records: int, handler_ms: float, sweep: list[int]) -> dict[str, Any]:
    poll_rate = asyncio.run(plain_poll(bootstrap, topic, records))
    noop = asyncio.run(measure(bootstrap, topic, NoOp(0.0, records)))
    out: dict[str, Any] = {"records": records, "poll_per_s": round(poll_rate), "noop_process_per_s": round(noop.rate()),
                           "noop_vs_poll": round(noop.rate() / poll_rate, 3), "handler_ms": handler_ms, "sweep": []}
    for concurrency in sweep:
        allowed = concurrency * 1000 / handler_ms
        target = min(records, max(2_000, int(allowed * 5)))  # about 5 s at the allowed rate
        handler = asyncio.run(measure(bootstrap, topic, Clocked(handler_ms / 1000, target), concurrency=concurrency))
        out["sweep"].append({"concurrency": concurrency, "records": handler.handled, "per_s": round(handler.rate()),
                             "allowed_per_s": round(allowed), "vs_allowed": round(handler.rate() / allowed, 3),
                             "vs_poll": round(handler.rate() / poll_rate, 3), "key_order_kept": handler.in_key_order()})
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.processing")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--handler-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--baseline-records", type=int, default=1_800)
    parser.add_argument("--peers", action="store_true", help="also aiokafka and confluent-kafka (see above)")
    parser.add_argument("--rates", action="store_true", help="poll() vs process() rates instead (see above)")
    parser.add_argument("--sweep", type=int, nargs="+", default=[10, 50, 200, 1000],
                        help="--rates: the concurrencies (default 10 50 200 1000)")
    args = parser.parse_args(argv)
    seconds = args.handler_ms / 1000
    with start_broker("kafka") as broker:
        bootstrap = broker.bootstrap_servers
        topic = f"processing-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, partitions=PARTITIONS)
        produce(bootstrap, topic, [(f"k{i % args.keys}", str(i)) for i in range(args.records)])
        if args.rates:
            print(json.dumps({"broker": f"Apache Kafka {KAFKA_VERSION}", "keys": args.keys,
                              **rates(bootstrap, topic, args.records, args.handler_ms, args.sweep)}))
            return
        baseline = asyncio.run(measure(bootstrap, topic, Clocked(seconds, args.baseline_records),
                                       concurrency=PARTITIONS, ordering="partition"))
        fast = asyncio.run(measure(bootstrap, topic, Clocked(seconds, args.records),
                                   concurrency=args.concurrency, ordering="key"))
        peers: dict[str, Any] = {}
        if args.peers:
            aio = asyncio.run(aiokafka_per_partition(bootstrap, topic, Clocked(seconds, args.baseline_records)))
            peers["aiokafka_task_per_partition_per_s"] = round(aio.rate(), 1)
            peers["ratio_vs_aiokafka"] = round(fast.rate() / aio.rate(), 1)
            pool = confluent_thread_pool(bootstrap, topic, seconds, args.records, args.concurrency)
            peers[f"confluent_kafka_{args.concurrency}_threads_per_s"] = pool["per_s"]
            peers["ratio_vs_confluent_kafka"] = round(fast.rate() / pool["per_s"], 2)
    print(json.dumps({**peers, "broker": f"Apache Kafka {KAFKA_VERSION}", "records": args.records, "keys": args.keys,
                      "handler_ms": args.handler_ms, "concurrency": args.concurrency,
                      "baseline_records": baseline.handled, "baseline_per_s": round(baseline.rate(), 1),
                      "process_records": fast.handled, "process_per_s": round(fast.rate(), 1),
                      "process_seconds": round(fast.last - (fast.first or 0.0), 2),
                      "ratio": round(fast.rate() / baseline.rate(), 1), "key_order_kept": fast.in_key_order()}))


if __name__ == "__main__":
    main()
