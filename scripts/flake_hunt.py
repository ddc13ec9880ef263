"""Run chosen tests many times under CI-like CPU load, on asyncio and uvloop, and say which failed.

Each run is one pytest session over the given tests: two workers (``-n 2 --dist loadfile``, as
.ci/run), a busy process spinning on a core beside them, one event loop, and a hypothesis seed of
its own (the run's number, also as AIOKAFKA_LITE_PROPERTY_SEED and AIOKAFKA_LITE_MODEL_SEED, which
the derandomized property and model tests take instead; a failure replays with those). At
the end, per test: how many runs on each loop, and each failure with its loop, seed and first
lines. Exit status 1 if anything failed::

    .venv/bin/python scripts/flake_hunt.py --runs 50 tests/integration/test_group_interop.py
    .venv/bin/python scripts/flake_hunt.py --runs 10 --loops uvloop -k while tests/integration/test_group_interop.py

Set PYTHONTRACEMALLOC=25 to get where a socket or transport left open was created. A run still
going after ``--run-timeout`` minutes is a hang: it is killed and counted as a failure, and with
``--keep`` its output is kept, with what each event loop's close() slower than a minute had open
(tests/conftest.py's close watch, which this script turns on).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Tally:
    runs: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    failures: list[str] = field(default_factory=list)


def _outcomes(report: Path) -> list[tuple[str, str | None]]:
    """(test id, None or the failure's first lines) for each test case in a junit report."""
    out: list[tuple[str, str | None]] = []
    for case in ET.parse(report).getroot().iter("testcase"):
        test = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if case.find("skipped") is not None:
            continue
        if problem is None:
            out.append((test, None))
        else:
            text = (problem.get("message") or problem.text or "").strip().splitlines()
            out.append((test, " | ".join(line.strip() for line in text[:3])[:400]))
    return out


HUNG = -1000  # _run()'s returncode for a run killed at its timeout


def _run(command: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """The run, in a session of its own: at ``timeout`` the whole session is killed (a broker it
    started stops with it, as its watchdog sees its parent gone)."""
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        return subprocess.CompletedProcess(command, HUNG, stdout, stderr)


def _busy() -> subprocess.Popen[bytes]:
    """A process that keeps one core busy, as CI's other jobs do."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tests", nargs="+", help="test files or node ids")
    parser.add_argument("--runs", type=int, default=50, help="runs per event loop (default 50)")
    parser.add_argument("--loops", default="asyncio,uvloop", help="comma-separated event loops")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (default 2, as CI)")
    parser.add_argument("--busy", type=int, default=1, help="busy processes beside the run (default 1; 0: none)")
    parser.add_argument("-k", default=None, help="pytest -k expression")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=None,
                        help="start no run after this many minutes; the summary counts the runs done")
    parser.add_argument("--run-timeout", type=float, default=20.0, metavar="MINUTES",
                        help="kill a run still going after this long and count it as a hang (default 20)")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="write the whole output of each failed run to DIR/<loop>-<seed>.log")
    args = parser.parse_args()

    tallies: dict[str, Tally] = defaultdict(Tally)
    busy = [_busy() for _ in range(args.busy)]
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="flake-hunt-") as tmp:
            for run in range(args.runs):
                seed = args.first_seed + run
                for loop in args.loops.split(","):
                    if args.minutes is not None and time.monotonic() - started > args.minutes * 60:
                        break
                    report = Path(tmp) / f"{loop}-{seed}.xml"
                    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(args.workers),
                               "--dist", "loadfile", f"--event-loop={loop}", f"--hypothesis-seed={seed}",
                               f"--junitxml={report}", *(["-k", args.k] if args.k else []), *args.tests]
                    # The property and model tests are derandomized unless told a seed: give them this run's.
                    env = {**os.environ, "AIOKAFKA_LITE_PROPERTY_SEED": str(seed),
                           "AIOKAFKA_LITE_MODEL_SEED": str(seed), "AIOKAFKA_LITE_CLOSE_WATCH": "60",
                           "AIOKAFKA_LITE_CLOSE_WATCH_DIR": tmp}
                    done = _run(command, env, args.run_timeout * 60)
                    if done.returncode == HUNG:
                        tallies["(session)"].runs[loop] += 1
                        tallies["(session)"].failures.append(f"{loop} seed {seed}: still running after "
                                                             f"{args.run_timeout} min: killed")
                        if args.keep is not None:
                            args.keep.mkdir(parents=True, exist_ok=True)
                            watched = "".join(f"\n--- {found.name}\n{found.read_text()}"
                                              for found in Path(tmp).glob("close-watch-*.txt"))
                            (args.keep / f"{loop}-{seed}.log").write_text(done.stdout + done.stderr + watched)
                        print(f"run {run + 1}/{args.runs} {loop} seed {seed}: hung, killed", flush=True)
                        continue
                    if not report.exists():
                        tallies["(session)"].runs[loop] += 1
                        if args.keep is not None:
                            args.keep.mkdir(parents=True, exist_ok=True)
                            (args.keep / f"{loop}-{seed}.log").write_text(done.stdout + done.stderr)
                        tallies["(session)"].failures.append(
                            f"{loop} seed {seed}: pytest exited {done.returncode} without a report: "
                            + " | ".join(done.stdout.strip().splitlines()[-3:]))
                        continue
                    for test, failure in _outcomes(report):
                        tallies[test].runs[loop] += 1
                        if failure is not None:
                            tallies[test].failures.append(f"{loop} seed {seed}: {failure}")
                    failed = sum(1 for t in tallies.values() for f in t.failures
                                 if f.startswith(f"{loop} seed {seed}:"))
                    if failed and args.keep is not None:
                        args.keep.mkdir(parents=True, exist_ok=True)
                        (args.keep / f"{loop}-{seed}.log").write_text(done.stdout + done.stderr)
                    print(f"run {run + 1}/{args.runs} {loop} seed {seed}: exit {done.returncode}, "
                          f"{failed} failed, {time.monotonic() - started:.0f} s so far", flush=True)
    finally:
        for process in busy:
            process.kill()
            process.wait()

    print(f"\nper test: runs per loop, failures ({time.monotonic() - started:.0f} s)")
    any_failed = False
    for test, tally in sorted(tallies.items()):
        runs = ", ".join(f"{loop} {n}" for loop, n in sorted(tally.runs.items()))
        print(f"{test}: {runs}; {len(tally.failures)} failed")
        for failure in tally.failures:
            any_failed = True
            print(f"    {failure}")
    return 1 if any_failed else 0


if __name__ == "__main__":
    sys.exit(main())
