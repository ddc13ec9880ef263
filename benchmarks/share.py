"""Share groups (KIP-932, issue #23): aiokafka-lite's ShareConsumer against Kafka's own
``ShareConsumerPerformance`` tool on the same records, side by side in one run.

    python -m benchmarks.share                                   # 1,000,000 x 100 B, 3 runs
    python -m benchmarks.share --records 200000 --runs 1 --no-save

Starts Apache Kafka 4.3.1, produces N records of 100 B to a 6-partition topic once (benchmarks.data's
"100 B" set), then per run, in an order that rotates from run to run, each peer reads all N records
from a fresh share group whose ``share.auto.offset.reset`` was set to earliest before it started:

- Kafka's ``org.apache.kafka.tools.ShareConsumerPerformance`` from the broker's jars, one thread (one
  KafkaShareConsumer, implicit acknowledgement), in a JVM started as Kafka's bin scripts start it;
- aiokafka-lite's ShareConsumer, one task polling, in its own process (benchmarks/clients/lite_share.py):
  implicit mode (each poll accepts what the previous one returned), and explicit mode with
  ``acknowledge(record, "accept")`` for every record. process_share() is not a row: its workers
  take one record per poll (it is built for handlers that await), which is not the fast path.

Three figures per peer (see benchmarks/README.md, "Share groups"): records/s over the tool's own
window (subscribe to the last record: the group join and the first fetch included, the process's
start-up and the final commit not), over first record to last, and records over the whole
process's wall time. The ratio "x Java" is computed within each run on the tool's window.
Writes benchmarks/results/share.json (``--no-save``: print only).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from aiokafka_lite.testing.helpers import set_group_config
from aiokafka_lite.testing.java_clients import KAFKA_TOOL_JVM_OPTIONS, run_kafka_tool
from benchmarks.brokers import describe, start_broker
from benchmarks.data import Dataset, datasets, produce_dataset
from benchmarks.report import grid, median_and_spread
from benchmarks.throughput import Client, run_client, summary

TOOL = "org.apache.kafka.tools.ShareConsumerPerformance"
JAVA = "Kafka ShareConsumerPerformance (Java, 1 thread, implicit)"
IMPLICIT = "aiokafka-lite ShareConsumer (implicit, one task polling)"
EXPLICIT = "aiokafka-lite ShareConsumer (explicit, acknowledge() per record)"
MODES = {IMPLICIT: "implicit", EXPLICIT: "explicit"}
PEERS = (JAVA, IMPLICIT, EXPLICIT)
REPORTING_MS = 100  # the tool's progress lines: the first one marks (about) its first record
DATE_FORMAT = "%Y-%m-%d %H:%M:%S:%f"  # the tool's default yyyy-MM-dd HH:mm:ss:SSS
FIGURES = ("window_records_per_s", "records_per_s", "process_records_per_s", "window_seconds",
           "process_seconds", "cpu_seconds", "commit_seconds", "x_java_window", "x_java_steady", "x_java_process")
RESULTS = Path(__file__).parent / "results" / "share.json"


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class ToolReport:
    """What ShareConsumerPerformance printed: its final line (the whole group) and its progress lines."""

    records: int
    megabytes: float  # MiB, as the tool counts
    records_per_s: float  # the tool's nMsg.sec: records over its window, subscribe() to the last record
    window_seconds: float  # its fetch.time.ms
    start: datetime
    end: datetime
    progress: list[tuple[datetime, int]] = field(default_factory=list)  # (end of interval, records so far)
    warnings: list[str] = field(default_factory=list)

    def steady_records_per_s(self) -> float | None:
        """Records/s from the first progress line (printed with the first batch once the join took
        longer than the reporting interval) to the last record, or None without such a line."""
        if not self.progress:
            return None
        first_at, first_records = self.progress[0]
        seconds = (self.end - first_at).total_seconds()
        return (self.records - first_records) / seconds if seconds > 0 else None


def _fields(line: str) -> list[str]:
    return [part.strip() for part in line.split(",")]


def parse_tool_output(text: str) -> ToolReport:
    """Parse ShareConsumerPerformance's stdout (run with ``--show-detailed-stats``, the default date
    format): ValueError if it has no final line."""
    final: list[str] | None = None
    progress: list[tuple[datetime, int]] = []
    warnings = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("WARNING"):
            warnings.append(line)
        parts = _fields(line)
        if len(parts) != 7 or line.startswith("start.time"):
            continue
        try:
            datetime.strptime(parts[0], DATE_FORMAT)
        except ValueError:
            continue
        if "for share consumer" in parts[6]:  # a progress line: "..., <records>, <ms> for share consumer <n>"
            progress.append((datetime.strptime(parts[1], DATE_FORMAT), int(parts[5])))
        else:
            final = parts
    if final is None:
        raise ValueError(f"no final figures in ShareConsumerPerformance's output: {text.strip()[-500:]!r}")
    return ToolReport(records=int(final[5]), megabytes=float(final[2]), records_per_s=float(final[4]),
                      window_seconds=int(final[6]) / 1000, start=datetime.strptime(final[0], DATE_FORMAT),
                      end=datetime.strptime(final[1], DATE_FORMAT), progress=progress, warnings=warnings)


def fresh_group(bootstrap: str, label: str) -> str:
    group = f"share-bench-{label.split()[0].lower()}-{uuid.uuid4().hex[:8]}"
    set_group_config(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    return group


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_java(bootstrap: str, dataset: Dataset, group: str, max_poll_records: int | None) -> dict[str, Any]:
    args = ["--bootstrap-server", bootstrap, "--topic", dataset.topics[0], "--group", group,
            "--num-records", str(dataset.records), "--timeout", "60000", "--show-detailed-stats",
            "--reporting-interval", str(REPORTING_MS)]
    if max_poll_records is not None:
        args += ["--command-property", f"max.poll.records={max_poll_records}"]
    cpu0, began = _children_cpu(), time.perf_counter()
    done = run_kafka_tool(TOOL, args, timeout=900, jvm_options=KAFKA_TOOL_JVM_OPTIONS)
    wall, cpu = time.perf_counter() - began, _children_cpu() - cpu0
    try:
        report = parse_tool_output(done.stdout)
    except ValueError as exc:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        return {"error": f"exit {done.returncode}: {exc} {tail}"}
    if report.records < dataset.records:
        return {"error": f"read {report.records} of {dataset.records} records: {report.warnings}"}
    return {"records": report.records, "window_records_per_s": report.records_per_s,
            "window_seconds": report.window_seconds, "records_per_s": report.steady_records_per_s(),
            "process_seconds": wall, "process_records_per_s": report.records / wall, "cpu_seconds": cpu,
            "megabytes": report.megabytes, "warnings": report.warnings, "exit": done.returncode,
            "jvm_options": list(KAFKA_TOOL_JVM_OPTIONS), "tool_output": _excerpt(done.stdout)}


def _excerpt(stdout: str) -> list[str]:
    """The tool's header, first progress lines and final lines, as printed (kept in the JSON)."""
    lines = stdout.strip().splitlines()
    return lines if len(lines) <= 8 else [*lines[:4], "...", *lines[-3:]]


def run_ours(label: str, bootstrap: str, dataset: Dataset, group: str, max_poll_records: int | None) -> dict[str, Any]:
    options: dict[str, Any] = {"group": group, "mode": MODES[label]}
    if max_poll_records is not None:
        options["max_poll_records"] = max_poll_records
    began = time.perf_counter()
    result = run_client(label, bootstrap, dataset, client=Client("lite_share", options=options))
    wall = time.perf_counter() - began
    if "records_per_s" not in result:
        return result
    # The harness's wall ("seconds") runs from before the consumer is made to the last record: the
    # tool's window (subscribe to the last record; making a consumer connects to nothing).
    return {**result, "window_seconds": result["seconds"], "window_records_per_s": result["whole_read_records_per_s"],
            "process_seconds": wall, "process_records_per_s": result["records"] / wall}


def _ratios(run: dict[str, dict[str, Any]]) -> None:
    java = run.get(JAVA, {})
    for result in run.values():
        for ratio, figure in (("x_java_window", "window_records_per_s"), ("x_java_steady", "records_per_s"),
                              ("x_java_process", "process_records_per_s")):
            if result.get(figure) and java.get(figure):
                result[ratio] = result[figure] / java[figure]


def measure(bootstrap: str, dataset: Dataset, runs: int, max_poll_records: int | None) -> list[dict[str, Any]]:
    raw = []
    for k in range(runs):
        order = PEERS[k % len(PEERS):] + PEERS[:k % len(PEERS)]  # rotate: drift hits every peer alike
        run: dict[str, dict[str, Any]] = {}
        for label in order:
            _log(f"run {k + 1}/{runs}: {label}")
            group = fresh_group(bootstrap, label)
            run[label] = (run_java(bootstrap, dataset, group, max_poll_records) if label == JAVA
                          else run_ours(label, bootstrap, dataset, group, max_poll_records))
            rate = run[label].get("window_records_per_s")
            _log(f"    {rate:,.0f} records/s over the tool's window" if rate else f"    {run[label].get('error')}")
        _ratios(run)
        raw.append({label: run[label] for label in PEERS})
    return raw


def summarise(raw: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label in PEERS:
        ok = [run[label] for run in raw if "window_records_per_s" in run[label]]
        entry: dict[str, Any] = {"runs": len(raw), "ok_runs": len(ok)}
        if errors := [run[label]["error"] for run in raw if "error" in run[label]]:
            entry["errors"] = errors
        for figure in FIGURES:
            if values := [r[figure] for r in ok if r.get(figure) is not None]:
                entry[figure] = summary(values)
        out[label] = entry
    return out


def table(rows: dict[str, Any]) -> str:
    header = ("peer", "records/s, tool's window", "records/s, first to last record", "records/s, whole process",
              "window s", "process s", "CPU s", "x Java (window)", "x Java (first to last)", "x Java (process)")
    lines: list[tuple[str, ...]] = [header]
    for label, entry in rows.items():
        if not entry["ok_runs"]:
            lines.append((label, "failed: " + "; ".join(entry.get("errors", []))[:150], *[""] * 8))
            continue
        cells = [median_and_spread(entry, figure, digits=digits) or "-" for figure, digits in (
            ("window_records_per_s", 0), ("records_per_s", 0), ("process_records_per_s", 0), ("window_seconds", 2),
            ("process_seconds", 2), ("cpu_seconds", 2), ("x_java_window", 2), ("x_java_steady", 2),
            ("x_java_process", 2))]
        lines.append((label, *cells))
    return "\n".join(grid(lines))


NOTES = """\
tool's window: subscribe() to the last record (the tool's own nMsg.sec and fetch.time.ms; for ours the
  same span, from making the consumer to its last record): the group join and first fetch are in it,
  the process's start-up and the final commit are not. "x Java" uses this figure.
first to last record: for the tool, from its first progress line (it prints one every 100 ms once
  records come: about its first batch) to its last record; for ours, from the first batch to the last.
whole process: records / the process's wall time from our side (JVM or Python start-up, join, read,
  final commit and close). CPU s: the process's user + system time (the JVM's: all its threads)."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.share", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-poll-records", type=int, default=None,
                        help="max.poll.records for both (default: each one's own, 500 in both)")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    dataset = datasets(args.records, ["100 B"])[0]
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    load_before = os.getloadavg()
    _log(f"starting {describe('kafka')}")
    with start_broker("kafka") as broker:
        bootstrap = broker.bootstrap_servers
        _log(f"producing {dataset.describe()}")
        produced = produce_dataset(bootstrap, dataset)
        raw = measure(bootstrap, dataset, args.runs, args.max_poll_records)
    rows = summarise(raw)
    print(f"\n{describe('kafka')}; {dataset.records:,} records x {dataset.value_size} B, {dataset.partitions} "
          f"partitions; {args.runs} run(s), median (min-max); a fresh share group per peer per run")
    print(table(rows))
    print(NOTES)
    ours = rows[IMPLICIT].get("x_java_window")
    if ours:
        print(f"\nimplicit ShareConsumer / ShareConsumerPerformance over the tool's window: "
              f"{ours['median']:.2f}x (median of the per-run ratios)")
    if not args.no_save:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps({
            "broker": describe("kafka"), "records": dataset.records, "value_size": dataset.value_size,
            "partitions": dataset.partitions, "runs": args.runs, "max_poll_records": args.max_poll_records,
            "started": started, "produce_seconds": produced, "cpus": os.cpu_count(),
            "load_average": {"before": load_before, "after": os.getloadavg()},
            "python": sys.version.split()[0], "peers": rows, "raw": raw}, indent=1, default=str) + "\n")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
