"""A failed Rust build speaks: the reason setup.py leaves in the package is named by why_python(),
`--version` and the INFO line, and a consumer starting on the pure-Python decoder because of it logs
one WARNING per process (none when cargo was absent or the pure-Python decoder was chosen)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aiokafka_lite.protocol import native
from aiokafka_lite.protocol.native import BUILD_FAILURE_FILE, BuildFailureNotice, Found

PACKAGE = Path(native.__file__).resolve().parents[1]
REASON = ["error: this file contains an unclosed delimiter", "--> src/lib.rs:65:14",
          "error: could not compile `aiokafka-lite-native` (lib) due to 1 previous error"]


@pytest.fixture
def no_extension(monkeypatch: pytest.MonkeyPatch) -> None:
    """The extension cannot be imported, as where it did not build."""
    monkeypatch.setitem(sys.modules, "aiokafka_lite._native", None)


def _leave_reason(package_dir: Path, lines: list[str]) -> Path:
    path = package_dir / BUILD_FAILURE_FILE
    path.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    return path


def test_the_reason_is_read_line_by_line_and_absent_means_none(tmp_path: Path) -> None:
    assert native.read_build_failure(tmp_path / BUILD_FAILURE_FILE) == ()
    path = _leave_reason(tmp_path, ["  error: one  ", "", "error: two"])
    assert native.read_build_failure(path) == ("error: one", "error: two")


@pytest.mark.usefixtures("no_extension")
def test_a_failed_build_is_why_the_python_decoder_runs(tmp_path: Path) -> None:
    path = _leave_reason(tmp_path, REASON)
    found = native.find_extension(tmp_path, switched_off=False)
    assert found.extension is None
    assert found.build_failure == tuple(REASON)
    assert found.why_not == ("the native extension failed to build when aiokafka-lite was installed, although "
                             f"cargo was there: {REASON[0]} ... {REASON[-1]} (the reason: {path})")


@pytest.mark.usefixtures("no_extension")
def test_without_a_reason_the_extension_is_simply_not_built(tmp_path: Path) -> None:
    found = native.find_extension(tmp_path, switched_off=False)
    assert (found.extension, found.build_failure) == (None, ())
    assert found.why_not.startswith("the native extension is not built (")


def test_the_environment_switch_is_the_reason_even_after_a_failed_build(tmp_path: Path) -> None:
    _leave_reason(tmp_path, REASON)
    assert native.find_extension(tmp_path, switched_off=True) == Found(None, "AIOKAFKA_LITE_NO_NATIVE is set")


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name == "aiokafka_lite"]


def test_a_failed_build_is_a_warning_once_per_process(caplog: pytest.LogCaptureFixture) -> None:
    notice = BuildFailureNotice(Found(None, "the native extension failed to build ...", tuple(REASON)))
    notice.consumer_starting()
    notice.consumer_starting()
    assert _warnings(caplog) == [
        "aiokafka-lite runs its pure-Python record decoder, at less than half the speed: the native extension "
        "failed to build .... Fix the cause and install aiokafka-lite again, or set AIOKAFKA_LITE_NO_NATIVE=1 "
        "to run the pure-Python decoder by choice"]


def test_no_warning_when_cargo_was_absent(caplog: pytest.LogCaptureFixture) -> None:
    BuildFailureNotice(Found(None, "the native extension is not built (no module)")).consumer_starting()
    assert _warnings(caplog) == []


def test_no_warning_when_the_python_decoder_was_chosen(caplog: pytest.LogCaptureFixture) -> None:
    notice = BuildFailureNotice(Found(None, "the native extension failed to build ...", tuple(REASON)))
    notice.decoder_chosen()
    notice.consumer_starting()
    assert _warnings(caplog) == []


# The whole way, in a process of its own: the package copied without its extension and with the
# reason setup.py leaves; two consumers start (on a port nothing listens on).
START_TWO_CONSUMERS = """
import asyncio, logging, sys
sys.modules["aiokafka_lite._native"] = None  # an editable install elsewhere must not lend its build
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s", stream=sys.stdout)
from aiokafka_lite import Consumer
from aiokafka_lite.cli import main

async def start_two():
    for _ in range(2):
        consumer = Consumer(bootstrap_servers="127.0.0.1:9", default_api_timeout_ms=200)
        try:
            await consumer.start()
        except Exception:
            pass
        await consumer.close()

if "--choose-python" in sys.argv:
    from aiokafka_lite.protocol import native
    native.use_decoder("python")
asyncio.run(start_two())
main(["--version"])
"""


def _run_unbuilt_copy(tmp_path: Path, *args: str, reason: list[str] | None = REASON) -> list[str]:
    copy = tmp_path / "site" / "aiokafka_lite"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("_native*", "__pycache__"))
    if reason is not None:
        _leave_reason(copy, reason)
    env = {**os.environ, "PYTHONPATH": str(copy.parent)}
    env.pop("AIOKAFKA_LITE_NO_NATIVE", None)
    done = subprocess.run([sys.executable, "-c", START_TWO_CONSUMERS, *args], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if "record decoder" in line]


def test_the_failed_build_is_said_by_info_warning_and_version(tmp_path: Path) -> None:
    lines = _run_unbuilt_copy(tmp_path)
    why = ("the native extension failed to build when aiokafka-lite was installed, although cargo was there: "
           f"{REASON[0]} ... {REASON[-1]} (the reason: {tmp_path / 'site' / 'aiokafka_lite' / BUILD_FAILURE_FILE})")
    assert lines == [
        f"INFO aiokafka_lite aiokafka-lite runs its pure-Python record decoder: {why}",
        f"WARNING aiokafka_lite aiokafka-lite runs its pure-Python record decoder, at less than half the speed: "
        f"{why}. Fix the cause and install aiokafka-lite again, or set AIOKAFKA_LITE_NO_NATIVE=1 to run the "
        "pure-Python decoder by choice",
        f"aiokafka-lite {_version()} (record decoder: python; {why})"]


def test_a_chosen_python_decoder_or_no_cargo_is_no_warning(tmp_path: Path) -> None:
    chosen = _run_unbuilt_copy(tmp_path / "chosen", "--choose-python")
    assert [line.split(maxsplit=1)[0] for line in chosen] == ["INFO", "aiokafka-lite"]
    no_cargo = _run_unbuilt_copy(tmp_path / "no-cargo", reason=None)
    assert [line.split(maxsplit=1)[0] for line in no_cargo] == ["INFO", "aiokafka-lite"]
    assert "the native extension is not built (" in no_cargo[-1]


def _version() -> str:
    from aiokafka_lite import __version__
    return __version__
