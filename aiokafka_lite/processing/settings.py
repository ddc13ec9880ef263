"""process()'s settings: names, defaults and checks in one place (docs/processing.md lists them).

Durations are seconds (floats), as every duration in the API; sizes are counts."""

from __future__ import annotations

import difflib
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeVar

from ..errors import InvalidArgumentError
from ..structs import ConsumerRecord

Ordering = Literal["key", "partition", "none"]
ORDERINGS: tuple[str, ...] = ("key", "partition", "none")
Handler = Callable[[ConsumerRecord], Awaitable[Any]]
# Called once a record failed every attempt, with the last error; a plain or async function.
FailureHook = Callable[[ConsumerRecord, Exception], Any]

S = TypeVar("S")

KAFKA_METADATA_MAX_BYTES = 4096  # the broker's offset.metadata.max.bytes default


@dataclass(frozen=True)
class ProcessSettings:
    concurrency: int = 16
    ordering: Ordering = "key"
    max_pending_records: int | None = None  # None: 10 x concurrency, at least 500
    max_retries: int = 3  # attempts after the first
    retry_backoff: float = 0.1  # before the first retry; doubles each retry
    retry_backoff_max: float = 10.0
    drain_timeout: float = 10.0  # revocation / stop: how long in-flight handlers may finish
    commit_interval: float | None = None  # None: the consumer's auto_commit_interval_ms
    metadata_max_bytes: int = KAFKA_METADATA_MAX_BYTES
    poll_timeout: float = 0.1  # each poll()'s wait: how soon a stop or freed room is noticed
    stuck_handler_warning: float | None = 60.0  # a handler running this long is logged once (None: never)

    def __post_init__(self) -> None:
        check_int_at_least("concurrency", self.concurrency, 1)
        if self.ordering not in ORDERINGS:
            raise InvalidArgumentError(f"ordering must be one of {', '.join(ORDERINGS)}, got {self.ordering!r}")
        if self.max_pending_records is not None:
            check_int_at_least("max_pending_records", self.max_pending_records, self.concurrency)
        check_int_at_least("max_retries", self.max_retries, 0)
        check_int_at_least("metadata_max_bytes", self.metadata_max_bytes, 0)
        for name in ("retry_backoff", "retry_backoff_max", "drain_timeout", "poll_timeout"):
            check_seconds(name, getattr(self, name))
        for name in ("commit_interval", "stuck_handler_warning"):
            if getattr(self, name) is not None:
                check_seconds(name, getattr(self, name))

    @property
    def bound(self) -> int:
        """Records held at most (running plus waiting)."""
        if self.max_pending_records is not None:
            return self.max_pending_records
        return max(10 * self.concurrency, 500)

    def backoff(self, retry: int) -> float:
        """The wait before retry number ``retry`` (1-based): exponential, capped."""
        return float(min(self.retry_backoff * 2.0 ** (retry - 1), self.retry_backoff_max))


def process_settings(given: Mapping[str, Any]) -> ProcessSettings:
    """ProcessSettings from process()'s keyword arguments (settings_from)."""
    return settings_from(ProcessSettings, given, "process()")


def settings_from(kind: type[S], given: Mapping[str, Any], caller: str) -> S:
    """A helper's settings from its keyword arguments: a name it does not know is refused with the
    closest one (a misspelt setting must not fall back to its default unnoticed)."""
    names = sorted(f.name for f in fields(kind))  # type: ignore[arg-type]
    for name in sorted(set(given) - set(names)):
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"the settings are {', '.join(names)}"
        raise InvalidArgumentError(f"{caller} has no setting {name!r}; {hint}")
    return kind(**given)


def check_int_at_least(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidArgumentError(f"{name} must be an int >= {low}, got {value!r}")


def check_seconds(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) or value < 0 \
            or math.isinf(value):
        raise InvalidArgumentError(f"{name} must be a number of seconds >= 0, got {value!r}")
