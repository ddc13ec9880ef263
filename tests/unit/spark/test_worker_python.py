"""register() on a local Spark whose Python workers cannot import aiokafka_lite says so, naming
that Python and PYSPARK_PYTHON, instead of the query failing later inside Spark with
ModuleNotFoundError in an AnalysisException. No SparkSession: a stand-in with the SparkContext's
``master`` and ``pythonExec``."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from aiokafka_lite.errors import ConfigError
from aiokafka_lite.spark.worker_python import check_spark, worker_python_problem


def _session(master: str, python: str) -> Any:
    registered: list[object] = []
    return SimpleNamespace(sparkContext=SimpleNamespace(master=master, pythonExec=python),
                           dataSource=SimpleNamespace(register=registered.append), registered=registered)


def _python_without_the_package(tmp_path: Path) -> Path:
    """The base interpreter of this venv, isolated (-I): no venv site-packages, no current directory."""
    base = getattr(sys, "_base_executable", sys.executable)
    found = subprocess.run([base, "-I", "-c", "import importlib.util as u; print(u.find_spec('aiokafka_lite'))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    if found != "None":
        pytest.skip(f"{base} has aiokafka_lite installed")
    wrapper = tmp_path / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{base}" -I "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def test_this_python_is_fine() -> None:
    assert worker_python_problem(sys.executable) is None


def test_a_python_without_the_package_is_named_with_the_fix(tmp_path: Path) -> None:
    python = _python_without_the_package(tmp_path)
    problem = worker_python_problem(str(python))
    assert problem is not None
    assert f"Spark's Python workers run {str(python)!r}" in problem
    assert "cannot import aiokafka_lite" in problem
    assert "ModuleNotFoundError" in problem
    assert 'os.environ["PYSPARK_PYTHON"] = sys.executable' in problem
    assert sys.executable in problem


def test_a_python_not_on_path_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    problem = worker_python_problem("python3")
    assert problem is not None
    assert "run 'python3'" in problem
    assert "not on PATH" in problem
    assert "PYSPARK_PYTHON" in problem


def test_register_refuses_a_local_spark_whose_workers_cannot_import_it(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from aiokafka_lite.spark import register

    session = _session("local[2]", str(_python_without_the_package(tmp_path)))
    with pytest.raises(ConfigError, match="cannot import aiokafka_lite"):
        register(session)
    assert session.registered == []

    fine = _session("local[2]", sys.executable)
    register(fine)
    assert len(fine.registered) == 1


def test_only_local_mode_is_checked(tmp_path: Path) -> None:
    check_spark(_session("spark://master:7077", str(tmp_path / "nowhere" / "python3")))  # executors' own Pythons
    check_spark(SimpleNamespace())  # Spark Connect: no SparkContext
    with pytest.raises(ConfigError, match="does not exist"):
        check_spark(_session("local[*]", str(tmp_path / "nowhere" / "python3")))
