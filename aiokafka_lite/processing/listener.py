"""The rebalance listener process() installs: it drains and commits before the application's own
listener hears of a revocation, and cancels (committing nothing) before it hears of a loss. Once
run() has ended it is detached: only the application's listener is called, so nothing of
process()'s is committed after run() returned (a later close() or rebalance included)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..consumer.listener import ConsumerRebalanceListener, call_listener
from ..structs import TopicPartition

Step = Callable[[set[TopicPartition]], Awaitable[None]]


class ProcessingListener(ConsumerRebalanceListener):
    def __init__(self, revoke: Step, lose: Step, user: ConsumerRebalanceListener | None) -> None:
        self._revoke, self._lose, self._user = revoke, lose, user
        self.attached = True

    def detach(self) -> None:
        self.attached = False

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if self.attached:
            await self._revoke(revoked)
        if self._user is not None:
            await call_listener(self._user.on_partitions_revoked, revoked, "on_partitions_revoked")

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if self._user is not None:
            await call_listener(self._user.on_partitions_assigned, assigned, "on_partitions_assigned")

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        if self.attached:
            await self._lose(lost)
        if self._user is not None:
            await call_listener(self._user.on_partitions_lost, lost, "on_partitions_lost")
