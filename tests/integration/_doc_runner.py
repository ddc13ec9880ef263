"""How test_doc_blocks.py runs a documented block: commands in their own process groups with
their output collected (Running), stopped as a mark says (Stop), one block's run and transcript
(DocRun), and the Spark process shared by the Spark blocks (SparkWorker)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ._doc_blocks import ROOT, Block

COMMAND_TIMEOUT = 60.0
STOP_GRACE = 30.0  # seconds a stopped command has to exit
TRACEBACK = "Traceback (most recent call last)"


def block_env() -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    python_path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""), "PYTHONPATH": python_path,
            "PYTHONUNBUFFERED": "1", "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "120"}


# Runs the scripts whose paths it reads on stdin, one at a time, each in a fresh namespace with the
# same `spark`; "doc-test: done ok|error" ends each one's output.
SPARK_WORKER = """\
import sys
import traceback

from pyspark.sql import SparkSession

from aiokafka_lite.spark import register

spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
register(spark)
print("doc-test: ready", flush=True)
for line in sys.stdin:
    path = line.strip()
    try:
        with open(path) as script:
            exec(compile(script.read(), path, "exec"), {"__name__": "__main__", "spark": spark})
        status = "ok"
    except BaseException:
        traceback.print_exc()
        status = "error"
    print(f"doc-test: done {status}", flush=True)
spark.stop()
"""


class SparkWorker:
    """One Python process with a SparkSession, running the Spark blocks' scripts in turn."""

    def __init__(self, script: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, env=block_env(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                                     start_new_session=True)
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._wait_for("doc-test: ready", 0, COMMAND_TIMEOUT * 2)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:
            for line in self.proc.stdout:
                self._lines.append(line)

    def _wait_for(self, text: str, since: int, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self._lines[since:]:
                if line.startswith(text):
                    return line
            if self.proc.poll() is not None:
                return None
            time.sleep(0.1)
        return None

    def run(self, script: Path, timeout: float) -> tuple[str, str]:
        """(output, "ok" | "error" | what went wrong) of one script."""
        since = len(self._lines)
        assert self.proc.stdin is not None
        if self.proc.poll() is not None:
            return "".join(self._lines[-40:]), f"the Spark worker exited with {self.proc.returncode}"
        self.proc.stdin.write(f"{script}\n")
        self.proc.stdin.flush()
        done = self._wait_for("doc-test: done", since, timeout)
        output = "".join(self._lines[since:])
        if done is None:
            self.close()  # a hung block: the following Spark blocks fail too, saying so
            return output, f"no end within {timeout:.0f} s"
        return output, done.split()[-1]

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join(5)


@dataclass
class Stop:
    after: float | None
    when: str | None
    sig: signal.Signals
    exit: str

    def accepts(self, returncode: int) -> bool:
        if self.exit == "signal":
            return returncode in (0, -self.sig, 128 + self.sig)
        return returncode == int(self.exit)


class Running:
    """A command in its own process group (Ctrl-C reaches the whole group), its output collected."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace",
                                     start_new_session=True)
        self.started = time.monotonic()
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:
            for line in self.proc.stdout:
                self._lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self._lines)

    def signal(self, sig: signal.Signals) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def wait(self, timeout: float) -> int | None:
        try:
            returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(5)
        return returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join(5)


@dataclass
class DocRun:
    """One block's run: where commands run, with what, and everything they printed."""

    block: Block
    request: pytest.FixtureRequest
    cwd: Path
    env: dict[str, str]
    timeout: float
    stop: Stop
    names: dict[str, str] = field(default_factory=dict)
    transcript: list[str] = field(default_factory=list)
    background: list[tuple[str, Running]] = field(default_factory=list)

    def fail(self, message: str) -> None:
        tail = "\n".join("".join(self.transcript).splitlines()[-80:])
        pytest.fail(f"{self.block.id}: {message}\n--- transcript (last lines) ---\n{tail}", pytrace=False)

    def record(self, command: str, running: Running, how: str, returncode: int | None) -> None:
        self.transcript.append(f"$ {command}\n{running.output}[{how}, exit {returncode}]\n")

    def run(self, command: str, argv: list[str] | None = None, stop: Stop | None = None) -> str:
        """Run one command to its end (or its stop), check its exit status, return its output."""
        stop = stop or self.stop
        running = Running(argv or ["bash", "-o", "pipefail", "-c", command], self.cwd, self.env)
        try:
            while (returncode := running.wait(0.1)) is None:
                elapsed = time.monotonic() - running.started
                if (stop.after is not None and elapsed >= stop.after) or (stop.when and stop.when in running.output):
                    running.signal(stop.sig)
                    returncode = running.wait(STOP_GRACE)
                    self.record(command, running, f"stopped with {stop.sig.name}", returncode)
                    if returncode is None:
                        self.fail(f"{command!r} did not exit within {STOP_GRACE:.0f} s of {stop.sig.name}")
                    elif not stop.accepts(returncode):
                        self.fail(f"{command!r} exited with {returncode} after {stop.sig.name} (expected {stop.exit})")
                    if stop.exit != "signal":
                        self.refuse_traceback(command, running.output)
                    return running.output
                if elapsed > self.timeout:
                    self.record(command, running, "still running", None)
                    self.fail(f"{command!r} still runs after {self.timeout:.0f} s (if it runs until stopped, mark "
                              "the block with stop-after= or stop-when=)")
            self.record(command, running, "exited", returncode)
            if returncode != 0:
                self.fail(f"{command!r} exited with {returncode}")
            self.refuse_traceback(command, running.output)
            return running.output
        finally:
            running.kill()

    def start_background(self, command: str, ready: str | None) -> None:
        running = Running(["bash", "-o", "pipefail", "-c", command], self.cwd, self.env)
        self.background.append((command, running))
        if ready is None:
            return
        while ready not in running.output:
            if running.proc.poll() is not None or time.monotonic() - running.started > self.timeout:
                self.record(command, running, "background, not ready", running.proc.poll())
                self.fail(f"{command!r} did not print {ready!r}")
            time.sleep(0.1)

    def stop_background(self) -> None:
        for command, running in self.background:
            running.signal(self.stop.sig)
            returncode = running.wait(STOP_GRACE)
            self.record(command, running, f"background, stopped with {self.stop.sig.name}", returncode)
            if returncode is None:
                self.fail(f"{command!r} did not exit within {STOP_GRACE:.0f} s of {self.stop.sig.name}")
            elif not self.stop.accepts(returncode):
                self.fail(f"{command!r} exited with {returncode} after {self.stop.sig.name}")
            if self.stop.exit != "signal":
                self.refuse_traceback(command, running.output)

    def refuse_traceback(self, command: str, output: str) -> None:
        if TRACEBACK in output:
            self.fail(f"{command!r} printed a traceback")

    def close(self) -> None:
        for _, running in self.background:
            running.kill()
