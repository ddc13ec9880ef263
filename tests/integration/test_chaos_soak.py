"""The chaos soak (``scripts/chaos_soak.py``) at a moderate size: a group of consumer processes
works through the records of a topic while members are SIGKILLed and restarted and stall past
their poll deadline, and the brokers fail: on one broker, its process restarts and every proxied
connection is reset; on a 3-broker cluster (``--cluster``), brokers are SIGKILLed and restarted
and partition leadership moves. The script checks its own figures and exits non-zero on any
failure; these tests also read the figures it prints.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _figure(output: str, name: str) -> int:
    found = re.search(rf"^{re.escape(name)}: (\d+)", output, re.MULTILINE)
    assert found, f"no {name!r} line in the soak's output:\n{output}"
    return int(found.group(1))


def _soak(records: int, faults: int, *options: str, timeout: float) -> str:
    """Run the soak (3 members, seeded) and check the figures every mode shares; returns its output."""
    if shutil.which("java") is None:
        pytest.skip("Apache Kafka needs java")
    soak = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "chaos_soak.py"), "--records", str(records),
         "--members", "3", "--faults", str(faults), "--seed", "5", *options],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        output, _ = soak.communicate(timeout=timeout)
    finally:
        if soak.poll() is None:
            soak.terminate()  # SIGTERM: the script stops its brokers and members on the way out
            output, _ = soak.communicate(timeout=60)
    print(output)
    assert soak.returncode == 0, output
    assert _figure(output, "records") == records
    assert _figure(output, "lost") == 0
    assert _figure(output, "faults injected") >= faults
    assert _figure(output, "redelivered after a covering commit") == 0
    assert "committed to end: 8/8 partitions" in output
    assert "RESULT: PASS" in output
    return output


def _assert_kinds(output: str, kinds: tuple[str, ...]) -> None:
    injected = re.search(r"^faults injected: \d+ \((.*)\)$", output, re.MULTILINE)
    assert injected, output
    for kind in kinds:
        assert kind in injected.group(1), f"no {kind} fault was injected: {injected.group(1)}"


@pytest.mark.slow
def test_chaos_soak_loses_nothing() -> None:
    output = _soak(50_000, 10, "--timeout", "150", timeout=240)
    _assert_kinds(output, ("kill_member", "stall_member", "broker_restart", "reset_connections"))


@pytest.mark.slow
def test_chaos_soak_on_a_cluster_loses_nothing() -> None:
    output = _soak(20_000, 5, "--cluster", "--timeout", "150", timeout=300)
    _assert_kinds(output, ("kill_member", "stall_member", "broker_kill", "broker_restart", "leader_move"))
    assert "replication factor 3" in output
