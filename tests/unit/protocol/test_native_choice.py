"""Which record decoder runs, and how the choice shows (--version, metrics, the environment switch)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.protocol import native


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env}, check=False)


def test_the_extension_is_built_wherever_cargo_is() -> None:
    # CI builds it through ./dev: a missing extension there must fail, not fall back quietly. Where the
    # package came from a wheel (scripts/python_matrix.sh), it is there without cargo.
    expected = os.environ.get("AIOKAFKA_LITE_EXPECT_NATIVE", "") not in ("", "0")
    if shutil.which("cargo") is None and not expected:
        pytest.skip("no Rust toolchain here: the pure-Python decoder is the only one")
    if os.environ.get("AIOKAFKA_LITE_NO_NATIVE", "") not in ("", "0"):
        pytest.skip("switched off by AIOKAFKA_LITE_NO_NATIVE")
    assert native.available(), native.why_python()
    from aiokafka_lite import _native  # type: ignore[attr-defined]
    assert _native.DEBUG_BUILD is False, "the extension is a debug build (setup.py must ask for release)"


def test_no_native_environment_variable_forces_the_python_decoder() -> None:
    done = _run("from aiokafka_lite.protocol import native; print(native.decoder(), native.why_python())",
                AIOKAFKA_LITE_NO_NATIVE="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(maxsplit=1) == ["python", "AIOKAFKA_LITE_NO_NATIVE is set\n"]


def test_version_names_the_decoder() -> None:
    forced = _run("from aiokafka_lite.cli import main; main(['--version'])", AIOKAFKA_LITE_NO_NATIVE="1")
    assert "(record decoder: python; AIOKAFKA_LITE_NO_NATIVE is set)" in forced.stdout
    default = _run("from aiokafka_lite.cli import main; main(['--version'])")
    assert f"(record decoder: {native.decoder()}" in default.stdout


def test_native_cannot_be_chosen_when_it_is_switched_off() -> None:
    done = _run("from aiokafka_lite.protocol import native; native.use_decoder('native')",
                AIOKAFKA_LITE_NO_NATIVE="1")
    assert "RuntimeError: the native record decoder is not available" in done.stderr


def test_use_decoder_switches_and_metrics_say_which() -> None:
    consumer = Consumer(bootstrap_servers="127.0.0.1:9")
    before = native.decoder()
    try:
        native.use_decoder("python")
        assert consumer.metrics()["record_decoder"] == "python"
        if native.available():
            native.use_decoder("native")
            assert consumer.metrics()["record_decoder"] == "native"
    finally:
        native.use_decoder(before)
