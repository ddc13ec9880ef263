"""Running a test once per record decoder (Rust and Python), shared by the unit and integration suites.

The native case is skipped only where no Rust toolchain exists; with ``cargo`` on PATH an unbuilt
extension fails the run, so CI cannot silently test the Python decoder twice (unless
AIOKAFKA_LITE_NO_NATIVE asks for the Python decoder only).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from aiokafka_lite.protocol import native
from aiokafka_lite.protocol.native import DecoderName


def require_native() -> None:
    """Skip (no Rust toolchain) or fail (toolchain but no extension) unless the extension loads."""
    if native.available():
        return
    if os.environ.get("AIOKAFKA_LITE_NO_NATIVE", "") not in ("", "0"):
        pytest.skip("the native decoder is switched off by AIOKAFKA_LITE_NO_NATIVE")
    if shutil.which("cargo") is None:
        pytest.skip(f"no Rust toolchain: {native.why_python()}")
    pytest.fail("cargo is on PATH but the native extension is not built: run `cd native && cargo build "
                "--release` and copy target/release/lib_native.so to aiokafka_lite/_native.*.so", pytrace=False)


@contextmanager
def decoder_in_use(name: DecoderName) -> Iterator[DecoderName]:
    """``name`` switched on (the native one required) for the block, the previous decoder restored after."""
    if name == "native":
        require_native()
    before = native.decoder()
    native.use_decoder(name)
    try:
        yield name
    finally:
        native.use_decoder(before)


def converted(columns: Any, key_deserializer: Any, value_deserializer: Any) -> Any:
    """RecordColumns.converted_until_failure for records every deserializer takes: the copy."""
    copy, bad = columns.converted_until_failure(key_deserializer, value_deserializer)
    assert bad is None, bad
    return copy
