"""Run a broker as a child process in its own process group, and always take it down again.

Brokers are started with ``start_new_session=True`` so the child leads a new process group; stopping
signals the whole group (SIGTERM, then SIGKILL after a grace period), so nothing the broker forked
(a JVM helper, a shell wrapper) outlives the fixture. The group's leader is a tiny Python watchdog
that runs the broker and kills the group if the test process dies without tearing down (SIGKILL,
a closed pipe): a new session is out of reach of the terminal's and the job runner's signals.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

LOCALHOST = "127.0.0.1"


class BrokerUnavailable(RuntimeError):
    """A broker cannot be started here (a prerequisite is missing); fixtures turn this into a skip."""


class BrokerStartError(RuntimeError):
    """A broker process was started but did not become ready."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, for a broker to listen on seconds later.

    Not one the OS would pick itself (``bind(0)``): that is its ephemeral range, from which every
    outgoing connection on the machine also takes its local port, so in the seconds before a broker
    binds, a client connection (another test worker's) could take the port and the broker would
    exit at start ("Address already in use"). So a random port just below that range, not handed
    out before by this process, that binds now."""
    low, _high = _ephemeral_range()
    if low <= 2048:  # no room below it: the OS picks
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((LOCALHOST, 0))
            chosen: int = sock.getsockname()[1]
            return chosen
    below = _this_workers_share(range(max(1024, low - 12_000), low))
    for _ in range(200):
        port = random.choice(below)
        if port in _handed_out or not _binds(port):
            continue
        _handed_out.add(port)
        return port
    raise BrokerStartError(f"no free port found in {below.start}-{below.stop - 1} on {LOCALHOST}")


_handed_out: set[int] = set()


def _this_workers_share(ports: range) -> range:
    """pytest-xdist's workers each take their own slice, so that two never hand out one port."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not (worker.startswith("gw") and worker[2:].isdigit() and count.isdigit() and int(count) > 0):
        return ports
    size = len(ports) // int(count)
    first = ports.start + size * (int(worker[2:]) % int(count))
    return range(first, first + size)


def _ephemeral_range() -> tuple[int, int]:
    """The range the OS takes local ports from for outgoing connections and ``bind(0)`` (Linux)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 49152, 65535  # IANA's dynamic range: what the BSDs and macOS use


def _binds(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOCALHOST, port))
        except OSError:
            return False
        return True


def port_accepts(port: int, host: str = LOCALHOST, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def processes_in_group(pgid: int) -> list[int]:
    """Pids whose process group is ``pgid`` (Linux /proc; elsewhere an empty list)."""
    found: list[int] = []
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Field 5 is the pgrp; the command name (field 2) may contain spaces, so split after ')'.
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[1] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


# argv: parent pid, a directory to delete if the parent dies ("" for none), the broker command.
# SIGTERM reaches the broker through the group; the watchdog ignores it and exits with the broker's
# status once the broker has finished shutting down.
_WATCHDOG = """
import os, shutil, signal, subprocess, sys, time
parent, workdir = int(sys.argv[1]), sys.argv[2]
child = subprocess.Popen(sys.argv[3:])
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
while child.poll() is None:
    if os.getppid() != parent:
        child.kill()
        child.wait()
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        os.killpg(0, signal.SIGKILL)
    time.sleep(0.25)
sys.exit(child.returncode)
"""

_running: weakref.WeakSet[ManagedProcess] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    # Fixtures stop their brokers; this catches an interpreter exit that skipped teardown.
    for process in list(_running):
        process.kill()


class ManagedProcess:
    """One child process group whose output goes to a log file.

    ``orphan_cleanup`` names a directory the watchdog deletes if this process dies before ``stop()``.
    ``capture_stdout=True`` leaves stdout as a pipe (``popen.stdout``, bytes) for a caller that reads
    the process's output as data (a Java test client's JSON events); stderr still goes to the log.
    """

    def __init__(self, argv: Sequence[str], log_path: Path, *, env: dict[str, str] | None = None,
                 cwd: Path | None = None, orphan_cleanup: Path | None = None,
                 capture_stdout: bool = False) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self._log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 - closed in stop()
        cleanup = str(orphan_cleanup) if orphan_cleanup else ""
        watched = [sys.executable, "-c", _WATCHDOG, str(os.getpid()), cleanup, *self.argv]
        self.popen = subprocess.Popen(
            watched, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if capture_stdout else self._log,
            stderr=self._log if capture_stdout else subprocess.STDOUT,
            env=env, cwd=cwd, start_new_session=True,
        )
        _running.add(self)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def exited(self) -> bool:
        return self.popen.poll() is not None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the group, SIGKILL it after ``grace`` seconds, reap the leader and close the log."""
        try:
            self._signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.kill()
            self._kill_stragglers(grace)
        finally:
            _running.discard(self)
            self._log.close()

    def kill(self) -> None:
        """SIGKILL the whole group at once and reap the leader (simulates a crash)."""
        self._signal_group(signal.SIGKILL)
        self.popen.wait()
        _running.discard(self)

    def _kill_stragglers(self, grace: float) -> None:
        # The leader is gone, but a child that ignored SIGTERM may still hold the group.
        deadline = time.monotonic() + grace
        while processes_in_group(self.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if processes_in_group(self.pid):
            self._signal_group(signal.SIGKILL)

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)

    def log_tail(self, max_chars: int = 4000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return text[-max_chars:]


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(ready: Callable[[], bool], *, timeout: float, what: str,
               process: ManagedProcess | None = None, interval: float = 0.05) -> None:
    """Poll ``ready`` until it is true; fail fast (with the log tail) if ``process`` dies."""
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.exited():
            raise BrokerStartError(
                f"{what}: process exited with code {process.popen.returncode}; "
                f"log {process.log_path}:\n{process.log_tail()}")
        if ready():
            return
        if time.monotonic() >= deadline:
            tail = process.log_tail() if process is not None else ""
            raise BrokerStartError(f"{what}: not ready after {timeout:.0f} s\n{tail}")
        time.sleep(interval)
