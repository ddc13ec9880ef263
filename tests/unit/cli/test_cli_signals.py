"""A signal that stops the `aiokafka-lite` command is its exit status, as a shell reports it: 130
after SIGINT (Ctrl-C), 143 after SIGTERM, after the same clean shutdown (no traceback, what it opened
closed); docs/cli.md. A real signal to a subprocess, as tests/integration/test_cli.py runs it, while
the command is still connecting (to a refused loopback port: it keeps trying) and while it waits for
records (on librdkafka's in-process mock cluster: no broker to start).
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import pytest

CLI = [sys.executable, "-m", "aiokafka_lite"]
ENV = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
# Each command says this on stderr once it has tried the refused bootstrap server (docs/cli.md).
CONNECTING = b"cannot reach the cluster yet"
# How long the command may take to say it is connecting, or to print a record (a busy machine).
STARTED_WITHIN = 30.0
# How long it may take to exit after the signal: it closes what it opened, nothing more.
EXITS_WITHIN = 5.0
SIGNALS = [pytest.param(signal.SIGINT, 130, id="SIGINT"), pytest.param(signal.SIGTERM, 143, id="SIGTERM")]


def refused_port() -> int:
    """A loopback port nothing listens on: bound once to pick it, then closed."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def start(*args: str) -> subprocess.Popen[bytes]:
    # Unbuffered pipes: select() on them tells the truth about what is left to read.
    return subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, bufsize=0)


def read_until(proc: subprocess.Popen[bytes], stream: Any, marker: bytes) -> bytes:
    """What ``proc`` wrote to ``stream`` up to and including ``marker``; kill it when the marker does
    not come within STARTED_WITHIN s, or it exits first."""
    deadline = time.monotonic() + STARTED_WITHIN
    got = b""
    while marker not in got:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([stream], [], [], max(left, 0))
        chunk = stream.read(65536) if ready else b""
        if not chunk:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"{marker!r} not written within {STARTED_WITHIN} s (exit {proc.returncode}); "
                                 f"got {got!r}; stdout {out!r}; stderr {err!r}")
        got += chunk
    return got


def signal_and_wait(proc: subprocess.Popen[bytes], sig: signal.Signals) -> tuple[int, str, str, float]:
    """Send ``sig``; the exit code, the rest of stdout and stderr, and the seconds it took to exit."""
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=EXITS_WITHIN)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"no exit within {EXITS_WITHIN} s of {sig.name}; stderr {err!r}") from None
    return proc.returncode, out.decode(), err.decode(), time.monotonic() - sent


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
@pytest.mark.parametrize("command", [
    pytest.param(["consume", "orders"], id="consume"),
    pytest.param(["consume", "orders", "--group", "billing"], id="consume-group"),
    pytest.param(["groups", "describe", "billing"], id="groups-describe"),
    pytest.param(["groups", "lag", "billing"], id="groups-lag"),
])
def test_a_signal_while_connecting_is_the_exit_status(command: list[str], sig: signal.Signals, status: int) -> None:
    proc = start(*command, "-b", f"127.0.0.1:{refused_port()}")
    before = read_until(proc, proc.stderr, CONNECTING)
    code, out, err, took = signal_and_wait(proc, sig)
    assert code == status, before.decode() + err
    assert "Traceback" not in before.decode() + err
    assert out == ""
    assert took < EXITS_WITHIN


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
@pytest.mark.parametrize("group", [None, "billing"])
def test_a_signal_while_waiting_for_records_is_the_exit_status(mock_cluster: Any, unique_topic: str,
                                                              sig: signal.Signals, status: int,
                                                              group: str | None) -> None:
    from aiokafka_lite.testing.helpers import create_topic, produce

    create_topic(mock_cluster, unique_topic, partitions=1)
    produce(mock_cluster, unique_topic, [("k", "first")])
    grouped = ["--group", group] if group else []
    proc = start("consume", unique_topic, "-b", mock_cluster.bootstrap_servers, "--from", "earliest", *grouped)
    before = read_until(proc, proc.stdout, b"first\"\n")  # then it polls for more, which never come
    code, out, err, took = signal_and_wait(proc, sig)
    assert code == status, err
    assert "Traceback" not in err
    assert before.decode() + out == f'{unique_topic}[0]@0 key="k" value="first"\n'
    assert took < EXITS_WITHIN


def test_consume_that_got_its_max_records_exits_0(mock_cluster: Any, unique_topic: str) -> None:
    from aiokafka_lite.testing.helpers import create_topic, produce

    create_topic(mock_cluster, unique_topic, partitions=1)
    produce(mock_cluster, unique_topic, [("k", "first"), ("k", "second")])
    done = subprocess.run([*CLI, "consume", unique_topic, "-b", mock_cluster.bootstrap_servers, "--from", "earliest",
                           "--max", "2"], capture_output=True, text=True, env=ENV, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [f'{unique_topic}[0]@0 key="k" value="first"',
                                        f'{unique_topic}[0]@1 key="k" value="second"']


def test_ctrl_c_before_the_signal_handlers_are_in_place_is_130_without_a_traceback(monkeypatch: Any) -> None:
    """KeyboardInterrupt, as SIGINT raises it before asyncio's handlers replace Python's (importing
    the command, starting the loop) or after they are gone (the loop's shutdown)."""
    from aiokafka_lite.cli import consume as cli_consume
    from aiokafka_lite.cli.main import main
    from aiokafka_lite.cli.run import run_command

    def interrupted(*args: object, **kwargs: object) -> int:
        raise KeyboardInterrupt

    async def command(stop: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_consume, "run_consume", interrupted)
    try:  # escaping, it would end the whole pytest run rather than fail this test
        assert main(["consume", "orders"]) == 130
        assert run_command(command) == 130
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped the command")
