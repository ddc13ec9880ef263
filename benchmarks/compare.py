"""Two source trees of aiokafka-lite side by side in one run: ``python -m benchmarks.compare --base REV``.

For a change that must not cost speed (a refactoring): the working tree (or ``--new REV``) against
the git revision ``--base REV``, exported with ``git archive`` into a temporary directory with this
checkout's built native extension copied in. One broker, the data produced once, then N rounds; in
each round every row runs once, old then new, each in its own process importing only its own tree.
``--base-native``/``--new-native`` give a side another build of the extension (a change to native/ only).
The figure that matters is new/old: the ratio of records/s within each round, median and min-max.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import throughput
from benchmarks.brokers import describe, start_broker
from benchmarks.data import SET_NAMES, Dataset, datasets, produce_dataset, scale_datasets
from benchmarks.report import grid, median_and_spread

RESULTS = Path(throughput.ROOT) / "benchmarks" / "results"
SIZES = SET_NAMES  # "100 B", "1 KB", "10 KB", "100 B lz4", "100 B zstd": benchmarks.data.datasets' names
DEFAULT_SIZES = ("100 B", "1 KB", "10 KB")
METHODS = {"poll()": "lite", "poll_arrow()": "lite_arrow"}  # the row -> its module in benchmarks/clients
PEER = throughput.CONFLUENT_TUNED
WORKING_TREE = "working tree"


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the old side: a git revision of this repository")
    parser.add_argument("--new", default=None, help="the new side: a git revision (default: the working tree)")
    parser.add_argument("--rounds", type=int, default=5, help="old/new pairs per row (default 5)")
    parser.add_argument("--records", type=int, default=1_000_000,
                        help="100 B records (default 1,000,000; 1 KB: N/5; 10 KB: N/25)")
    parser.add_argument("--sizes", nargs="+", choices=SIZES, default=list(DEFAULT_SIZES),
                        help=f"the data sets (default {', '.join(DEFAULT_SIZES)})")
    parser.add_argument("--scale", action="store_true",
                        help="also the scale set: N x 100 B over 1,200 partitions (200 topics x 6)")
    parser.add_argument("--decoder", choices=("native", "python"), default="native",
                        help="the record decoder both sides run (default native)")
    parser.add_argument("--no-arrow", action="store_true", help="measure poll() only, not poll_arrow()")
    parser.add_argument("--no-peer", action="store_true", help=f"no {PEER} row")
    parser.add_argument("--base-native", type=Path, default=None,
                        help="the old side's built extension (.so) instead of this checkout's")
    parser.add_argument("--new-native", type=Path, default=None,
                        help="the new side's built extension (.so); with it the new side is exported too")
    parser.add_argument("--bootstrap", help="use this running broker instead of starting one")
    parser.add_argument("--save", action="store_true", help="also write benchmarks/results/compare-<time>.json")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.records < 1:
        parser.error("--rounds and --records must be at least 1")
    for native in (args.base_native, args.new_native):
        if native is not None and not native.is_file():
            parser.error(f"{native}: no such built extension")
    return args


@dataclass(frozen=True)
class Side:
    name: str  # "old" or "new"
    source: str  # the revision as given, or "working tree"
    commit: str  # the commit it resolved to ("" for the working tree)
    tree: str  # the directory whose aiokafka_lite/ this side imports

    @property
    def label(self) -> str:
        return f"{self.name} ({self.source}{f' = {self.commit}' if self.commit and self.commit != self.source else ''})"


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", throughput.ROOT, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def export_tree(revision: str, into: Path, native: Path | None = None) -> str:
    """``aiokafka_lite/`` at ``revision`` under ``into``, with this checkout's built extension(s) copied in
    (git has no ``.so``), or ``native`` as the extension; returns the short commit."""
    commit = _git("rev-parse", "--short", f"{revision}^{{commit}}")
    into.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", throughput.ROOT, "archive", commit, "aiokafka_lite"],
                               stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, check=True)
    assert archive.stdout is not None
    archive.stdout.close()
    if archive.wait() != 0:
        raise SystemExit(f"git archive {commit} failed")
    package = Path(throughput.ROOT) / "aiokafka_lite"
    for built in package.rglob("*.so"):
        target = into / "aiokafka_lite" / built.relative_to(package)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(native if native is not None and built.name.startswith("_native.") else built, target)
    return commit


def sides(args: argparse.Namespace, scratch: Path) -> tuple[Side, Side]:
    old = Side("old", args.base, export_tree(args.base, scratch / "old", args.base_native), str(scratch / "old"))
    if args.new is None and args.new_native is None:
        return old, Side("new", WORKING_TREE, "", throughput.ROOT)
    new = args.new or "HEAD"
    return old, Side("new", new, export_tree(new, scratch / "new", args.new_native), str(scratch / "new"))


def row_label(method: str, side: Side) -> str:
    return f"{method} {side.label}"


def rows(old: Side, new: Side, decoder: str, arrow: bool, peer: bool) -> dict[str, throughput.Client]:
    """Every row of one round in the order it runs: per method old then new, then the peer."""
    env = {"AIOKAFKA_LITE_NO_NATIVE": "1" if decoder == "python" else "0"}
    out: dict[str, throughput.Client] = {}
    for method, module in METHODS.items():
        if method == "poll_arrow()" and not arrow:
            continue
        for side in (old, new):
            out[row_label(method, side)] = throughput.Client(module, env=env, pythonpath=(side.tree,))
    if peer:
        out[PEER] = throughput.CLIENTS[PEER]
    return out


def check_sides(run: dict[str, dict[str, Any]], clients: dict[str, throughput.Client], decoder: str) -> None:
    """Refuse (SystemExit) when a side imported another tree than its own, or ran another decoder."""
    for label, client in clients.items():
        result = run.get(label, {})
        if not client.pythonpath or "error" in result:
            continue
        expected = Path(client.pythonpath[0]) / "aiokafka_lite"
        if Path(result.get("package", "")).resolve() != expected.resolve():
            raise SystemExit(f"{label} imported aiokafka_lite from {result.get('package')}, not {expected}")
        if result.get("decoder") != decoder:
            why = result.get("why_python") or "?"
            raise SystemExit(f"{label} ran the {result.get('decoder')} decoder, not {decoder} ({why}): "
                             "both sides must run the same one")


def measure(bootstrap: str, sets: list[Dataset], rounds: int, clients: dict[str, throughput.Client],
            decoder: str, log: Callable[[str], None]) -> dict[str, list[dict[str, dict[str, Any]]]]:
    """Round after round, each data set, each row in ``clients``' order: the raw results per round."""
    raw: dict[str, list[dict[str, dict[str, Any]]]] = {d.name: [] for d in sets}
    for k in range(rounds):
        for dataset in sets:
            run: dict[str, dict[str, Any]] = {}
            for label, client in clients.items():
                log(f"round {k + 1}/{rounds}: {dataset.name}: {label}")
                run[label] = throughput.run_client(label, bootstrap, dataset, client=client)
                log(f"    {throughput.outcome(run[label])}")
            check_sides(run, clients, decoder)
            raw[dataset.name].append(run)
    return raw


def _ratios(rounds: list[dict[str, dict[str, Any]]], top: str, bottom: str,
            figure: str = "records_per_s") -> list[float]:
    """``top``'s ``figure`` over ``bottom``'s, within each round where both ran."""
    out = []
    for run in rounds:
        a, b = run.get(top, {}).get(figure), run.get(bottom, {}).get(figure)
        if a is not None and b:
            out.append(a / b)
    return out


def summarise(rounds: list[dict[str, dict[str, Any]]], pairs: list[tuple[str, str]],
              peer: str | None) -> dict[str, Any]:
    """Per row: records/s (median, min, max), what ran, errors; for each (old, new) pair the new row's
    ``new_vs_old`` and ``cpu_new_vs_old`` (CPU seconds per record: less moved by other work on the
    machine than records/s); the peer's ``vs_new`` (over the first pair's new row, as "x lite" elsewhere)."""
    labels = [label for pair in pairs for label in pair] + ([peer] if peer else [])
    out: dict[str, Any] = {}
    for label in labels:
        ok = [run[label] for run in rounds if "records_per_s" in run.get(label, {})]
        entry: dict[str, Any] = {"rounds": len(rounds), "ok_rounds": len(ok)}
        if ok:
            entry["records_per_s"] = throughput.summary([r["records_per_s"] for r in ok])
            entry.update({key: ok[0][key] for key in ("decoder", "package", "version") if key in ok[0]})
        errors = [run[label]["error"] for run in rounds if "error" in run.get(label, {})]
        if errors:
            entry["errors"] = errors
        out[label] = entry
    for old, new in pairs:
        if ratios := _ratios(rounds, new, old):
            out[new]["new_vs_old"] = throughput.summary(ratios)
        if ratios := _ratios(rounds, new, old, "cpu_seconds_per_m_records"):
            out[new]["cpu_new_vs_old"] = throughput.summary(ratios)
    if peer and pairs and (ratios := _ratios(rounds, peer, pairs[0][1])):
        out[peer]["vs_new"] = throughput.summary(ratios)
    return out


def _spread(entry: dict[str, Any], figure: str, digits: int) -> str:
    return median_and_spread(entry, figure, digits=digits, count="ok_rounds")


def table(name: str, data: dict[str, Any]) -> str:
    """One data set's rows; new/old and x new are ratios taken within each round, then summarised."""
    header = ("row", "decoder", "records/s median (min-max)", "new/old (min-max)", "CPU/rec new/old", "x new poll()",
              "ok")
    lines: list[tuple[str, ...]] = [header]
    for label, entry in data["rows"].items():
        lines.append((label, entry.get("decoder", "-"), _spread(entry, "records_per_s", 0) or "failed",
                      _spread(entry, "new_vs_old", 3), _spread(entry, "cpu_new_vs_old", 3), _spread(entry, "vs_new", 2),
                      f"{entry['ok_rounds']}/{entry['rounds']}"))
    title = (f"\n{name}: {data['records']:,} records, {data['partitions']} partitions, {data['compression']} "
             "compression; new/old = new records/s / old's in the same round, CPU/rec new/old = the same for "
             "CPU seconds per record, x new = records/s / new poll()'s")
    failures = [f"  {label} failed: " + str(entry["errors"][-1]).split(" | ")[-1][:200]
                for label, entry in data["rows"].items() if "errors" in entry]
    return "\n".join([title, *grid(lines, left=2), *failures])


def render(results: dict[str, Any]) -> str:
    head = (f"old: {results['old']}   new: {results['new']}   rounds: {results['rounds']}   "
            f"broker: {results['broker']}   machine: {results['machine']}")
    return "\n".join([head, *(table(name, data) for name, data in results["sets"].items())])


def run(args: argparse.Namespace, bootstrap: str, broker: str) -> dict[str, Any]:
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    with tempfile.TemporaryDirectory(prefix="aiokafka-lite-compare-") as scratch:
        old, new = sides(args, Path(scratch))
        _log(f"old: {old.label} in {old.tree}; new: {new.label} in {new.tree}")
        clients = rows(old, new, args.decoder, not args.no_arrow, not args.no_peer)
        sets = datasets(args.records, args.sizes)
        if args.scale:
            sets.append(scale_datasets(args.records)[1])
        for dataset in sets:
            _log(f"producing {dataset.describe()}")
            produce_dataset(bootstrap, dataset)
        began = time.monotonic()
        raw = measure(bootstrap, sets, args.rounds, clients, args.decoder, _log)
    pairs = [(row_label(m, old), row_label(m, new)) for m in METHODS if m == "poll()" or not args.no_arrow]
    peer = None if args.no_peer else PEER
    return {"old": old.label, "new": new.label, "rounds": args.rounds, "broker": broker,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
            "decoder": args.decoder, "started": started, "wall_seconds": time.monotonic() - began,
            "sets": {d.name: {"records": d.records, "value_size": d.value_size, "compression": d.compression,
                              "batch": d.batch,
                              "partitions": d.total_partitions, "rows": summarise(raw[d.name], pairs, peer)}
                     for d in sets}}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.bootstrap:
        results = run(args, args.bootstrap, args.bootstrap)
    else:
        _log(f"starting {describe('kafka')}")
        broker = start_broker("kafka")
        try:
            results = run(args, broker.bootstrap_servers, describe("kafka"))
        finally:
            broker.stop()
    print(render(results))
    print(f"\nmeasuring wall time: {results['wall_seconds']:.0f} s")
    if args.save:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"compare-{results['started'].replace(':', '').replace('-', '')}.json"
        path.write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
