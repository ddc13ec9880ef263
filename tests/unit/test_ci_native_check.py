"""CI's check (scripts/check_native_built.py, run by .ci/run before the tests): the native decoder
must be built wherever cargo is on PATH; without cargo there is nothing to check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_native_built.py"


def _check(tmp_path: Path, *, cargo: bool, built: bool, kept: str = "") -> subprocess.CompletedProcess[str]:
    package, bin_dir = tmp_path / "aiokafka_lite", tmp_path / "bin"
    package.mkdir()
    bin_dir.mkdir()
    if cargo:
        (bin_dir / "cargo").write_text("#!/bin/sh\n")
        (bin_dir / "cargo").chmod(0o755)
    if built:
        (package / "_native.abi3.so").write_bytes(b"")
    if kept:
        (package / "_native_build_failure.txt").write_text(kept)
    return subprocess.run([sys.executable, str(SCRIPT), str(package)], capture_output=True, text=True, timeout=60,
                          env={"PATH": str(bin_dir)}, check=False)


def test_cargo_without_the_extension_fails_in_one_line(tmp_path: Path) -> None:
    done = _check(tmp_path, cargo=True, built=False)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"the native record decoder is not built in {tmp_path / 'aiokafka_lite'} although cargo is on PATH "
        f"({tmp_path / 'bin' / 'cargo'}): setup.py kept no reason (./dev's log: .venv/native-build.log)"]


def test_the_line_names_the_reason_setup_py_kept(tmp_path: Path) -> None:
    done = _check(tmp_path, cargo=True, built=False, kept="error: failed to download `snap v1.1.2`\n"
                                                          "unable to get packages\nunexpected end of file\n")
    assert done.returncode == 1
    assert ": error: failed to download `snap v1.1.2` ... unexpected end of file (./dev's log" in done.stderr


@pytest.mark.parametrize(("cargo", "built"), [(True, True), (False, False), (False, True)])
def test_a_built_extension_or_no_cargo_passes_silently(tmp_path: Path, cargo: bool, built: bool) -> None:
    done = _check(tmp_path, cargo=cargo, built=built)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_ci_runs_the_check_before_the_tests() -> None:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    check = lines.index(".venv/bin/python scripts/check_native_built.py || exit 1")
    assert check < min(i for i, line in enumerate(lines) if line.startswith("./dev test"))


def test_every_reader_of_the_kept_reason_names_the_file_native_py_reads() -> None:
    from aiokafka_lite.protocol.native import BUILD_FAILURE_FILE
    assert f'BUILD_FAILURE_FILE = "{BUILD_FAILURE_FILE}"' in SCRIPT.read_text()
    assert f"KEPT_REASON=aiokafka_lite/{BUILD_FAILURE_FILE}\n" in (ROOT / "dev").read_text()
    assert f"aiokafka_lite/{BUILD_FAILURE_FILE}\n" in (ROOT / ".gitignore").read_text()
