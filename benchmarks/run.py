"""One command for the whole benchmark: ``python -m benchmarks.run [--broker kafka|tansu] [--records N]
[--runs K] [--quick] [--only PART ...] [--sets NAME ...]``.

Starts its own broker, produces the data sets once, then measures throughput (every client in its
own process), scale (the same records over 1,200 partitions), liveness, the blocked-loop row and
idle cost; prints tables, writes
``benchmarks/results/<timestamp>.json`` + ``latest.json`` and PNG charts next to them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import blocked, liveness, report, throughput
from benchmarks.brokers import describe, start_broker
from benchmarks.data import SET_NAMES, SIX_PARTITIONS, Dataset, datasets, produce_dataset, scale_datasets
from benchmarks.peers import new_topic

RESULTS = Path(__file__).resolve().parent / "results"
PARTS = ("throughput", "scale", "liveness", "blocked", "idle")
IDLE_CLIENTS = ("aiokafka-lite", "aiokafka-lite thread", "aiokafka")


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", choices=("kafka", "tansu"), default="kafka")
    parser.add_argument("--records", type=int, default=None,
                        help="100 B records (default 1,000,000; 1 KB: N/5; 10 KB: N/25)")
    parser.add_argument("--runs", type=int, default=None, help="runs per throughput figure (default 3)")
    parser.add_argument("--quick", action="store_true", help="100,000 records, 1 run, 10 s idle window")
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS), help="measure only these parts")
    parser.add_argument("--sets", nargs="+", choices=SET_NAMES, default=list(SET_NAMES),
                        help="the throughput part's data sets (default all)")
    parser.add_argument("--clients", nargs="+", choices=list(throughput.CLIENTS), default=list(throughput.CLIENTS))
    parser.add_argument("--bootstrap", help="use this running broker instead of starting one")
    parser.add_argument("--no-save", action="store_true", help="print only; write no JSON or PNG")
    parser.add_argument("--render", metavar="JSON", help="measure nothing: print and chart a saved result")
    args = parser.parse_args(argv)
    args.records = args.records or (100_000 if args.quick else 1_000_000)
    args.runs = args.runs or (1 if args.quick else 3)
    return args


def _idle(bootstrap: str, seconds: float) -> dict[str, Any]:
    """Each idle consumer in its own process, all at once (they are idle: they do not disturb each other)."""
    topic = new_topic(bootstrap, "idle")
    kinds = {"aiokafka-lite": "lite", "aiokafka-lite thread": "lite-thread", "aiokafka": "aiokafka"}
    procs = {label: subprocess.Popen(
        [sys.executable, "-m", "benchmarks.idle",
         json.dumps({"client": kinds[label], "bootstrap": bootstrap, "topic": topic, "seconds": seconds})],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=throughput.ROOT) for label in IDLE_CLIENTS}
    out: dict[str, Any] = {}
    for label, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=seconds + 120)
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        out[label] = json.loads(lines[-1]) if lines else {"error": stderr.strip().splitlines()[-1:]}
    return out


def _produce(bootstrap: str, sets: list[Dataset]) -> None:
    for dataset in sets:
        _log(f"producing {dataset.describe()}")
        seconds = produce_dataset(bootstrap, dataset)
        _log(f"    {seconds:.1f} s")


def _machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def measure(args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    results: dict[str, Any] = {"broker": describe(args.broker), "runs": args.runs, "machine": _machine(),
                               "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    began = time.monotonic()
    six: Dataset | None = None
    if "throughput" in args.only:
        sets = datasets(args.records, args.sets)
        _produce(bootstrap, sets)
        six = next((dataset for dataset in sets if dataset.name == SIX_PARTITIONS), None)
        results["throughput"] = throughput.measure(bootstrap, sets, args.runs, args.clients, _log)
    if "scale" in args.only:
        sets = scale_datasets(args.records, six)
        _produce(bootstrap, [dataset for dataset in sets if dataset is not six])
        clients = [label for label in throughput.SCALE_CLIENTS if label in args.clients]
        results["scale"] = throughput.measure_scale(bootstrap, sets, args.runs, clients, _log)
    if "liveness" in args.only:
        results["liveness"] = asyncio.run(liveness.run_all(bootstrap, args.quick, _log))
    if "blocked" in args.only:
        results["blocked_loop"] = asyncio.run(blocked.run_all(bootstrap, _log))
    if "idle" in args.only:
        seconds = 10.0 if args.quick else 30.0
        _log(f"idle cost: {seconds:.0f} s window")
        results["idle"] = _idle(bootstrap, seconds)
    results["wall_seconds"] = time.monotonic() - began
    return results


def save(results: dict[str, Any]) -> list[Path]:
    RESULTS.mkdir(exist_ok=True)
    text = json.dumps(results, indent=1)
    stamp = results["started"].replace(":", "").replace("-", "")
    paths = [RESULTS / f"{stamp}.json", RESULTS / "latest.json"]
    for path in paths:
        path.write_text(text + "\n")
    return paths + _charts(results)


def _charts(results: dict[str, Any]) -> list[Path]:
    """The PNG charts, or none (with a note) when matplotlib is not installed."""
    try:
        from benchmarks import charts
    except ImportError as exc:
        _log(f"no charts: {exc} (pip install -e '.[bench]')")
        return []
    return charts.write_all(results, RESULTS)


def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    if args.render:
        results = json.loads(Path(args.render).read_text())
        print(report.render(results))
        if not args.no_save:
            for path in _charts(results):
                print(f"wrote {path}")
        return
    if args.bootstrap:
        results = measure(args, args.bootstrap)
    else:
        _log(f"starting {describe(args.broker)}")
        broker = start_broker(args.broker)
        try:
            results = measure(args, broker.bootstrap_servers)
        finally:
            broker.stop()
    print(report.render(results))
    print(f"\nbenchmark wall time: {results['wall_seconds']:.0f} s")
    if not args.no_save:
        for path in save(results):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
