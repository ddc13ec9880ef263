"""The consumer's parts as its helpers see them: the group member (member.MemberHost), the poll
path (polling.PollParts), close() (closing.CloseParts) and unsubscribe()
(unsubscribing.UnsubscribeParts). The parts own the rebalance listener, the poll clock and the
auto-commit schedule, and are given the subscription, the poll steps and the commits; what the
Consumer itself owns (what start() creates, its open check, the offsets to commit, unsubscribe())
they reach only through the ConsumerHooks the Consumer gives them."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from ..config import ConsumerConfig
from ..errors import KafkaError
from ..group.member import ListenerEvent
from ..structs import OffsetAndMetadata, TopicPartition
from .listener import ConsumerRebalanceListener, call_listener
from .poll_steps import PollPresence, PollSteps, Start
from .revocation import revoking
from .unsubscribing import wait_quietly

if TYPE_CHECKING:
    from .._net.cluster import Cluster
    from ..fetch.fetcher import Fetcher
    from ..fetch.offset_lookup import OffsetLookup
    from ..group.member import GroupMember
    from ..liveness.timers import LivenessTimers
    from ..subscription import SubscriptionState
    from .commits import Commits

log = logging.getLogger("aiokafka_lite.consumer")


class PollClock:
    """When the application last polled, as max_poll_interval_ms measures it. The clock is
    shared with the heartbeat thread in heartbeat_mode="thread", so it reads time.monotonic()
    in both modes (the thread cannot read the loop's clock)."""

    def __init__(self, timers: LivenessTimers, lock: threading.Lock) -> None:
        self._timers = timers
        self._lock = lock
        self._paused = False

    def stamp(self) -> None:
        if self._paused:
            return
        with self._lock:
            self._timers.on_poll(time.monotonic())

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """A listener callback runs: poll() calls made meanwhile do not restart the clock, so the
        callback's time counts toward max_poll_interval_ms, as in Java where it runs inside poll()."""
        self._paused = True
        try:
            yield
        finally:
            self._paused = False


@dataclasses.dataclass(frozen=True)
class ConsumerHooks:
    """What the parts ask of the Consumer, whose state stays its own."""

    started: Callable[[], bool]
    cluster: Callable[[], Cluster]  # IllegalStateError before start()
    fetcher: Callable[[], Fetcher | None]
    offsets: Callable[[], OffsetLookup]
    member: Callable[[], GroupMember | None]
    check_open: Callable[[], None]
    offsets_to_commit: Callable[[], dict[TopicPartition, OffsetAndMetadata]]
    finish_unsubscribe: Callable[[], Awaitable[None]]


class ConsumerParts:
    def __init__(self, config: ConsumerConfig, subscription: SubscriptionState, poll_steps: PollSteps,
                 commits: Commits, poll_clock: PollClock, hooks: ConsumerHooks) -> None:
        self.config = config
        self.listener = ConsumerRebalanceListener()  # subscribe(listener=...) replaces it
        self.next_auto_commit = 0.0  # loop time; the poll path's auto-commit schedule
        self.presence = PollPresence()
        self._subscription = subscription
        self._poll_steps = poll_steps
        self._commits = commits
        self._poll_clock = poll_clock
        self._hooks = hooks

    # -- parts ----------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._hooks.started()

    @property
    def cluster(self) -> Cluster:
        return self._hooks.cluster()

    @property
    def fetcher(self) -> Fetcher:
        fetcher = self._hooks.fetcher()
        assert fetcher is not None
        return fetcher

    @property
    def offsets(self) -> OffsetLookup:
        return self._hooks.offsets()

    @property
    def member(self) -> GroupMember | None:
        return self._hooks.member()

    def subscription_state(self) -> SubscriptionState:
        return self._subscription

    # -- poll path ------------------------------------------------------------------------

    def check_open(self) -> None:
        self._hooks.check_open()

    def stamp_poll(self) -> None:
        self._poll_clock.stamp()

    async def poll_step(self, name: str, start: Start | None) -> None:
        """Wait for the poll step `name` (see poll_steps), starting it when needed; its error
        is raised here, once."""
        task = await self._poll_steps.wait(name, start)
        self._hooks.check_open()  # close() cancelled the step: not the caller's cancellation
        if task is not None:
            task.result()

    def poll_step_nowait(self, name: str, start: Start | None) -> None:
        """Start the poll step `name` when needed without waiting; its error, once it has
        ended, is raised here. Its end wakes a poll() waiting for records."""
        task = self._poll_steps.start(name, start, self.wake)
        if task is not None:
            self._hooks.check_open()
            task.result()

    def running_poll_step(self, name: str) -> asyncio.Task[None] | None:
        return self._poll_steps.running(name)

    async def cancel_poll_steps(self, name: str | None = None) -> None:
        await self._poll_steps.cancel(name)

    def offsets_to_commit(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self._hooks.offsets_to_commit()

    def queue_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> asyncio.Task[None]:
        return self._commits.submit_own(offsets)

    async def drain_commits(self) -> None:
        await self._commits.drain()

    async def until_polled(self) -> None:
        await self.presence.until_polled(self.wake)

    def callbacks_done(self) -> None:
        self.presence.callbacks_done()

    async def refresh_pattern(self) -> bool:
        cluster = self.cluster
        await cluster.refresh_metadata(None, timeout=None)
        return self._subscription.match_pattern(
            cluster.topics(exclude_internal=self.config.exclude_internal_topics))

    # -- the group member's host -------------------------------------------------------------

    async def run_listener(self, event: ListenerEvent, partitions: set[TopicPartition]) -> None:
        listener = self.listener
        callback = {ListenerEvent.ASSIGNED: listener.on_partitions_assigned,
                    ListenerEvent.REVOKED: listener.on_partitions_revoked,
                    ListenerEvent.LOST: listener.on_partitions_lost}[event]
        with self._poll_clock.paused():
            await call_listener(callback, partitions, event.value)

    async def commit_before_revoke(self, partitions: set[TopicPartition]) -> None:
        member = self._hooks.member()
        offsets = {tp: om for tp, om in self.offsets_to_commit().items() if tp in partitions}
        if not offsets or member is None or not member.is_stable:
            return
        try:
            await self.queue_commit(offsets)
        except KafkaError as exc:
            log.warning("group %s: auto-commit before rebalance failed: %s", member.group_id, exc)

    def member_joined(self) -> None:
        self.next_auto_commit = asyncio.get_running_loop().time() + self.config.auto_commit_interval

    def wake(self) -> None:
        fetcher = self._hooks.fetcher()
        if fetcher is not None:
            fetcher.wake()

    # -- close --------------------------------------------------------------------------------

    async def finish_unsubscribe(self) -> None:
        await wait_quietly(self._hooks.finish_unsubscribe())

    def subscribed_again(self) -> bool:
        return self._subscription.uses_group

    async def revoke_on_close(self, partitions: set[TopicPartition]) -> None:
        """on_partitions_revoked from close(): code in the callback (and the tasks it starts)
        may still use the consumer; the commits it makes land before the member leaves."""
        with revoking(self):
            await call_listener(self.listener.on_partitions_revoked, partitions, "on_partitions_revoked")
            await self.drain_commits()
