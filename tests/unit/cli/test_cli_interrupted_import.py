"""Ctrl-C while the `aiokafka-lite` command is still importing the package exits 130 without a
traceback, as it does once a command has started (test_cli_signals.py). The import is held
deterministically: a sitecustomize on PYTHONPATH (a temp dir, this test's only) adds an import hook
that says so on stderr and sleeps when the package's heaviest module is imported, so the signal
always lands inside the package's import."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .test_cli_signals import ENV, read_until, refused_port, signal_and_wait

HELD = b"test hook: holding the import of aiokafka_lite.consumer.consumer"
SITECUSTOMIZE = f"""
    import sys
    import time


    class HoldImport:
        def find_spec(self, name, path=None, target=None):
            if name == "aiokafka_lite.consumer.consumer":
                sys.stderr.write({HELD.decode()!r} + "\\n")
                sys.stderr.flush()
                time.sleep(60)
            return None


    sys.meta_path.insert(0, HoldImport())
"""
SCRIPT = Path(sys.executable).with_name("aiokafka-lite")


@pytest.mark.parametrize("command", [
    pytest.param([sys.executable, "-m", "aiokafka_lite"], id="python-m"),
    pytest.param([str(SCRIPT)], id="console-script"),
])
def test_sigint_while_the_package_is_imported_exits_130_quietly(command: list[str], tmp_path: Path) -> None:
    if not SCRIPT.exists() and command[0] == str(SCRIPT):
        pytest.skip(f"no console script at {SCRIPT}")
    (tmp_path / "sitecustomize.py").write_text(textwrap.dedent(SITECUSTOMIZE))
    env = {**ENV, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), ENV.get("PYTHONPATH")]))}
    proc = subprocess.Popen([*command, "consume", "orders", "-b", f"127.0.0.1:{refused_port()}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, bufsize=0)
    got = read_until(proc, proc.stderr, HELD)
    code, out, err, _ = signal_and_wait(proc, signal.SIGINT)
    said = (got.decode().split(HELD.decode(), 1)[1] + err).strip()
    assert "Traceback" not in said, said
    assert "KeyboardInterrupt" not in said, said
    assert len(said.splitlines()) <= 1, said
    assert code == 130, f"exit {code}: {said}"
    assert out == ""



def test_a_program_importing_the_library_keeps_its_keyboard_interrupt() -> None:
    from aiokafka_lite._interrupted_import import exit_quietly_if_interrupted, running_as_the_command

    assert not running_as_the_command()  # pytest is not the command
    with pytest.raises(KeyboardInterrupt), exit_quietly_if_interrupted():
        raise KeyboardInterrupt
