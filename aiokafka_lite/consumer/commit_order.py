"""Commits complete in the order they were made: Java's commitSync contract (KIP-266).

Every commit the consumer makes (commit(), commit_async(), auto-commit, the commit before a
rebalance or at close) is queued here. A commit is sent only after every commit made before it
has completed, whatever the outcome, so an older offset can never land after a newer one: not
when a request is retried, not when the coordinator moves. A commit whose caller gave up (its
timeout lapsed) is cancelled before it is sent, or abandoned with its request in flight on the
coordinator connection, whose requests the broker answers in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class CommitQueue:
    def __init__(self) -> None:
        self._pending: list[asyncio.Task[None]] = []  # in the order they were made

    def submit(self, commit: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """Start `commit` once every commit made before it has completed."""
        earlier = [t for t in self._pending if not t.done()]
        task = asyncio.create_task(_after(earlier, commit), name="aiokafka-lite commit")
        self._pending = [*earlier, task]
        task.add_done_callback(self._forget)
        return task

    async def drain(self) -> None:
        """Wait (without raising their errors) until every commit made so far has completed."""
        pending = [t for t in self._pending if not t.done()]
        if pending:
            await asyncio.wait(pending)

    def pending(self) -> list[asyncio.Task[None]]:
        return [t for t in self._pending if not t.done()]

    def _forget(self, task: asyncio.Task[None]) -> None:
        if task in self._pending:
            self._pending.remove(task)


async def _after(earlier: list[asyncio.Task[None]], commit: Callable[[], Awaitable[None]]) -> None:
    # Waits for each earlier commit itself (not a chain through the next one), so a commit
    # cancelled while waiting does not let a later one overtake an earlier one still in flight.
    if earlier:
        await asyncio.wait(earlier)
    await commit()
