"""The sweep behind ``throughput.TUNED_BACKOFF_MS``: confluent-kafka (sync and AIO) on the 100 B data
set with librdkafka's default ``fetch.queue.backoff.ms`` and with each value given.

``python -m benchmarks.sweep [--records N] [--runs K] [--values 0 1 10 100]``: own broker, data
produced once, values interleaved within each run; prints the median records/s and CPU s of each.
The backoff only matters once a partition's local queue holds ``queued.min.messages`` (100k), so
use enough records per partition (the default 1,000,000 over 6 partitions is).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from benchmarks.brokers import describe, start_broker
from benchmarks.data import datasets, produce_dataset
from benchmarks.report import grid
from benchmarks.throughput import Client, run_client


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _clients(values: list[int]) -> dict[str, Client]:
    out: dict[str, Client] = {}
    for module, name in (("confluent", "confluent-kafka"), ("confluent_aio", "confluent-kafka AIO")):
        out[f"{name} (defaults)"] = Client(module)
        for value in values:
            out[f"{name} fetch.queue.backoff.ms={value}"] = Client(module, options={"fetch.queue.backoff.ms": value})
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--values", type=int, nargs="+", default=[0, 1, 10, 100])
    args = parser.parse_args(argv)
    clients = _clients(args.values)
    results: dict[str, list[dict[str, Any]]] = {label: [] for label in clients}
    _log(f"starting {describe('kafka')}")
    broker = start_broker("kafka")
    try:
        dataset = datasets(args.records)[0]
        _log(f"producing {dataset.describe()}")
        produce_dataset(broker.bootstrap_servers, dataset)
        for k in range(args.runs):
            for label, client in clients.items():
                _log(f"sweep run {k + 1}/{args.runs}: {label}")
                results[label].append(run_client(label, broker.bootstrap_servers, dataset, client=client))
    finally:
        broker.stop()
    rows: list[tuple[str, ...]] = [("client", "records/s (median)", "min-max", "CPU s", "ok runs")]
    for label, runs in results.items():
        ok = [r for r in runs if "records_per_s" in r]
        rates = [r["records_per_s"] for r in ok] or [0.0]
        cpu = statistics.median(r["cpu_seconds"] for r in ok) if ok else 0.0
        rows.append((label, f"{statistics.median(rates):,.0f}", f"{min(rates):,.0f}-{max(rates):,.0f}",
                     f"{cpu:.2f}", f"{len(ok)}/{len(runs)}"))
    print(f"\n{dataset.name}: {dataset.records:,} records, 6 partitions, {args.runs} runs")
    print("\n".join(grid(rows)))


if __name__ == "__main__":
    main()
