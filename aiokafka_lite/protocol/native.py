"""Which record decoder runs: the Rust extension ``aiokafka_lite._native`` or the pure-Python reference.

The extension is built by ``pip install`` / ``./dev`` when a Rust toolchain is present. Without it,
or with ``AIOKAFKA_LITE_NO_NATIVE=1`` in the environment, the pure-Python decoder runs: same records,
same errors. ``use_decoder()`` switches at run time (the tests run every record suite through both).
When cargo was there but the build failed, setup.py left the reason in the package
(``BUILD_FAILURE_FILE``): this module names it wherever it says why the pure-Python decoder runs, and
warns once per process when a consumer starts on it. Sans-IO.
"""

from __future__ import annotations

import importlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

DecoderName = Literal["native", "python"]
# Written by setup.py (BUILD_FAILURE_FILE there) beside the extension when its build failed.
BUILD_FAILURE_FILE = "_native_build_failure.txt"
_log = logging.getLogger("aiokafka_lite")


@dataclass(frozen=True)
class Found:
    """What the search for the extension found: the module, or why not."""

    extension: ModuleType | None
    why_not: str = ""
    build_failure: tuple[str, ...] = ()  # the failed build's reason, when that is why


def read_build_failure(path: Path) -> tuple[str, ...]:
    """The reason's lines that setup.py left when the build failed; () when it left none."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    return tuple(stripped for line in text.splitlines() if (stripped := line.strip()))


def find_extension(package_dir: Path, switched_off: bool) -> Found:
    """The extension of the package in `package_dir`, unless the environment switched it off."""
    if switched_off:
        return Found(None, "AIOKAFKA_LITE_NO_NATIVE is set")
    try:
        return Found(importlib.import_module("aiokafka_lite._native"))
    except ImportError as exc:
        failure_file = package_dir / BUILD_FAILURE_FILE
        failure = read_build_failure(failure_file)
        if not failure:
            return Found(None, f"the native extension is not built ({exc})")
        summary = failure[0] if len(failure) == 1 else f"{failure[0]} ... {failure[-1]}"
        return Found(None, f"the native extension failed to build when aiokafka-lite was installed, although "
                           f"cargo was there: {summary} (the reason: {failure_file})", failure)


class BuildFailureNotice:
    """The one WARNING per process, when a consumer starts on the pure-Python decoder because the
    build failed: not when cargo was absent, nor when the environment or use_decoder() chose it."""

    def __init__(self, found: Found) -> None:
        self._found = found
        self._chosen = False
        self._said = False

    def decoder_chosen(self) -> None:
        """use_decoder() was called: the decoder that runs from now on was asked for."""
        self._chosen = True

    def consumer_starting(self) -> None:
        if self._said or self._chosen or not self._found.build_failure:
            return
        self._said = True
        _log.warning("aiokafka-lite runs its pure-Python record decoder, at less than half the speed: %s. "
                     "Fix the cause and install aiokafka-lite again, or set AIOKAFKA_LITE_NO_NATIVE=1 "
                     "to run the pure-Python decoder by choice", self._found.why_not)


_switched_off = os.environ.get("AIOKAFKA_LITE_NO_NATIVE", "") not in ("", "0")
_found = find_extension(Path(__file__).resolve().parent.parent, _switched_off)
_built, _why_not = _found.extension, _found.why_not
_notice = BuildFailureNotice(_found)
if _built is None and not _switched_off:  # asked for by the environment: nothing to tell
    _log.info("aiokafka-lite runs its pure-Python record decoder: %s", _why_not)
# The module the record decoder calls, or None for the pure-Python path.
active: Any = _built


def decoder() -> DecoderName:
    """The record decoder in use: "native" (Rust) or "python"."""
    return "native" if active is not None else "python"


def available() -> bool:
    """True when the native extension is built and loadable (whether or not it is in use)."""
    return _built is not None


def extension() -> ModuleType | None:
    """The loaded extension, whichever decoder is in use (None: not built, or the environment
    switched it off): its other native parts (the frame reader) go by the same decision."""
    return _built


def why_python() -> str:
    """Why the pure-Python decoder runs ("" when the native one does)."""
    if active is not None:
        return ""
    return _why_not or "switched off with use_decoder('python')"


def warn_if_build_failed() -> None:
    """Called as a consumer starts: the build failure's WARNING, once per process (BuildFailureNotice)."""
    _notice.consumer_starting()


def use_decoder(name: DecoderName) -> None:
    """Switch decoders at run time; "native" raises RuntimeError when the extension is not available."""
    global active
    if name == "python":
        active = None
    elif _built is None:
        raise RuntimeError(f"the native record decoder is not available: {_why_not}")
    else:
        active = _built
    _notice.decoder_chosen()
