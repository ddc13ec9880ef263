"""Rebalance listener: user callbacks that run in the poll path, in the caller's task."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..structs import TopicPartition

log = logging.getLogger("aiokafka_lite.consumer")


class ConsumerRebalanceListener:
    """Override any of these; each may be a plain function or a coroutine function."""

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
