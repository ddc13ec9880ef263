"""KIP-266 in one place: resolve an API call's timeout and bound the call by it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from ..config import ConsumerConfig
from ..errors import InvalidArgumentError, KafkaTimeoutError

T = TypeVar("T")


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT (default_api_timeout_ms)"


DEFAULT: Any = _Default()
Timeout = float | None | Any


def resolve_timeout(timeout: Timeout, config: ConsumerConfig) -> float | None:
    """Omitted -> default_api_timeout_ms; a number -> seconds; None -> no limit (explicit opt-in)."""
    if timeout is DEFAULT:
        return config.default_api_timeout
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
        raise InvalidArgumentError(f"timeout must be a number of seconds >= 0 or None, got {timeout!r}")
    return float(timeout)


async def bounded(awaitable: Awaitable[T], timeout: float | None, what: str) -> T:
    """Await within the timeout; a lapse raises KafkaTimeoutError naming the operation."""
    try:
        async with asyncio.timeout(timeout):
            return await awaitable
    except KafkaTimeoutError:
        raise
    except TimeoutError as exc:
        raise KafkaTimeoutError(f"{what} did not complete within {timeout} s") from exc
