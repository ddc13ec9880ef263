"""Chaos soak: a consumer group processes every record of a topic while a driver injects faults.

    python scripts/chaos_soak.py [--records 500000] [--members 4] [--faults 30] [--seed N]
                                 [--bootstrap H:P | --cluster]

Starts an Apache Kafka 4.3.1 broker (unless ``--bootstrap``) whose ``PROXIED`` listener advertises
a TCP proxy (``tests/tcp_proxy.py``) that the members connect through, so connection resets hit
them. Produces ``--records`` records (value = sequence number) to an 8-partition topic, runs
``--members`` processes (``scripts/_chaos_member.py``) in one group that commit explicit offsets
after each batch, and injects ``--faults`` random faults (seeded), one kind of:

    kill_member        SIGKILL a member, then start a new one in its place
    stall_member       a member sleeps past max_poll_interval_ms while holding a batch
    broker_restart     stop and start the broker process (same ports, same data)
    reset_connections  the proxy RSTs every open connection

With ``--bootstrap`` the members connect straight to that cluster and only the first two kinds run.
With ``--cluster`` it starts a 3-broker :class:`KafkaCluster` instead (the topic has replication
factor 3, ``min.insync.replicas`` 2), the members connect to it directly, and the kinds are
``kill_member``, ``stall_member`` and the broker faults of ``scripts/_chaos_cluster.py``:
``broker_kill`` (SIGKILL the broker leading most partitions or the group coordinator, start it
again), ``broker_restart`` (rolling SIGTERM restarts) and ``leader_move`` (reassign the replica
order, then a preferred-leader election), one broker down at most.
The members pace themselves (a rate file the driver rewrites) so the faults fall while records
remain. At the end it checks, from the members' logs and the broker:

  - committed offsets (``Consumer.committed``) equal ``end_offsets`` for every partition;
  - lost == 0: every record was processed at least once;
  - no record was delivered again after a successful commit covering it had returned
    (the precise "duplicates only from the uncommitted window" check: a redelivery must come
    from offsets that were not yet committed);
  - duplicates <= (faults + members) x members x max_poll_records: each fault, and each initial
    join, can cost each member at most its uncommitted batch (a coarse sanity bound).

Prints one line per fault as it is injected (with its CLOCK_MONOTONIC time, as in the members'
logs), then records, faults per kind, lost, duplicates, longest stall (largest gap in overall progress:
new records processed or committed offsets advancing) and wall time; exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import collections
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.testing._process import free_port
from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.kafka_cluster import KafkaCluster
from scripts._chaos_cluster import ClusterFaults
from tests.tcp_proxy import TcpProxy

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 8
MAX_POLL_INTERVAL_MS = 5000
STALL_SECONDS = MAX_POLL_INTERVAL_MS / 1000 + 2.0
MEMBER_SETTINGS: dict[str, Any] = {
    "auto_offset_reset": "earliest", "enable_auto_commit": False, "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 1000, "max_poll_interval_ms": MAX_POLL_INTERVAL_MS, "max_poll_records": 500,
    "request_timeout_ms": 10000, "default_api_timeout_ms": 10000, "fetch_max_wait_ms": 500,
    "retry_backoff_ms": 100, "reconnect_backoff_max_ms": 1000,
}
KINDS_WITH_BROKER = ("kill_member", "stall_member", "broker_restart", "reset_connections")
KINDS_EXTERNAL = ("kill_member", "stall_member")
KINDS_CLUSTER = ("kill_member", "stall_member", "broker_kill", "broker_restart", "leader_move")


# ---------------------------------------------------------------------------------- the tally


@dataclass
class Tally:
    """What the members' logs say: deliveries, successful commits, progress over time."""

    expected: dict[int, int]  # partition -> end offset
    seen: collections.Counter[tuple[int, int]] = field(default_factory=collections.Counter)
    deliveries: list[tuple[float, int, int]] = field(default_factory=list)
    commits: dict[int, list[tuple[float, int]]] = field(default_factory=lambda: collections.defaultdict(list))
    committed: dict[int, int] = field(default_factory=dict)
    failed_commits: collections.Counter[str] = field(default_factory=collections.Counter)
    values: dict[tuple[int, int], int] = field(default_factory=dict)
    bad_values: int = 0
    longest_stall: float = 0.0
    _progress: int = 0
    _last_progress: float | None = None

    def feed(self, line: str) -> None:
        parts = line.split()
        if not parts:
            return
        if parts[0] == "R":
            t, p, o, value = float(parts[1]), int(parts[2]), int(parts[3]), int(parts[4])
            self.seen[(p, o)] += 1
            self.deliveries.append((t, p, o))
            # Record i was produced to partition i % P; an offset always carries the same value.
            if value % PARTITIONS != p or self.values.setdefault((p, o), value) != value:
                self.bad_values += 1
        elif parts[0] == "C":
            t = float(parts[1])
            for item in parts[3].split(","):
                p, o = (int(x) for x in item.split(":"))
                self.commits[p].append((t, o))
                self.committed[p] = max(self.committed.get(p, 0), o)
        elif parts[0] == "F":
            self.failed_commits[parts[2]] += 1

    def note_progress(self, now: float) -> None:
        progress = len(self.seen) + sum(self.committed.values())
        if self._last_progress is not None and not self.done:
            self.longest_stall = max(self.longest_stall, now - self._last_progress)
        if progress != self._progress:
            self._progress = progress
            self._last_progress = now

    @property
    def total(self) -> int:
        return sum(self.expected.values())

    @property
    def lost(self) -> int:
        return sum(1 for p, end in self.expected.items() for o in range(end) if (p, o) not in self.seen)

    @property
    def duplicates(self) -> int:
        return sum(n - 1 for n in self.seen.values())

    @property
    def done(self) -> bool:
        return (len(self.seen) >= self.total
                and all(self.committed.get(p, 0) >= end for p, end in self.expected.items()))

    def redelivered_after_commit(self) -> int:
        """Deliveries of an offset after a successful commit beyond it had already returned."""
        times: dict[int, list[float]] = {}
        highest: dict[int, list[int]] = {}
        for p, commits in self.commits.items():
            commits.sort()
            times[p] = [t for t, _ in commits]
            running, highest[p] = 0, []
            for _, o in commits:
                running = max(running, o)
                highest[p].append(running)
        bad = 0
        for t, p, o in self.deliveries:
            index = bisect.bisect_left(times.get(p, []), t)
            if index and highest[p][index - 1] > o:
                bad += 1
        return bad


class LogReader:
    """Follows the log files of every member incarnation, feeding complete lines to the tally."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self._positions: dict[Path, int] = {}
        self._partial: dict[Path, str] = {}

    def follow(self, path: Path) -> None:
        self._positions.setdefault(path, 0)

    def read_new(self) -> None:
        for path, position in self._positions.items():
            chunk = ""
            with contextlib.suppress(FileNotFoundError), open(path, encoding="ascii") as log:
                log.seek(position)
                chunk = log.read()
                self._positions[path] = log.tell()
            if not chunk:
                continue
            text = self._partial.pop(path, "") + chunk
            *lines, rest = text.split("\n")
            if rest:
                self._partial[path] = rest  # a line still being written (or cut by SIGKILL)
            for line in lines:
                self.tally.feed(line)


# ---------------------------------------------------------------------------------- the members


class Member:
    """One member slot; each (re)start is a new process with its own log file."""

    def __init__(self, index: int, workdir: Path, spec: dict[str, Any], reader: LogReader) -> None:
        self.index = index
        self.workdir = workdir
        self.spec = spec
        self.reader = reader
        self.incarnation = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.stalled_until = 0.0

    def start(self) -> None:
        self.incarnation += 1
        stem = self.workdir / f"member{self.index}-{self.incarnation}"
        log = stem.with_suffix(".log")
        self.reader.follow(log)
        spec = {**self.spec, "log": str(log)}
        with open(stem.with_suffix(".out"), "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(ROOT / "scripts" / "_chaos_member.py"), json.dumps(spec)],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def stall(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGUSR1)
            self.stalled_until = time.monotonic() + STALL_SECONDS

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            out = (self.workdir / f"member{self.index}-{self.incarnation}.out").read_text(errors="replace")
            raise RuntimeError(f"member {self.index} exited with {self.process.returncode}:\n{out[-3000:]}")


# ---------------------------------------------------------------------------------- faults


@dataclass
class Chaos:
    rng: random.Random
    members: list[Member]
    broker: ApacheKafkaBroker | None
    proxy: TcpProxy | None
    cluster: ClusterFaults | None = None
    injected: collections.Counter[str] = field(default_factory=collections.Counter)
    cycle_seconds: list[float] = field(default_factory=list)

    def plan(self, count: int) -> list[str]:
        """Every kind at least once (when count allows), the rest at random, in random order."""
        kinds = (KINDS_CLUSTER if self.cluster is not None
                 else KINDS_WITH_BROKER if self.broker is not None else KINDS_EXTERNAL)
        plan = list(kinds[:count]) + [self.rng.choice(kinds) for _ in range(count - len(kinds))]
        self.rng.shuffle(plan)
        return plan

    async def inject(self, kind: str) -> str:
        """Inject one fault of ``kind``; returns what it did."""
        detail = ""
        if kind == "kill_member":
            member = self.rng.choice(self.members)
            member.kill()
            await asyncio.sleep(self.rng.uniform(0.2, 2.0))
            member.start()
            detail = f"member {member.index}"
        elif kind == "stall_member":
            now = time.monotonic()
            candidates = [m for m in self.members if m.stalled_until < now] or self.members
            member = self.rng.choice(candidates)
            member.stall()
            detail = f"member {member.index}"
        elif self.cluster is not None:
            faults = {"broker_kill": self.cluster.broker_kill, "broker_restart": self.cluster.broker_restart,
                      "leader_move": self.cluster.leader_move}
            detail = await asyncio.to_thread(faults[kind])
        elif kind == "broker_restart":
            assert self.broker is not None
            await asyncio.to_thread(self.broker.restart)
            detail = "the broker"
        elif kind == "reset_connections":
            assert self.proxy is not None
            self.proxy.reset_all()
            detail = "every proxied connection"
        self.injected[kind] += 1
        return detail

    async def run(self, count: int, mean_interval: float) -> None:
        for number, kind in enumerate(self.plan(count), 1):
            began = time.monotonic()
            await asyncio.sleep(self.rng.uniform(0.2, 2 * mean_interval - 0.2))
            at = time.monotonic()
            detail = await self.inject(kind)
            print(f"fault {number}/{count} at t={at:.3f}: {kind} {detail} ({time.monotonic() - at:.1f} s)",
                  flush=True)
            self.cycle_seconds.append(time.monotonic() - began)


def pace(tally: Tally, chaos: Chaos, faults: int, members: int, first_guess: float) -> float:
    """Records per second per member so the records last until the faults are done (0 = no limit)."""
    left = faults - sum(chaos.injected.values())
    if left <= 0:
        return 0.0
    cycles = chaos.cycle_seconds
    per_fault = sum(cycles) / len(cycles) if cycles else first_guess
    remaining_time = left * per_fault * 1.25 + 5.0
    return max((tally.total - len(tally.seen)) / remaining_time / members, 1.0)


def write_pace(path: Path, rate: float) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{rate:.3f}\n")
    tmp.replace(path)  # atomic: a member never reads half a number


# ---------------------------------------------------------------------------------- the run


async def broker_view(bootstrap: str, topic: str, group: str) -> tuple[dict[int, int | None], dict[int, int]]:
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    async with Consumer(bootstrap_servers=bootstrap, group_id=group, default_api_timeout_ms=20000) as consumer:
        committed = await consumer.committed(tps)
        ends = await consumer.end_offsets(tps)
    return ({tp.partition: (c.offset if c else None) for tp, c in committed.items()},
            {tp.partition: end for tp, end in ends.items()})


async def soak(args: argparse.Namespace, workdir: Path, broker: ApacheKafkaBroker | None,
               cluster: KafkaCluster | None) -> int:
    rng = random.Random(args.seed)
    topic, group = f"chaos-{args.seed}-{os.getpid()}", f"chaos-group-{args.seed}-{os.getpid()}"
    started = broker or cluster
    direct = started.bootstrap_servers if started is not None else args.bootstrap
    restart_guess = started.startup_seconds / 4 if started is not None else 0.0
    chaos = Chaos(rng, [], broker, None, ClusterFaults(cluster, topic, group, rng) if cluster else None)
    if broker is not None:
        chaos.proxy = await TcpProxy("127.0.0.1", broker.listener_port("PROXIED"), port=args.proxy_port).start()
    try:
        return await _soak_with(args, workdir, chaos, topic, group, direct, restart_guess)
    finally:
        if chaos.proxy is not None:
            await chaos.proxy.stop()


async def _soak_with(args: argparse.Namespace, workdir: Path, chaos: Chaos, topic: str, group: str,
                     direct: str, restart_guess: float) -> int:
    began = time.monotonic()
    replication = 3 if chaos.cluster is not None else 1
    await asyncio.to_thread(create_topic, direct, topic, PARTITIONS, replication_factor=replication)
    await asyncio.to_thread(produce, direct, topic,
                            ({"value": str(i), "partition": i % PARTITIONS} for i in range(args.records)),
                            timeout=300.0, enable_idempotence=True)  # retries must not repeat a record
    print(f"produced {args.records} records to {topic} ({PARTITIONS} partitions, replication factor "
          f"{replication}) in {time.monotonic() - began:.1f} s", flush=True)
    expected = {p: len(range(p, args.records, PARTITIONS)) for p in range(PARTITIONS)}
    tally = Tally(expected)
    reader = LogReader(tally)
    pace_file = workdir / "pace"
    first_guess = args.mean_interval + restart_guess + 1.0
    write_pace(pace_file, args.records / (args.faults * first_guess * 1.25 + 5.0) / args.members)
    spec = {"bootstrap": chaos.proxy.address if chaos.proxy else direct, "topic": topic, "group": group,
            "pace": str(pace_file), "stall_seconds": STALL_SECONDS,
            "settings": {**MEMBER_SETTINGS, "max_poll_records": args.max_poll_records}}
    members = [Member(i, workdir, spec, reader) for i in range(args.members)]
    chaos.members.extend(members)
    soak_began = time.monotonic()
    try:
        for member in members:
            member.start()
        faults = asyncio.create_task(chaos.run(args.faults, args.mean_interval))
        try:
            await _watch(args, tally, reader, chaos, members, faults, pace_file, first_guess)
        finally:
            if not faults.done():
                faults.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await faults
    finally:
        for member in members:
            member.kill()
    reader.read_new()
    soak_seconds = time.monotonic() - soak_began
    committed, ends = await broker_view(direct, topic, group)
    return report(args, tally, chaos, committed, ends, soak_seconds, time.monotonic() - began)


async def _watch(args: argparse.Namespace, tally: Tally, reader: LogReader, chaos: Chaos,
                 members: list[Member], faults: asyncio.Task[None], pace_file: Path, first_guess: float) -> None:
    deadline = time.monotonic() + args.timeout
    while True:
        await asyncio.sleep(0.25)
        reader.read_new()
        tally.note_progress(time.monotonic())
        for member in members:
            member.check_alive()
        if faults.done():
            faults.result()  # a fault that failed to inject: surface why
        if tally.done and faults.done():
            return
        if time.monotonic() > deadline:
            print(f"TIMEOUT after {args.timeout} s: {len(tally.seen)}/{tally.total} processed, "
                  f"faults {dict(chaos.injected)}", flush=True)
            return
        write_pace(pace_file, pace(tally, chaos, args.faults, args.members, first_guess))


def report(args: argparse.Namespace, tally: Tally, chaos: Chaos, committed: dict[int, int | None],
           ends: dict[int, int], soak_seconds: float, wall_seconds: float) -> int:
    lost, duplicates = tally.lost, tally.duplicates
    redelivered = tally.redelivered_after_commit()
    bound = (args.faults + args.members) * args.members * args.max_poll_records
    at_end = [p for p in ends if committed.get(p) == ends[p] == tally.expected[p]]
    injected = sum(chaos.injected.values())
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(chaos.injected.items()))
    print(f"records: {tally.total}")
    print(f"faults injected: {injected} ({kinds})")
    print(f"lost: {lost}")
    print(f"duplicates: {duplicates} (bound {bound} = (faults {args.faults} + members {args.members}) "
          f"x members {args.members} x max_poll_records {args.max_poll_records})")
    print(f"redelivered after a covering commit: {redelivered}")
    missing_values = tally.total - len(set(tally.values.values()))
    print(f"wrong values: {tally.bad_values}, sequence numbers never seen: {missing_values}")
    print(f"committed to end: {len(at_end)}/{len(ends)} partitions")
    print(f"failed commits: {sum(tally.failed_commits.values())} {dict(tally.failed_commits)}")
    print(f"longest stall: {tally.longest_stall:.1f} s")
    print(f"soak time: {soak_seconds:.1f} s")
    print(f"wall time: {wall_seconds:.1f} s", flush=True)
    failures = [what for what, bad in [
        ("records lost", lost > 0), ("duplicate bound exceeded", duplicates > bound),
        ("records redelivered after a covering commit", redelivered > 0),
        ("records with a wrong value", tally.bad_values > 0),
        ("sequence numbers never seen", missing_values > 0),
        ("committed offsets short of the end", len(at_end) != len(ends)),
        (f"fewer than {args.faults} faults injected", injected < args.faults)] if bad]
    print("RESULT: " + ("PASS" if not failures else "FAIL: " + "; ".join(failures)), flush=True)
    return 1 if failures else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--faults", type=int, default=30)
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: time-based, printed)")
    parser.add_argument("--bootstrap", default=None, help="use this cluster instead of starting a broker")
    parser.add_argument("--cluster", action="store_true",
                        help="start 3 brokers (RF 3 topic) and inject broker kills, restarts and leader moves")
    parser.add_argument("--mean-interval", type=float, default=2.0, help="mean seconds between faults")
    parser.add_argument("--max-poll-records", type=int, default=500)
    parser.add_argument("--timeout", type=float, default=None,
                        help="overall limit (default 300 + 20 x faults, 40 x with --cluster)")
    parser.add_argument("--workdir", default=None, help="keep member logs here (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.cluster and args.bootstrap:
        parser.error("--cluster starts its own brokers: it cannot be combined with --bootstrap")
    args.seed = args.seed if args.seed is not None else int(time.time()) % 100_000
    # A broker fault on a cluster takes up to about 30 s on a loaded machine (start, back in the ISR).
    args.timeout = args.timeout if args.timeout is not None else 300.0 + (40.0 if args.cluster else 20.0) * args.faults
    args.proxy_port = free_port()
    return args


def _raise_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally blocks that stop every process


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    args = parse_args(argv)
    print(f"chaos soak: seed {args.seed}, {args.records} records, {args.members} members, "
          f"{args.faults} faults{', 3-broker cluster' if args.cluster else ''}", flush=True)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="chaos-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    broker: ApacheKafkaBroker | None = None
    cluster: KafkaCluster | None = None
    code = 1
    try:
        if args.cluster:
            cluster = KafkaCluster()
            cluster.start()
        elif args.bootstrap is None:
            broker = ApacheKafkaBroker(extra_listeners={"PROXIED": "PLAINTEXT"},
                                       advertised_ports={"PROXIED": args.proxy_port}).start()
        code = asyncio.run(soak(args, workdir, broker, cluster))
    finally:
        if broker is not None:
            broker.stop()
        if cluster is not None:
            cluster.stop()
        if code == 0 and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"member logs kept in {workdir}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
