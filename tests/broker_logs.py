"""A failing test's report carries what its brokers logged at ERROR while it ran (#40: a broker's
unexpected error, such as UNKNOWN_SERVER_ERROR in an answer, is explained only by the broker's own
log, which is deleted with the session's broker). Hooked in tests/conftest.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MAX_LINES = 60


def broker_logs(funcargs: dict[str, Any]) -> dict[str, Path]:
    """The server.log of each broker fixture the test uses (by fixture name)."""
    logs: dict[str, Path] = {}
    for name, value in funcargs.items():
        try:
            path = getattr(value, "log_path", None)
        except RuntimeError:  # a broker that never started
            continue
        if isinstance(path, Path):
            logs[name] = path
    return logs


def log_sizes(logs: dict[str, Path]) -> dict[str, int]:
    sizes = {}
    for name, path in logs.items():
        try:
            sizes[name] = path.stat().st_size
        except OSError:
            sizes[name] = 0
    return sizes


def errors_since(path: Path, offset: int) -> str:
    """The ERROR and FATAL entries logged after ``offset``, each with the stack trace under it."""
    try:
        with path.open("rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
    except OSError as exc:
        return f"(unreadable: {exc})"
    said: list[str] = []
    in_entry = False
    for line in text.splitlines():
        if line.startswith("["):  # a new log4j entry: "[2026-11-29 ...] LEVEL ..."
            in_entry = " ERROR " in line or " FATAL " in line
        if in_entry:
            said.append(line)
    if len(said) > MAX_LINES:
        said = [*said[:MAX_LINES], f"... {len(said) - MAX_LINES} more lines in {path}"]
    return "\n".join(said)
