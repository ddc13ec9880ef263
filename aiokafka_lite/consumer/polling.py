"""The poll path (caller's task): group member's turn -> positions -> hand out buffered records ->
top up fetches. The rebalance step (with the listener callbacks) is a task the consumer owns
(member.py); so are position look-ups and metadata refreshes (poll_steps.py): a poll() whose
timeout lapses leaves them running for the next one. Under the eager protocol poll() waits for
the rebalance step; under cooperative and KIP-848 it goes on handing out records of the
partitions the member keeps while the step runs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from ..liveness.deadlines import prepare_deserializer
from ..structs import ConsumerRecords, OffsetAndMetadata, TopicPartition
from ..subscription import SubscriptionType
from .poll_steps import PollPresence, Start

if TYPE_CHECKING:
    from .._net.cluster import Cluster
    from ..config import ConsumerConfig
    from ..fetch.completed import ValueConverter
    from ..fetch.fetcher import Fetcher
    from ..fetch.offset_lookup import OffsetLookup
    from ..group.member import GroupMember
    from ..subscription import SubscriptionState

log = logging.getLogger("aiokafka_lite.consumer")

REBALANCE = "rebalance"  # the step's name among the poll steps (and its task's: "aiokafka-lite rebalance")


class PollParts(Protocol):
    """What the poll path needs of the consumer (implemented in parts.py)."""

    config: ConsumerConfig
    next_auto_commit: float  # loop time
    presence: PollPresence

    @property
    def fetcher(self) -> Fetcher: ...
    @property
    def cluster(self) -> Cluster: ...
    @property
    def offsets(self) -> OffsetLookup: ...
    @property
    def member(self) -> GroupMember | None: ...
    def subscription_state(self) -> SubscriptionState: ...
    def check_open(self) -> None: ...
    def stamp_poll(self) -> None: ...
    async def poll_step(self, name: str, start: Start | None) -> None: ...
    def poll_step_nowait(self, name: str, start: Start | None) -> None: ...
    def running_poll_step(self, name: str) -> asyncio.Task[None] | None: ...
    def offsets_to_commit(self) -> dict[TopicPartition, OffsetAndMetadata]: ...
    def queue_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> asyncio.Task[None]: ...
    async def refresh_pattern(self) -> bool: ...


async def poll_once(parts: PollParts, max_records: int, deadline: float | None,
                    convert: ValueConverter | None = None) -> ConsumerRecords:
    """Loop until records arrive; the caller's asyncio.timeout (ending at ``deadline``, loop time;
    None: no limit) ends it with an empty result. ``convert``: as ``Fetcher.fetched_records``'s."""
    fetcher = parts.fetcher
    sub = parts.subscription_state()
    while True:
        parts.check_open()  # close() from another task ends a waiting poll
        # A caller blocked in poll() is polling (as in Java): a long poll(timeout) on an idle
        # topic must not lapse max_poll_interval_ms. Each pass restarts the poll clock.
        parts.stamp_poll()
        member = parts.member
        if member is not None:
            member.before_poll()  # raises what the background paths found fatal
            if sub.uses_group:
                await _member_turn(parts, member)
                member.after_poll()
        maybe_auto_commit(parts)
        if _positions_needed(sub):
            await parts.poll_step("positions", lambda: update_positions(parts, None))
        if metadata_refresh_due(parts):
            await parts.poll_step("metadata", lambda: refresh_metadata(parts))
        not_ready = fetcher.take_not_ready()  # left by this poll()'s last hand-out, or the last poll()'s
        if not_ready is not None:
            await prepare_deserializer(not_ready, deadline)
        records = fetcher.fetched_records(max_records, convert)
        moved = fetcher.next_offsets()
        fetcher.send_fetches()  # keep the next fetch in flight while the caller works
        if records or moved:  # a position moved past markers alone is news too (KIP-1094)
            return ConsumerRecords(records, moved)
        if not fetcher.not_ready_pending():
            await fetcher.wait_for_data(_wait_slice(parts.config))


async def _member_turn(parts: PollParts, member: GroupMember) -> None:
    """Start the rebalance step when due. Wait for it, unless the member keeps partitions that
    can be read while the step waits for the broker: then wait only while its listener callbacks
    are due or under way (they run inside poll(), as in Java). The wait is not the step: a poll
    timeout leaves it running for the next poll()."""
    start = member.rebalance_step if member.rebalance_due() else None
    if not member.keeps_fetching_while_rebalancing() or not parts.subscription_state().any_fetchable():
        with parts.presence.waiting():
            await parts.poll_step(REBALANCE, start)
        return
    parts.poll_step_nowait(REBALANCE, start)
    step = parts.running_poll_step(REBALANCE)
    if step is not None and parts.presence.held:
        with parts.presence.waiting():  # the step's callbacks may run now
            await parts.presence.until_released(step)
        parts.poll_step_nowait(REBALANCE, None)  # ended meanwhile: its outcome is raised here


def _positions_needed(sub: SubscriptionState) -> bool:
    return bool(sub.needing_reset()) or any(not sub.state(tp).awaiting_callback for tp in sub.needing_position())


def _wait_slice(config: ConsumerConfig) -> float:
    # Wake regularly so a rebalance flagged by the heartbeat task is acted on within one interval,
    # and often enough to restart the poll clock well before max_poll_interval_ms lapses.
    return min(config.heartbeat_interval, config.max_poll_interval / 2)


def maybe_auto_commit(parts: PollParts) -> None:
    """Commit what previous polls handed out, every auto_commit_interval_ms, in the background
    (queued behind earlier commits)."""
    member = parts.member
    if not parts.config.enable_auto_commit or member is None:
        return
    if parts.subscription_state().uses_group and not member.is_stable:
        return  # partitions assigned by hand are committed as a standalone consumer
    now = asyncio.get_running_loop().time()
    if now < parts.next_auto_commit:
        return
    parts.next_auto_commit = now + parts.config.auto_commit_interval
    offsets = parts.offsets_to_commit()
    if offsets:
        parts.queue_commit(offsets).add_done_callback(_log_auto_commit_failure)


async def update_positions(parts: PollParts, only: list[TopicPartition] | None) -> None:
    """Committed offsets for partitions without a position; then resolve pending resets.
    The poll path leaves out partitions whose on_partitions_assigned has not returned: the
    callback may seek them."""
    sub = parts.subscription_state()
    if only is not None:
        need = [tp for tp in sub.needing_position() if tp in only]
    else:
        need = [tp for tp in sub.needing_position() if not sub.state(tp).awaiting_callback]
    if need:
        committed = {}
        member = parts.member
        if member is not None:  # subscribed or assigned by hand: the group's offsets
            committed = await member.fetch_committed(need, None)
        still_needed = set(sub.needing_position())  # one scan: 1,200 partitions made this quadratic
        for tp in need:
            if not sub.is_assigned(tp) or tp not in still_needed:
                continue  # revoked, seeked or reset while we waited
            found = committed.get(tp)
            if found is not None:
                sub.seek(tp, found.offset, found.leader_epoch)
            else:
                sub.request_reset(tp)
    if sub.needing_reset():
        await parts.offsets.reset_positions(sub, None)


def metadata_refresh_due(parts: PollParts) -> bool:
    return parts.fetcher.metadata_refresh_needed or parts.cluster.metadata_age() > parts.config.metadata_max_age


async def refresh_metadata(parts: PollParts) -> None:
    cluster, sub, member = parts.cluster, parts.subscription_state(), parts.member
    if sub.type is SubscriptionType.PATTERN:
        if await parts.refresh_pattern() and member is not None:
            member.subscription_changed("new topics match the subscribed pattern")
    else:
        watched = member.watched_topics() if member is not None else set()
        await cluster.refresh_metadata(sorted(set(sub.topics) | watched), timeout=None)
    if member is not None and sub.uses_group:
        topics = set(sub.topics) | member.watched_topics()
        known = {t: cluster.partitions_for(t) for t in topics}
        member.metadata_refreshed({t: len(p) for t, p in known.items() if p})
    parts.fetcher.metadata_refresh_needed = False
    cluster.raise_topic_errors(sub.topics, subscribed=True)  # from this poll(), once per refresh


def _log_auto_commit_failure(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.info("auto-commit failed: %s", fut.exception())
