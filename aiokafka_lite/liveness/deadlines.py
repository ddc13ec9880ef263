"""KIP-266 in one place: resolve an API call's timeout and bound the call by it.

A timeout is seconds: an int or a float >= 0. NaN, a negative number, a bool or anything else
raises :class:`InvalidArgumentError` at once, before any I/O. ``math.inf``, or any value above
:data:`MAX_TIMEOUT` (Java's longest, ``Long.MAX_VALUE`` ms: about 292 million years), means no
limit, exactly as ``None`` does where ``None`` is allowed; so no deadline ever overflows.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar

from ..config import INT64_MAX, ConsumerConfig
from ..errors import ConsumerClosedError, DeserializerNotReadyError, InvalidArgumentError, KafkaTimeoutError

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")

MAX_TIMEOUT = INT64_MAX / 1000  # seconds; above it, a timeout means no limit
_PREPARE_MARGIN = 0.05  # seconds: a deserializer's preparation ends this much before its poll()


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT (default_api_timeout_ms)"


DEFAULT: Any = _Default()
Timeout = float | None | Any


def check_timeout(timeout: object, *, none_ok: bool = True, what: str = "timeout") -> float | None:
    """A caller's timeout in seconds, validated: None (no limit, where ``none_ok``) or a number
    >= 0; ``math.inf`` or anything above MAX_TIMEOUT becomes None. Anything else, NaN included,
    raises InvalidArgumentError."""
    if timeout is None and none_ok:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:  # NaN too
        allowed = "a number of seconds >= 0" + (" or None" if none_ok else "")
        raise InvalidArgumentError(f"{what} must be {allowed}, got {timeout!r}")
    return None if timeout > MAX_TIMEOUT else float(timeout)


def resolve_timeout(timeout: Timeout, config: ConsumerConfig) -> float | None:
    """Omitted -> default_api_timeout_ms; a number -> seconds; None -> no limit (explicit opt-in)."""
    if timeout is DEFAULT:
        return config.default_api_timeout
    return check_timeout(timeout)


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


async def merge_within(tasks: Sequence[asyncio.Future[dict[K, V]]], timeout: float | None, into: dict[K, V]) -> bool:
    """Merge every task's answer (a dict) into ``into``; False when the timeout lapsed first
    (the tasks are then cancelled and awaited, and none of their answers counts)."""
    try:
        async with asyncio.timeout(timeout):
            answers = await asyncio.gather(*tasks)
    except TimeoutError:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return False
    for answer in answers:
        into.update(answer)
    return True


def _never() -> bool:
    return False


async def prepare_deserializer(not_ready: DeserializerNotReadyError, deadline: float | None) -> None:
    """Await a deserializer's preparation (a schema lookup) within the time its poll() has left
    (until ``deadline``, loop time; None: no limit). Its own limit ends a little before the poll()'s, so that it
    says what happened: a registry that failed (its error, raised by poll()) is not one that is
    slow (KafkaTimeoutError, which poll() takes for its own timeout: empty)."""
    left = math.inf if deadline is None else deadline - asyncio.get_running_loop().time()
    await not_ready.prepare(max(0.0, left - min(_PREPARE_MARGIN, left / 10)))


def own_failure(deserializer: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A deserializer is plain code that nothing cancels: a CancelledError out of it is its own
    failure, a poison record like any other (never a cancellation of the poll() caller)."""

    def deserialize(data: Any) -> Any:
        try:
            return deserializer(data)
        except asyncio.CancelledError as exc:
            raise RuntimeError("the deserializer raised CancelledError without being cancelled") from exc

    return deserialize
