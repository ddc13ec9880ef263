"""The layout rules `./dev check` keeps (ARCHITECTURE.md): the import contract in pyproject.toml
(layers only downward, the group protocols independent, protocol/ sans-IO, no import circles)
and the 500-line limit. Each rule is run on the package as it is (kept) and on a copy with one
deliberate breach (broken), so neither check can pass by checking nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _copy_project(tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(ROOT / "aiokafka_lite", copy / "aiokafka_lite",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "kafka"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def _lint_imports(project: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(project)}
    return subprocess.run([str(LINT_IMPORTS), "--no-logo", "--no-cache"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def _append_import(module: Path, line: str) -> None:
    module.write_text(module.read_text(encoding="utf-8") + f"\n{line}  # noqa: E402\n", encoding="utf-8")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _copy_project(tmp_path_factory.mktemp("layout"))


def test_the_package_keeps_the_import_contract(project: Path) -> None:
    result = _lint_imports(project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(("module", "line", "contract"), [
    ("fetch/sessions.py", "from ..consumer import consumer", "Layers only downward"),
    ("group/classic/membership.py", "from ..consumer_protocol import state", "The group protocols are independent"),
    ("group/share/state.py", "from ..consumer_protocol import state", "The group protocols are independent"),
    ("protocol/primitives.py", "import asyncio", "protocol/ is sans-IO"),
    ("liveness/stall.py", "from . import health", "No import circles between sibling modules"),
])
def test_a_deliberate_breach_is_refused(tmp_path: Path, module: str, line: str, contract: str) -> None:
    project = _copy_project(tmp_path)
    if contract.startswith("No import circles"):
        _append_import(project / "aiokafka_lite/liveness/health.py", "from . import stall")
    _append_import(project / "aiokafka_lite" / module, line)
    result = _lint_imports(project)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{contract} BROKEN" in result.stdout


def test_no_module_is_over_the_size_limit() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "scripts/check_module_size.py")], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


def test_a_module_over_the_limit_is_named(tmp_path: Path) -> None:
    package = tmp_path / "aiokafka_lite"
    (package / "fetch").mkdir(parents=True)
    (package / "fetch" / "short.py").write_text("x = 1\n" * 500, encoding="utf-8")
    (package / "fetch" / "long.py").write_text("x = 1\n" * 501, encoding="utf-8")
    result = subprocess.run([sys.executable, str(ROOT / "scripts/check_module_size.py"), str(package)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "aiokafka_lite/fetch/long.py: 501 lines (limit 500): split it by responsibility, "
        "or list it in ALLOWED in check_module_size.py with the reason"]
