"""Telling the library's own cancellations from a handler's (STYLE: cancellations are booked).

process() and process_share() cancel a handler's task only through ``Task.cancel()``, which raises
the task's ``cancelling()`` count; ``asyncio.timeout`` keeps the same books. A CancelledError that
comes out of the application's code while the count is 0 was not ours: the handler awaited
something that another task cancelled. That is the handler's failure, like any exception."""

from __future__ import annotations

import asyncio

from ..errors import HandlerCancelledError


def cancel_is_ours() -> bool:
    """The running task was asked to cancel (by process(), close() or whoever owns it)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def as_failure(exc: asyncio.CancelledError, record: object) -> HandlerCancelledError:
    """A CancelledError the library did not cause, as the failure it is (the cause chained)."""
    error = HandlerCancelledError(record)
    error.__cause__ = exc
    return error
