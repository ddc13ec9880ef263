"""The poll path (caller's task): rejoin if needed -> positions -> hand out buffered records ->
top up fetches. Rebalance listener callbacks run here, in the caller's task, as in Java."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from ..errors import KafkaError
from ..structs import ConsumerRecords, TopicPartition
from .listener import call_listener
from .subscription import SubscriptionType

if TYPE_CHECKING:
    from .consumer import Consumer

log = logging.getLogger("aiokafka_lite.consumer")


async def poll_once(consumer: Consumer, max_records: int) -> ConsumerRecords:
    """Loop until records arrive; the caller's asyncio.timeout ends it with an empty result."""
    fetcher = consumer._fetcher
    assert fetcher is not None
    while True:
        consumer._check_open()  # close() from another task ends a waiting poll
        # A caller blocked in poll() is polling (as in Java): a long poll(timeout) on an idle
        # topic must not lapse max_poll_interval_ms. Each pass restarts the poll clock.
        consumer._stamp_poll()
        if consumer._liveness is not None:
            consumer._liveness.apply_pending()  # what the heartbeat thread learned, if any
        consumer._raise_background_error()
        if consumer._group is not None and consumer._subscription.uses_group:
            await ensure_group(consumer)
            if consumer.config.heartbeat_mode == "thread" and consumer._liveness is not None:
                consumer._liveness.poke()  # keep the heartbeat thread's identity snapshot current
            maybe_auto_commit(consumer)
        await update_positions(consumer, None)
        await refresh_metadata_if_needed(consumer)
        records = fetcher.fetched_records(max_records)
        fetcher.send_fetches()  # keep the next fetch in flight while the caller works
        if records:
            return ConsumerRecords(records)
        await fetcher.wait_for_data(_wait_slice(consumer))


def _wait_slice(consumer: Consumer) -> float:
    # Wake regularly so a rebalance flagged by the heartbeat task is acted on within one interval,
    # and often enough to restart the poll clock well before max_poll_interval_ms lapses.
    return min(consumer.config.heartbeat_interval, consumer.config.max_poll_interval / 2)


async def ensure_group(consumer: Consumer) -> None:
    """Rejoin when needed. The join itself runs as an owned task: a poll timeout that lapses
    mid-rebalance leaves it running for the next poll instead of cancelling it."""
    group = consumer._group
    assert group is not None
    if consumer._join_task is None and group.needs_join:
        await _prepare_rejoin(consumer)
        topics = frozenset(consumer._subscription.topics)
        consumer._join_task = asyncio.create_task(group.join(topics), name="aiokafka-lite join")
    task = consumer._join_task
    if task is None:
        return
    await asyncio.wait({task})
    consumer._check_open()  # close() cancelled the join: not the caller's cancellation
    consumer._join_task = None
    assignment = task.result()  # a fatal join error propagates to poll()'s caller
    subscribed = consumer._subscription.topics
    partitions = {tp for tp in assignment.partitions if tp.topic in subscribed}
    consumer._subscription.set_assignment(partitions)
    loop = asyncio.get_running_loop()
    with consumer._timers_lock:
        consumer._timers.on_join(time.monotonic())
    group.lapse_reason = None
    liveness = consumer._liveness
    assert liveness is not None
    liveness.start()
    liveness.poke()
    consumer._next_auto_commit = loop.time() + consumer.config.auto_commit_interval
    log.info("group %s: generation %d, assigned %s", group.group_id, assignment.generation_id,
             sorted(partitions))
    await call_listener(consumer._listener.on_partitions_assigned, partitions, "on_partitions_assigned")


async def _prepare_rejoin(consumer: Consumer) -> None:
    """Eager protocol: give up every owned partition before JoinGroup, committing first when
    the generation is still valid; lost partitions (member removed) are not committed."""
    group = consumer._group
    assert group is not None
    owned = consumer._subscription.assigned()
    if consumer._subscription.type is SubscriptionType.PATTERN:
        await _match_pattern(consumer)
    if not owned:
        return
    try:
        if group.partitions_lost:
            await call_listener(consumer._listener.on_partitions_lost, owned, "on_partitions_lost")
        else:
            if consumer.config.enable_auto_commit:
                await _commit_quietly(consumer)
            await call_listener(consumer._listener.on_partitions_revoked, owned, "on_partitions_revoked")
    except Exception:
        # Given up even when the listener raised (its error goes to poll()'s caller), so the next
        # poll() joins instead of revoking the same partitions again. A cancelled poll keeps them:
        # the next poll() runs the revocation again.
        consumer._subscription.set_assignment(())
        raise
    consumer._subscription.set_assignment(())


async def _commit_quietly(consumer: Consumer) -> None:
    group = consumer._group
    assert group is not None
    offsets = consumer._offsets_to_commit(None)
    if not offsets or not group.membership.is_stable:
        return
    try:
        await group.commit(offsets, None)
    except KafkaError as exc:
        log.warning("group %s: auto-commit before rebalance failed: %s", group.group_id, exc)


def maybe_auto_commit(consumer: Consumer) -> None:
    """Commit what previous polls handed out, every auto_commit_interval_ms, in the background."""
    group = consumer._group
    if not consumer.config.enable_auto_commit or group is None or not group.membership.is_stable:
        return
    now = asyncio.get_running_loop().time()
    if now < consumer._next_auto_commit:
        return
    consumer._next_auto_commit = now + consumer.config.auto_commit_interval
    offsets = consumer._offsets_to_commit(None)
    if offsets:
        consumer._spawn(group.commit(offsets, None))


async def update_positions(consumer: Consumer, only: list[TopicPartition] | None) -> None:
    """Committed offsets for partitions without a position; then resolve pending resets."""
    sub = consumer._subscription
    need = [tp for tp in sub.needing_position() if only is None or tp in only]
    if need:
        committed = {}
        if consumer._group is not None and sub.uses_group:
            committed = await consumer._group.fetch_committed(need, None)
        for tp in need:
            if not sub.is_assigned(tp):
                continue  # revoked while we waited
            found = committed.get(tp)
            if found is not None:
                sub.seek(tp, found.offset, found.leader_epoch)
            else:
                sub.request_reset(tp)
    if sub.needing_reset():
        assert consumer._offsets is not None
        await consumer._offsets.reset_positions(sub, None)


async def refresh_metadata_if_needed(consumer: Consumer) -> None:
    fetcher = consumer._fetcher
    cluster = consumer._cluster
    assert fetcher is not None
    assert cluster is not None
    due = cluster.metadata_age() > consumer.config.metadata_max_age
    if not fetcher.metadata_refresh_needed and not due:
        return
    topics = sorted(consumer._subscription.topics)
    if consumer._subscription.type is SubscriptionType.PATTERN:
        topics_changed = await _match_pattern(consumer)
        if topics_changed and consumer._group is not None:
            consumer._group.request_rejoin("new topics match the subscribed pattern")
    else:
        await cluster.refresh_metadata(topics, timeout=None)
    fetcher.metadata_refresh_needed = False


async def _match_pattern(consumer: Consumer) -> bool:
    cluster = consumer._cluster
    assert cluster is not None
    await cluster.refresh_metadata(None, timeout=None)
    return consumer._subscription.match_pattern(
        cluster.topics(exclude_internal=consumer.config.exclude_internal_topics))
