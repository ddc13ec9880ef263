"""The suite's own leak check (tests/conftest.py): a socket left open fails the test that left it,
including when the objects that survive each test are frozen to keep the collections cheap."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

_TESTS = '''
import asyncio
import socket

kept = []


class Cycle:
    def __init__(self):
        self.me = self
        self.sock = socket.socket()


def test_clean():
    pass


def test_leaks_a_socket_in_a_cycle():
    Cycle()


def test_clean_after_the_leak():
    pass


def test_leaves_a_task_exception_unretrieved():
    async def fail():
        raise ValueError("nobody looks")

    async def main():
        asyncio.get_running_loop().create_task(fail())
        await asyncio.sleep(0)

    asyncio.run(main())


def test_clean_after_the_task():
    pass


def test_keeps_a_socket_past_its_end():
    kept.append(Cycle())


def test_drops_it_later_unclosed():
    kept.clear()


def test_last_of_the_module():
    pass

'''


def test_a_socket_left_behind_fails_the_test_that_left_it(tmp_path: Path) -> None:
    tests = Path(__file__).parents[1]
    shutil.copy(tests / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "tests").mkdir()  # what the conftest imports from this suite
    (tmp_path / "tests" / "__init__.py").write_text("")
    shutil.copy(tests / "broker_logs.py", tmp_path / "tests" / "broker_logs.py")
    shutil.copy(tests / "loop_leftovers.py", tmp_path / "tests" / "loop_leftovers.py")
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nfilterwarnings = error\nasyncio_default_fixture_loop_scope = function\n")
    (tmp_path / "test_leaks.py").write_text(_TESTS)
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rA",
                          "test_leaks.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    outcomes = {line.split("::")[1].split()[0]: line.split()[0] for line in run.stdout.splitlines()
                if line.startswith(("PASSED test_leaks.py::", "ERROR test_leaks.py::"))}
    assert outcomes["test_clean"] == "PASSED", run.stdout
    # Collected in its own teardown: the test errors there, and the next one is clean.
    assert outcomes["test_leaks_a_socket_in_a_cycle"] == "ERROR", run.stdout
    assert outcomes["test_clean_after_the_leak"] == "PASSED", run.stdout
    # A socket that outlived its test was frozen with the survivors; dropped later, it is still
    # found, at the latest by the module's last test, which collects everything.
    later = [outcomes[name] for name in ("test_drops_it_later_unclosed", "test_last_of_the_module")]
    assert "ERROR" in later, run.stdout
    assert "unclosed <socket.socket" in run.stdout, run.stdout
    # asyncio's "Task exception was never retrieved" fails the test whose task it was.
    assert outcomes["test_leaves_a_task_exception_unretrieved"] == "ERROR", run.stdout
    assert "Task exception was never retrieved" in run.stdout, run.stdout
    assert outcomes["test_clean_after_the_task"] == "PASSED", run.stdout
