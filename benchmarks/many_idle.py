"""Many idle consumers in one process: threads, CPU and memory of N consumers on ONE event loop.

    python -m benchmarks.many_idle [--consumers 100] [--seconds 20] [--broker kafka|tansu] [--bootstrap HOST:PORT]

Each consumer is its own group on one topic (so each owns every partition and keeps its own
connections). aiokafka-lite and aiokafka run one after the other, each in a process of its own
(``--child``), against the same broker; once every consumer has joined and read the few records,
each keeps polling (timeout 1 s, as an application would) while the process's threads
(/proc/self/task), CPU time (as % of one core) and RSS are measured for ``--seconds``. RSS per
consumer is the growth from before the first consumer was made, divided by N.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any

from benchmarks.idle import cpu_seconds, rss_mb
from benchmarks.peers import PARTITIONS, InProcess, group_settings

CLIENTS = {"aiokafka-lite": "lite", "aiokafka": "aiokafka"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


async def _child(spec: dict[str, Any]) -> dict[str, Any]:
    count, seconds = spec["consumers"], spec["seconds"]
    settings = group_settings(heartbeat_interval_ms=3000, session_timeout_ms=45000)
    rss0 = rss_mb()
    members = [InProcess(spec["client"], spec["bootstrap"], spec["topic"],
                         f"bench-many-idle-{uuid.uuid4().hex[:8]}", settings) for _ in range(count)]
    joined = time.monotonic()
    try:
        await asyncio.gather(*(member.start() for member in members))

        async def join(member: InProcess) -> None:
            deadline = time.monotonic() + 120
            while member.owned() != PARTITIONS and time.monotonic() < deadline:
                await member.poll(0.2)
            for _ in range(5):  # read what is there, so the rest is truly idle
                await member.poll(0.2)

        await asyncio.gather(*(join(member) for member in members))
        joined = time.monotonic() - joined
        stop = time.monotonic() + seconds
        most_threads = _threads()

        async def idle(member: InProcess) -> None:
            while time.monotonic() < stop:
                await member.poll(1.0)

        async def sample() -> None:
            nonlocal most_threads
            while time.monotonic() < stop:
                most_threads = max(most_threads, _threads())
                await asyncio.sleep(0.5)

        cpu0, wall0 = cpu_seconds(), time.monotonic()
        await asyncio.gather(sample(), *(idle(member) for member in members))
        cpu, wall = cpu_seconds() - cpu0, time.monotonic() - wall0
        rss = rss_mb()
        return {"consumers": count, "join_seconds": joined, "seconds": wall, "cpu_percent": 100 * cpu / wall,
                "threads": _threads(), "threads_max": most_threads, "rss_mb": rss,
                "rss_mb_per_consumer": (rss - rss0) / count,
                "all_owned": all(member.owned() == PARTITIONS for member in members)}
    finally:
        await asyncio.gather(*(member.close() for member in members), return_exceptions=True)


def _run_child(label: str, bootstrap: str, topic: str, consumers: int, seconds: float) -> dict[str, Any]:
    spec = {"client": CLIENTS[label], "bootstrap": bootstrap, "topic": topic, "consumers": consumers,
            "seconds": seconds}
    done = subprocess.run([sys.executable, "-m", "benchmarks.many_idle", "--child", json.dumps(spec)],
                          capture_output=True, text=True, cwd=ROOT, timeout=seconds + 600, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": done.stderr.strip().splitlines()[-3:]}


def table(results: dict[str, dict[str, Any]]) -> str:
    rows = [("client", "threads (max)", "CPU % of a core", "RSS MB", "RSS MB / consumer", "join s")]
    for label, fig in results.items():
        if "error" in fig:
            rows.append((label, "error", str(fig["error"]), "", "", ""))
            continue
        rows.append((label, f"{fig['threads']} ({fig['threads_max']})", f"{fig['cpu_percent']:.2f}",
                     f"{fig['rss_mb']:.1f}", f"{fig['rss_mb_per_consumer']:.3f}", f"{fig['join_seconds']:.1f}"))
    lite, theirs = results.get("aiokafka-lite", {}), results.get("aiokafka", {})
    if "error" not in lite and "error" not in theirs and lite and theirs:
        rows.append(("lite / aiokafka", f"{lite['threads_max'] / theirs['threads_max']:.2f}x",
                     f"{lite['cpu_percent'] / max(theirs['cpu_percent'], 1e-9):.2f}x",
                     f"{lite['rss_mb'] / theirs['rss_mb']:.2f}x",
                     f"{lite['rss_mb_per_consumer'] / max(theirs['rss_mb_per_consumer'], 1e-9):.2f}x", ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.many_idle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--consumers", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--broker", choices=("kafka", "tansu"), default="kafka")
    parser.add_argument("--bootstrap", help="use this running broker instead of starting one")
    parser.add_argument("--clients", nargs="+", choices=list(CLIENTS), default=list(CLIENTS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(asyncio.run(_child(json.loads(args.child)))), flush=True)
        return
    from benchmarks.brokers import describe, start_broker
    from benchmarks.peers import new_topic

    def measure(bootstrap: str) -> dict[str, dict[str, Any]]:
        topic = new_topic(bootstrap, "many-idle")
        results = {}
        for label in args.clients:
            print(f"[{time.strftime('%H:%M:%S')}] {label}: {args.consumers} consumers, {args.seconds:.0f} s window",
                  file=sys.stderr, flush=True)
            results[label] = _run_child(label, bootstrap, topic, args.consumers, args.seconds)
        return results

    if args.bootstrap:
        results = measure(args.bootstrap)
        where = args.bootstrap
    else:
        with start_broker(args.broker) as broker:
            results = measure(broker.bootstrap_servers)
        where = describe(args.broker)
    print(f"{args.consumers} idle consumers on one event loop, {where}, {os.cpu_count()} CPUs")
    print(table(results))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
