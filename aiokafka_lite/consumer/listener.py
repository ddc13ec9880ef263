"""Rebalance listener: user callbacks that run in the poll path, in the rebalance task the
consumer owns (poll() starts it and waits for it; only close() cancels it: see rebalance.py)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..structs import TopicPartition

log = logging.getLogger("aiokafka_lite.consumer")


class ConsumerRebalanceListener:
    """Override any of these; each may be a plain function or a coroutine function.

    Each callback runs exactly once per event, in the rebalance step that poll() starts and
    waits for. A poll() whose timeout lapses while a callback runs returns empty and leaves the
    callback running; the next poll() waits for it. Only close() cancels a running callback.
    Heartbeats go on meanwhile, and the callback's time counts toward max_poll_interval_ms, as
    in Java. A callback may commit (commit() or commit_async()), also when close() calls it.
    An exception from a callback is raised from the poll() that waits for it."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Any:
        """Called before a rebalance takes partitions away; commit progress here."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Any:
        """Called after a rebalance, with the partitions now owned."""

    def on_partitions_lost(self, lost: set[TopicPartition]) -> Any:
        """Called when partitions were lost without a clean revoke (e.g. the member was removed
        from the group after a poll-interval lapse): others may own them already, so committing
        them would fail. Defaults to on_partitions_revoked, as in Java."""
        return self.on_partitions_revoked(lost)


async def call_listener(callback: Callable[[set[TopicPartition]], Any], partitions: set[TopicPartition],
                        what: str) -> None:
    """Run one callback (sync or async). Its exception propagates to poll(), as in Java."""
    log.debug("rebalance listener %s(%s)", what, sorted(partitions))
    result = callback(set(partitions))
    if inspect.isawaitable(result):
        await _as_awaitable(result)


async def _as_awaitable(result: Awaitable[Any]) -> None:
    await result
