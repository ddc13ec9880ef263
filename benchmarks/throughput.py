"""Throughput: every client in its own process, same topic, same broker, run after run.

Clients run interleaved within each run (run 1: all clients on all data sets, then run 2 ...), so
drift on a shared machine hits them alike; ratios are computed within a run, then summarised.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from benchmarks.clients._harness import Spec
from benchmarks.data import PARTITIONS, Dataset

LITE = "aiokafka-lite"
LIMIT = "limit (bare Fetch)"
# label -> (module under benchmarks.clients, run on uvloop)
CLIENTS: dict[str, tuple[str, bool]] = {
    LIMIT: ("limit", False),
    LITE: ("lite", False),
    "aiokafka-lite uvloop": ("lite", True),
    "confluent-kafka": ("confluent", False),
    "aiokafka": ("aiokafka_peer", False),
    "kafka-python": ("kafka_python", False),
}
FIGURES = ("records_per_s", "mb_per_s", "cpu_seconds", "peak_rss_mb", "startup_seconds")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_client(label: str, bootstrap: str, dataset: Dataset, timeout: float = 900.0) -> dict[str, Any]:
    module, uvloop = CLIENTS[label]
    spec = Spec(bootstrap=bootstrap, topic=dataset.topic, partitions=PARTITIONS, records=dataset.records,
                uvloop=uvloop, value_size=dataset.value_size)
    proc = subprocess.run([sys.executable, "-m", f"benchmarks.clients.{module}", json.dumps(asdict(spec))],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _with_ratios(run: dict[str, dict[str, Any]]) -> None:
    """Add, within one run, each client's ratio to aiokafka-lite and its fraction of the limit."""
    lite = run.get(LITE, {}).get("records_per_s")
    limit = run.get(LIMIT, {}).get("records_per_s")
    for result in run.values():
        rate = result.get("records_per_s")
        if rate is None:
            continue
        if lite:
            result["vs_lite"] = rate / lite
            result["lite_vs_this"] = lite / rate
        if limit:
            result["fraction_of_limit"] = rate / limit


def measure(bootstrap: str, sets: list[Dataset], runs: int, clients: list[str],
            log: Callable[[str], None]) -> dict[str, Any]:
    raw: dict[str, list[dict[str, dict[str, Any]]]] = {d.name: [] for d in sets}
    for k in range(runs):
        for dataset in sets:
            run: dict[str, dict[str, Any]] = {}
            for label in clients:
                log(f"throughput run {k + 1}/{runs}: {dataset.name}: {label}")
                run[label] = run_client(label, bootstrap, dataset)
                rate = run[label].get("records_per_s")
                log(f"    {run[label]['error']}" if rate is None else f"    {rate:,.0f} records/s")
            _with_ratios(run)
            raw[dataset.name].append(run)
    return {d.name: _summarise(raw[d.name], clients, d) for d in sets}


def _summarise(runs: list[dict[str, dict[str, Any]]], clients: list[str], dataset: Dataset) -> dict[str, Any]:
    out: dict[str, Any] = {"records": dataset.records, "value_size": dataset.value_size,
                           "compression": dataset.compression, "clients": {}}
    for label in clients:
        ok = [run[label] for run in runs if "error" not in run[label]]
        entry: dict[str, Any] = {"runs": len(runs), "ok_runs": len(ok)}
        errors = [run[label]["error"] for run in runs if "error" in run[label]]
        if errors:
            entry["errors"] = errors
        for figure in (*FIGURES, "vs_lite", "lite_vs_this", "fraction_of_limit"):
            values = [r[figure] for r in ok if r.get(figure) is not None]
            if values:
                entry[figure] = summary(values)
        out["clients"][label] = entry
    return out
