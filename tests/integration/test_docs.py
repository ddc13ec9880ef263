"""The documentation builds with warnings as errors, and its settings table is current."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aiokafka_lite.config import settings_table

ROOT = Path(__file__).resolve().parents[2]


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install '.[docs]' in the aiokafka-lite clone")
    pytest.importorskip("mkdocstrings",
                        reason="mkdocstrings is not installed: pip install '.[docs]' in the aiokafka-lite clone")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    api = (site / "api" / "index.html").read_text()
    # The API page really was generated from the docstrings, not left empty.
    for anchor in ("aiokafka_lite.Consumer.poll", "aiokafka_lite.Consumer.subscribe",
                   "aiokafka_lite.errors.KafkaTimeoutError", "aiokafka_lite.testing.helpers.produce"):
        assert f'id="{anchor}"' in api


def settings_rows() -> list[str]:
    return [f"| `{row.name}` | `{row.default!r}` | {row.description} |" for row in settings_table()]


def test_settings_page_lists_every_setting_as_the_code_says():
    page = (ROOT / "docs" / "settings.md").read_text().splitlines()
    missing = [row for row in settings_rows() if row not in page]
    assert not missing, ("docs/settings.md is out of date; regenerate its last table from "
                         "aiokafka_lite.config.settings_table(). Missing or changed rows:\n" + "\n".join(missing))


def test_readme_timeouts_match_the_defaults():
    defaults = {row.name: row.default for row in settings_table()}
    readme = (ROOT / "README.md").read_text()
    for name in ("session_timeout_ms", "heartbeat_interval_ms", "max_poll_interval_ms", "request_timeout_ms",
                 "default_api_timeout_ms", "max_poll_records"):
        assert f"| `{name}` | {defaults[name]} |" in readme, name


def test_examples_are_lint_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed")
    done = subprocess.run([ruff, "check", "examples"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


def test_the_prometheus_page_lists_every_family():
    """docs/prometheus.md's metric table names every family the collector exposes (here, not in
    the unit tests: the wheel's test run has no docs/)."""
    pytest.importorskip("prometheus_client")
    from aiokafka_lite.prometheus import FAMILIES
    page = (ROOT / "docs" / "prometheus.md").read_text()
    for family in FAMILIES:
        exposed = {"counter": "_total", "info": "_info"}.get(family.type, "")
        assert re.search(rf"`{family.full_name}{exposed}`", page), family.full_name
