"""Which record decoder runs: the Rust extension ``aiokafka_lite._native`` or the pure-Python reference.

The extension is built by ``pip install`` / ``./dev`` when a Rust toolchain is present. Without it,
or with ``AIOKAFKA_LITE_NO_NATIVE=1`` in the environment, the pure-Python decoder runs: same records,
same errors. ``use_decoder()`` switches at run time (the tests run every record suite through both).
Sans-IO.
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType
from typing import Any, Literal

DecoderName = Literal["native", "python"]
_log = logging.getLogger("aiokafka_lite")


_switched_off = os.environ.get("AIOKAFKA_LITE_NO_NATIVE", "") not in ("", "0")


def _load() -> tuple[ModuleType | None, str]:
    if _switched_off:
        return None, "AIOKAFKA_LITE_NO_NATIVE is set"
    try:
        return importlib.import_module("aiokafka_lite._native"), ""
    except ImportError as exc:
        return None, f"the native extension is not built ({exc})"


_built, _why_not = _load()
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


def why_python() -> str:
    """Why the pure-Python decoder runs ("" when the native one does)."""
    if active is not None:
        return ""
    return _why_not or "switched off with use_decoder('python')"


def use_decoder(name: DecoderName) -> None:
    """Switch decoders at run time; "native" raises RuntimeError when the extension is not available."""
    global active
    if name == "python":
        active = None
    elif _built is None:
        raise RuntimeError(f"the native record decoder is not available: {_why_not}")
    else:
        active = _built
