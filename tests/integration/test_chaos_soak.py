"""The chaos soak (``scripts/chaos_soak.py``) at a moderate size: a group of consumer processes
works through 50,000 records while members are SIGKILLed and restarted, stall past their poll
deadline, the broker process restarts and every proxied connection is reset. The script checks
its own figures and exits non-zero on any failure; this test also reads the figures it prints.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORDS = 50_000
FAULTS = 10


def _figure(output: str, name: str) -> int:
    found = re.search(rf"^{re.escape(name)}: (\d+)", output, re.MULTILINE)
    assert found, f"no {name!r} line in the soak's output:\n{output}"
    return int(found.group(1))


@pytest.mark.slow
def test_chaos_soak_loses_nothing() -> None:
    if shutil.which("java") is None:
        pytest.skip("Apache Kafka needs java")
    soak = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "chaos_soak.py"), "--records", str(RECORDS),
         "--members", "3", "--faults", str(FAULTS), "--seed", "5", "--timeout", "150"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        output, _ = soak.communicate(timeout=240)
    finally:
        if soak.poll() is None:
            soak.terminate()  # SIGTERM: the script stops its broker and members on the way out
            output, _ = soak.communicate(timeout=60)
    print(output)
    assert soak.returncode == 0, output
    assert _figure(output, "records") == RECORDS
    assert _figure(output, "lost") == 0
    assert _figure(output, "faults injected") >= FAULTS
    assert _figure(output, "redelivered after a covering commit") == 0
    kinds = re.search(r"^faults injected: \d+ \((.*)\)$", output, re.MULTILINE)
    assert kinds, output
    for kind in ("kill_member", "stall_member", "broker_restart", "reset_connections"):
        assert kind in kinds.group(1), f"no {kind} fault was injected: {kinds.group(1)}"
    assert "committed to end: 8/8 partitions" in output
    assert "RESULT: PASS" in output
