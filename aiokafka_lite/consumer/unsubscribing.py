"""unsubscribe() of a group member: revoke, commit, then leave (as Java's unsubscribe()).

The assignment is dropped at once (``assignment()`` is empty when unsubscribe() returns), but
what Java does inside unsubscribe() needs the network and the listener, which may be async: it
runs in a task the consumer owns. In order: auto-commit of what was consumed from the partitions
owned (as a member of the generation that owned them), ``on_partitions_revoked`` (or
``on_partitions_lost`` when the membership had already lapsed), the commits the callback made,
and only then the LeaveGroup, so the next owner starts where this member stopped.

``await consumer.unsubscribe()`` waits for all of it and raises the callback's error; without
the await, the next poll() waits for it (and raises that error) and close() does too.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConsumerClosedError
from ..group.member import ListenerEvent
from .closing import RebalanceParts, stop_rebalance

if TYPE_CHECKING:
    from ..config import ConsumerConfig
    from ..group.member import GroupMember
    from ..structs import TopicPartition

log = logging.getLogger("aiokafka_lite.consumer")


class Unsubscribing:
    """What unsubscribe() returns: awaiting it waits until the revocation and the leave are done
    (and raises the listener's error); not awaiting it is fine, as in Java's unsubscribe()."""

    def __init__(self, finish: Callable[[], Coroutine[Any, Any, None]] | None = None) -> None:
        self._finish = finish

    def __await__(self) -> Generator[Any, None, None]:
        if self._finish is not None:
            yield from self._finish().__await__()


class UnsubscribeTask:
    """The task running unsubscribe()'s revocation and leave, from its start until someone has
    waited for it (finish): until then a second unsubscribe() starts none."""

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None

    @property
    def under_way(self) -> bool:
        return self.task is not None

    def start(self, revocation: Coroutine[Any, Any, None], context: contextvars.Context) -> None:
        self.task = asyncio.create_task(revocation, name="aiokafka-lite unsubscribe", context=context)

    async def finish(self) -> None:
        """Wait for the revocation, and raise its error (once)."""
        task = self.task
        if task is None:
            return
        await asyncio.wait({task})  # its cancellation by close() is not raised here: told apart below
        if self.task is task:
            self.task = None
            if task.cancelled():
                raise ConsumerClosedError("the consumer was closed before unsubscribe() completed")
            task.result()


class UnsubscribeParts(RebalanceParts, Protocol):
    """What the revocation needs of the consumer (implemented in parts.py)."""

    config: ConsumerConfig

    async def commit_before_revoke(self, partitions: set[TopicPartition]) -> None: ...
    async def run_listener(self, event: ListenerEvent, partitions: set[TopicPartition]) -> None: ...
    async def drain_commits(self) -> None: ...
    def subscribed_again(self) -> bool: ...


async def revoke_and_leave(parts: UnsubscribeParts, member: GroupMember, owned: set[TopicPartition],
                           lost: bool) -> None:
    """Runs with the consumed offsets of `owned` still committable (Consumer.unsubscribe() sees to that)."""
    await stop_rebalance(parts, member, "unsubscribing mid-join")
    try:
        if not lost and parts.config.enable_auto_commit:
            await parts.commit_before_revoke(owned)
        await parts.run_listener(ListenerEvent.LOST if lost else ListenerEvent.REVOKED, owned)
        await parts.drain_commits()  # the callback's commit_async calls land in this generation
    finally:
        # However the callback ended, the member leaves: staying would hold the partitions
        # until the session lapses. A subscribe() made meanwhile joins afresh after the leave.
        if member.is_stable:
            await member.leave("the consumer unsubscribed", timeout=parts.config.request_timeout)
        if parts.subscribed_again():
            member.subscription_changed("subscribed again after unsubscribe()")


async def wait_quietly(task: Awaitable[None]) -> None:
    """close() waits for an unsubscribe nobody awaited; its error is said once, not raised."""
    try:
        await task
    except Exception as exc:
        log.warning("unsubscribe(): %s", exc)
