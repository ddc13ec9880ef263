"""KIP-266 in one place: resolve an API call's timeout and bound the call by it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from ..config import ConsumerConfig
from ..errors import ConsumerClosedError, InvalidArgumentError, KafkaTimeoutError

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


async def bounded(awaitable: Awaitable[T], timeout: float | None, what: str,
                  closed: Callable[[], bool] | None = None) -> T:
    """Await within the timeout; a lapse raises KafkaTimeoutError naming the operation. With
    `closed`, a close() that ends what the call waits for raises ConsumerClosedError."""
    try:
        with closed_not_cancelled(closed or _never, what):
            async with asyncio.timeout(timeout):
                return await awaitable
    except KafkaTimeoutError:
        raise
    except TimeoutError as exc:
        raise KafkaTimeoutError(f"{what} did not complete within {timeout} s") from exc


@contextlib.contextmanager
def closed_not_cancelled(closed: Callable[[], bool], what: str) -> Iterator[None]:
    """A call waits for work the consumer owns (the start attempt, a queued commit, a poll step)
    and close() cancels that work. The CancelledError it then raises belongs to the work, not to
    the caller, whose own task was not cancelled (Task.cancelling() is 0): the caller gets
    ConsumerClosedError. A cancellation of the caller's task always propagates."""
    try:
        yield
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling() == 0 and closed():
            raise ConsumerClosedError(f"the consumer was closed while {what} was in flight") from exc
        raise


def _never() -> bool:
    return False
