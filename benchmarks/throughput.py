"""Throughput: every client in its own process, same topic, same broker, run after run.

Clients run interleaved within each run (run 1: all clients on all data sets, then run 2 ...), so
drift on a shared machine hits them alike; ratios are computed within a run, then summarised.

Adding a client is one module under ``benchmarks/clients/`` (``consume(spec, watch)`` handed to
``_harness.run``) and one line in ``CLIENTS`` below.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.clients._harness import Spec
from benchmarks.data import Dataset


@dataclass(frozen=True)
class Client:
    module: str  # under benchmarks.clients
    uvloop: bool = False
    env: Mapping[str, str] = field(default_factory=dict)  # added to the client process's environment
    options: Mapping[str, Any] = field(default_factory=dict)  # client settings (Spec.options)
    # Source trees whose aiokafka_lite this process imports (the first one's), ahead of this checkout;
    # empty: this checkout's. benchmarks.compare runs two trees side by side with it.
    pythonpath: tuple[str, ...] = ()


# fetch.queue.backoff.ms that maximised confluent-kafka's records/s on the 100 B data set in a sweep
# over 0/1/10/100 (``python -m benchmarks.sweep``; the result is in benchmarks/README.md).
TUNED_BACKOFF_MS = 10
_TUNED = {"fetch.queue.backoff.ms": TUNED_BACKOFF_MS}
_NATIVE = {"AIOKAFKA_LITE_NO_NATIVE": "0"}  # the JSON's "decoder" says whether it was built
_PURE = {"AIOKAFKA_LITE_NO_NATIVE": "1"}

LITE = "aiokafka-lite (native)"
LITE_PURE = "aiokafka-lite (pure Python)"
# LITE runs the default, fetch_connections_per_broker="auto"; these pin one or two connections.
LITE_ONE = "aiokafka-lite (native, fetch_connections_per_broker=1)"
LITE_TWO = "aiokafka-lite (native, fetch_connections_per_broker=2)"
_ONE = {"fetch_connections_per_broker": 1}
_TWO = {"fetch_connections_per_broker": 2}
LIMIT = "limit (threaded Fetch loop, 2 sockets per broker)"
LIMIT_ONE_SOCKET = "limit (threaded Fetch loop, 1 socket per broker)"
BARE_FETCH = "limit (asyncio Fetch loop, aiokafka-lite connection)"
CEILING = "ceiling (loopback copy rate)"
# A run's limit on a data set is the fastest of these bare-Fetch loops there (all read what the
# clients read from the broker and decode no record; which is fastest varies from run to run on a
# shared machine); the ceiling is no Fetch: it is not among them.
LIMITS = (LIMIT, LIMIT_ONE_SOCKET, BARE_FETCH)
REFERENCES = (*LIMITS, CEILING)  # the rows that are no client: never flagged above the limit


def is_reference(label: str) -> bool:
    """A limit or ceiling row, also under the labels of saved results from before issue 24."""
    return label in REFERENCES or label.startswith(("limit ", "ceiling "))
CONFLUENT_TUNED = f"confluent-kafka (tuned fetch.queue.backoff.ms={TUNED_BACKOFF_MS})"
CLIENTS: dict[str, Client] = {
    LIMIT: Client("limit"),
    LIMIT_ONE_SOCKET: Client("limit", options={"connections": 1}),
    BARE_FETCH: Client("bare_fetch"),
    CEILING: Client("ceiling"),
    LITE: Client("lite", env=_NATIVE),
    LITE_PURE: Client("lite", env=_PURE),
    "aiokafka-lite (native, uvloop)": Client("lite", uvloop=True, env=_NATIVE),
    "aiokafka-lite poll_arrow (native)": Client("lite_arrow", env=_NATIVE),
    LITE_ONE: Client("lite", env=_NATIVE, options=_ONE),
    LITE_TWO: Client("lite", env=_NATIVE, options=_TWO),
    "aiokafka-lite poll_arrow (native, fetch_connections_per_broker=2)": Client("lite_arrow", env=_NATIVE,
                                                                                 options=_TWO),
    "confluent-kafka (defaults)": Client("confluent"),
    CONFLUENT_TUNED: Client("confluent", options=_TUNED),
    "confluent-kafka AIO (defaults)": Client("confluent_aio"),
    f"confluent-kafka AIO (tuned fetch.queue.backoff.ms={TUNED_BACKOFF_MS})": Client("confluent_aio", options=_TUNED),
    "aiokafka": Client("aiokafka_peer"),
    "kafka-python": Client("kafka_python"),
}
SCALE_CLIENTS = (LIMIT, LIMIT_ONE_SOCKET, LITE, LITE_TWO, LITE_PURE, CONFLUENT_TUNED)
FIGURES = ("records_per_s", "mb_per_s", "cpu_seconds", "cpu_seconds_per_m_records", "peak_rss_mb",
           "startup_seconds", "whole_read_records_per_s")
RATIOS = ("vs_lite", "lite_vs_this", "fraction_of_limit", "vs_confluent_tuned", "whole_read_vs_confluent_tuned",
          "vs_6_partitions", "cpu_vs_6_partitions")
IDENTITY = ("decoder", "why_python", "native_file", "native_from_other_checkout",
            "loop", "version", "librdkafka", "c_extension", "options")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_client(label: str, bootstrap: str, dataset: Dataset, timeout: float = 900.0,
               client: Client | None = None) -> dict[str, Any]:
    """Run one client process (``CLIENTS[label]`` unless ``client`` is given) and return its figures,
    ``{"error": ...}`` if it failed, or ``{"skipped": reason}`` if it cannot read this data set here."""
    client = client or CLIENTS[label]
    spec = Spec(bootstrap=bootstrap, topics=list(dataset.topics), partitions=dataset.partitions,
                records=dataset.records, batch=dataset.batch, uvloop=client.uvloop, value_size=dataset.value_size,
                compression=dataset.compression, options=dict(client.options), label=label)
    env = {**os.environ, **client.env}
    cwd = ROOT
    if client.pythonpath:
        # The tree first, this checkout (for benchmarks/) last; the working directory is the tree's
        # too, since ``python -m`` puts it ahead of PYTHONPATH.
        env["PYTHONPATH"] = os.pathsep.join((*client.pythonpath, ROOT))
        cwd = client.pythonpath[0]
    proc = subprocess.run([sys.executable, "-m", f"benchmarks.clients.{client.module}", json.dumps(asdict(spec))],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)}"}
    result: dict[str, Any] = json.loads(lines[-1])
    if result.get("seconds"):
        # From the consumer's creation to the last record: a client that prefetches during its
        # start-up (librdkafka, before its first message comes out) gets no head start here.
        result["whole_read_records_per_s"] = result["records"] / result["seconds"]
    return result


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def run_limit(run: dict[str, dict[str, Any]]) -> float | None:
    """The limit of one run on one data set: the most records/s of the ``LIMITS`` rows that ran."""
    rates = [run[label]["records_per_s"] for label in LIMITS if run.get(label, {}).get("records_per_s")]
    return max(rates, default=None)


def _with_ratios(run: dict[str, dict[str, Any]]) -> None:
    """Add, within one run, each row's ratio to aiokafka-lite (native), its fraction of the limit
    and its ratio to confluent-kafka (tuned)."""
    lite = run.get(LITE, {}).get("records_per_s")
    limit = run_limit(run)
    confluent = run.get(CONFLUENT_TUNED, {}).get("records_per_s")
    confluent_whole = run.get(CONFLUENT_TUNED, {}).get("whole_read_records_per_s")
    for result in run.values():
        rate = result.get("records_per_s")
        if rate is None:
            continue
        if lite:
            result["vs_lite"] = rate / lite
            result["lite_vs_this"] = lite / rate
        if limit:
            result["fraction_of_limit"] = rate / limit
        if confluent:
            result["vs_confluent_tuned"] = rate / confluent
        whole = result.get("whole_read_records_per_s")
        if whole and confluent_whole:
            result["whole_read_vs_confluent_tuned"] = whole / confluent_whole


def _one_run(bootstrap: str, dataset: Dataset, clients: list[str], log: Callable[[str], None],
             step: str) -> dict[str, dict[str, Any]]:
    run: dict[str, dict[str, Any]] = {}
    for label in clients:
        log(f"{step}: {dataset.name}: {label}")
        run[label] = run_client(label, bootstrap, dataset)
        log(f"    {outcome(run[label])}")
    _with_ratios(run)
    for label, fraction in above_limit(run).items():
        log(f"!! {dataset.name}: {label} read {fraction:.2f}x the limit: the limit is no limit")
    return run


def outcome(result: dict[str, Any]) -> str:
    """One client run in a log line: its records/s, its error, or why it was skipped."""
    if "records_per_s" in result:
        return f"{result['records_per_s']:,.0f} records/s"
    return f"skipped: {result['skipped']}" if "skipped" in result else str(result.get("error"))


def above_limit(run: dict[str, dict[str, Any]]) -> dict[str, float]:
    """The rows of one run (with its ratios) that are no reference and read more than the limit."""
    return {label: result["fraction_of_limit"] for label, result in run.items()
            if not is_reference(label) and result.get("fraction_of_limit", 0.0) > 1.0}


def measure(bootstrap: str, sets: list[Dataset], runs: int, clients: list[str],
            log: Callable[[str], None]) -> dict[str, Any]:
    raw: dict[str, list[dict[str, dict[str, Any]]]] = {d.name: [] for d in sets}
    for k in range(runs):
        for dataset in sets:
            raw[dataset.name].append(_one_run(bootstrap, dataset, clients, log, f"throughput run {k + 1}/{runs}"))
    return {d.name: _summarise(raw[d.name], clients, d) for d in sets}


def _vs_six(six: dict[str, dict[str, Any]], wide: dict[str, dict[str, Any]]) -> None:
    """Within one run: each client's records/s and CPU per record on the wide set over the 6-partition set's."""
    for label, result in wide.items():
        base = six.get(label, {})
        if "records_per_s" in result and "records_per_s" in base:
            result["vs_6_partitions"] = result["records_per_s"] / base["records_per_s"]
            result["cpu_vs_6_partitions"] = result["cpu_seconds_per_m_records"] / base["cpu_seconds_per_m_records"]


def measure_scale(bootstrap: str, sets: list[Dataset], runs: int, clients: list[str],
                  log: Callable[[str], None]) -> dict[str, Any]:
    """``sets`` is (the 6-partition case, the many-partition case); each run measures both."""
    six, wide = sets
    raw: dict[str, list[dict[str, dict[str, Any]]]] = {six.name: [], wide.name: []}
    for k in range(runs):
        for dataset in sets:
            raw[dataset.name].append(_one_run(bootstrap, dataset, clients, log, f"scale run {k + 1}/{runs}"))
        _vs_six(raw[six.name][-1], raw[wide.name][-1])
    return {d.name: _summarise(raw[d.name], clients, d) for d in sets}


def _identity(ok: list[dict[str, Any]]) -> dict[str, Any]:
    """What actually ran (decoder, loop, versions, options), as reported by the client processes."""
    out: dict[str, Any] = {}
    for key in IDENTITY:
        values = [r[key] for r in ok if key in r]
        distinct = [v for i, v in enumerate(values) if v not in values[:i]]
        if distinct:
            out[key] = distinct[0] if len(distinct) == 1 else distinct
    return out


def _summarise(runs: list[dict[str, dict[str, Any]]], clients: list[str], dataset: Dataset) -> dict[str, Any]:
    out: dict[str, Any] = {"records": dataset.records, "value_size": dataset.value_size,
                           "compression": dataset.compression, "topics": len(dataset.topics),
                           "partitions": dataset.total_partitions, "batch": dataset.batch, "clients": {}}
    for label in clients:
        ok = [run[label] for run in runs if "records_per_s" in run[label]]
        entry: dict[str, Any] = {"runs": len(runs), "ok_runs": len(ok), **_identity(ok)}
        errors = [run[label]["error"] for run in runs if "error" in run[label]]
        if errors:
            entry["errors"] = errors
        if skipped := [run[label]["skipped"] for run in runs if "skipped" in run[label]]:
            entry["skipped"] = skipped[0]  # the same reason every run: the environment does not change
        for figure in (*FIGURES, *RATIOS):
            values = [r[figure] for r in ok if r.get(figure) is not None]
            if values:
                entry[figure] = summary(values)
        out["clients"][label] = entry
    return out
