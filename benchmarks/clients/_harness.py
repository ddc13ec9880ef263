"""What every client process shares: reading the spec, timing, CPU and peak-RSS accounting."""

from __future__ import annotations

import cProfile
import json
import os
import re
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Spec:
    bootstrap: str
    topics: list[str]
    partitions: int  # per topic; every client assigns all of them by hand
    records: int  # over all topics
    batch: int = 10_000  # records per poll()/consume()/getmany() call, for every client
    fetch_max_bytes: int = 52_428_800  # Kafka's default, set explicitly on every client
    max_partition_fetch_bytes: int = 1_048_576
    uvloop: bool = False
    value_size: int = 0  # bytes per value in this topic (the limit counts no payload itself)
    compression: str = "none"  # the producer's codec: a client that cannot decode it says so (Skipped)
    options: dict[str, Any] = field(default_factory=dict)  # client settings for this row (librdkafka's)
    label: str = ""  # the row in the tables: names the profile file

    def assignment(self) -> list[tuple[str, int]]:
        """Every (topic, partition) of the data set, topic by topic."""
        return [(topic, p) for topic in self.topics for p in range(self.partitions)]


class Skipped(Exception):
    """Raised by ``consume`` before it reads anything when this client cannot read the data set in
    this environment (its codec's library is not installed): the row shows as skipped, with the
    message as the reason, not as failed."""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # all threads: librdkafka's count too
    return usage.ru_utime + usage.ru_stime


class Stopwatch:
    """Started before the consumer is created; stopped after the last record, before close().

    Throughput counts from the first batch on (``first(n)``), so connection set-up and the offset
    lookup are not in it; they are reported apart as ``startup_seconds``. CPU time covers it all.
    """

    def __init__(self) -> None:
        self.wall0 = time.perf_counter()
        self.cpu0 = _cpu()
        self.first_at: float | None = None
        self.first_records = 0
        self.wall: float | None = None
        self.cpu: float | None = None

    def first(self, records: int) -> None:
        """Call with the size of every batch; only the first non-empty one counts."""
        if self.first_at is None and records:
            self.first_at = time.perf_counter()
            self.first_records = records

    def stop(self) -> None:
        if self.wall is None:
            self.wall = time.perf_counter() - self.wall0
            self.cpu = _cpu() - self.cpu0


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM). Not ru_maxrss: on Linux that survives exec, so a child
    would report its parent's peak if the parent was bigger."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


Result = tuple[int, int]  # (records consumed, payload bytes consumed: key + value lengths)


def _profiled(consume: Callable[[Spec, Stopwatch], Result], spec: Spec, watch: Stopwatch) -> Result:
    """Run ``consume`` under cProfile when BENCH_PROFILE_DIR is set; the stats go to
    ``<dir>/<label>-<topics>-<pid>.prof`` (read them with ``python -m pstats``)."""
    directory = os.environ.get("BENCH_PROFILE_DIR")
    if not directory:
        return consume(spec, watch)
    profile = cProfile.Profile()
    try:
        return profile.runcall(consume, spec, watch)
    finally:
        name = re.sub(r"[^A-Za-z0-9.=-]+", "_", f"{spec.label}-{len(spec.topics)}x{spec.partitions}-{os.getpid()}")
        os.makedirs(directory, exist_ok=True)
        profile.dump_stats(os.path.join(directory, name + ".prof"))


def run(consume: Callable[[Spec, Stopwatch], Result], extra: Callable[[Spec], dict[str, Any]] | None = None) -> None:
    """Parse the spec from argv, run ``consume`` and print the figures as one JSON line."""
    spec = Spec(**json.loads(sys.argv[1]))
    watch = Stopwatch()
    try:
        records, payload = _profiled(consume, spec, watch)
    except Skipped as exc:
        print(json.dumps({"skipped": str(exc)}), flush=True)
        return
    watch.stop()
    assert watch.wall is not None
    assert watch.cpu is not None
    if records < spec.records:
        raise SystemExit(f"consumed only {records} of {spec.records} records")
    first_at = watch.first_at if watch.first_at is not None else watch.wall0
    steady_records = records - watch.first_records
    if steady_records < records / 2:  # a tiny topic that came in one batch: count from the start
        first_at, steady_records = watch.wall0, records
    steady = watch.wall0 + watch.wall - first_at
    out: dict[str, Any] = {
        "records": records,
        "payload_bytes": payload,
        "seconds": watch.wall,
        "startup_seconds": first_at - watch.wall0,
        "cpu_seconds": watch.cpu,
        "cpu_seconds_per_m_records": watch.cpu / records * 1e6,
        "peak_rss_mb": peak_rss_mb(),
        "records_per_s": steady_records / steady,
        "mb_per_s": payload * steady_records / records / steady / 1e6,
    }
    if extra is not None:
        out.update(extra(spec))
    print(json.dumps(out), flush=True)
