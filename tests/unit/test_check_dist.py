"""scripts/check_dist.py (scripts/python_matrix.sh runs it on what python -m build made): an sdist
without the Rust sources, or a wheel without the native decoder or the abi3 manylinux tag, fails."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_dist.py"
_spec = importlib.util.spec_from_file_location("check_dist", SCRIPT)
assert _spec is not None
assert _spec.loader is not None
check_dist = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_dist)

GOOD_WHEEL = "aiokafka_lite-1.0-cp311-abi3-manylinux_2_34_x86_64.whl"
WHEEL_LICENSE = "aiokafka_lite-1.0.dist-info/licenses/LICENSE"


def _sdist(dist: Path, members: tuple[str, ...]) -> None:
    with tarfile.open(dist / "aiokafka_lite-1.0.tar.gz", "w:gz") as archive:
        for member in members:
            info = tarfile.TarInfo(f"aiokafka_lite-1.0/{member}")
            archive.addfile(info, io.BytesIO(b""))


def _wheel(dist: Path, name: str, members: tuple[str, ...]) -> None:
    with zipfile.ZipFile(dist / name, "w") as archive:
        for member in members:
            archive.writestr(member, b"")


def _dist(tmp_path: Path, *, sdist_members: tuple[str, ...] = check_dist.SDIST_MEMBERS,
          wheel: str = GOOD_WHEEL, wheel_members: tuple[str, ...] = (*check_dist.WHEEL_MEMBERS, WHEEL_LICENSE)) -> Path:
    _sdist(tmp_path, sdist_members)
    _wheel(tmp_path, wheel, wheel_members)
    return tmp_path


def _run(dist: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(dist)], capture_output=True, text=True, timeout=60,
                          check=False)


def test_complete_release_files_pass(tmp_path: Path) -> None:
    done = _run(_dist(tmp_path))
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.parametrize("missing", ["native/Cargo.toml", "native/Cargo.lock", "native/src/lib.rs"])
def test_an_sdist_without_the_rust_sources_fails(tmp_path: Path, missing: str) -> None:
    members = tuple(m for m in check_dist.SDIST_MEMBERS if m != missing)
    done = _run(_dist(tmp_path, sdist_members=members))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"aiokafka_lite-1.0.tar.gz lacks {missing}"]


def test_a_wheel_without_the_native_decoder_or_license_fails(tmp_path: Path) -> None:
    done = _run(_dist(tmp_path, wheel_members=("aiokafka_lite/__init__.py", "aiokafka_lite/py.typed")))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"{GOOD_WHEEL} lacks aiokafka_lite/_native.abi3.so",
                                        f"{GOOD_WHEEL} lacks the license file"]


@pytest.mark.parametrize("name", ["aiokafka_lite-1.0-cp311-abi3-linux_x86_64.whl",  # not repaired
                                  "aiokafka_lite-1.0-cp312-cp312-manylinux_2_34_x86_64.whl"])  # one Python only
def test_a_wheel_not_abi3_manylinux_fails(tmp_path: Path, name: str) -> None:
    done = _run(_dist(tmp_path, wheel=name))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"{name} is not a cp311-abi3 manylinux wheel"]


def test_two_wheels_are_ambiguous(tmp_path: Path) -> None:
    _dist(tmp_path)
    _wheel(tmp_path, "aiokafka_lite-0.9-cp311-abi3-manylinux_2_34_x86_64.whl", ())
    done = _run(tmp_path)
    assert done.returncode == 1
    assert "should hold one sdist and one wheel" in done.stderr
