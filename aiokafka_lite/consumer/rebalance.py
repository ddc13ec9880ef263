"""The rebalance step of the poll path (eager protocol), run once per rebalance as a task the
consumer owns: revoke (or lose) the owned partitions, committing first -> JoinGroup + SyncGroup ->
take the assignment -> on_partitions_assigned.

A poll() whose timeout lapses stops waiting and returns empty; the step goes on, and the next
poll() waits for the same step instead of starting another. So a listener callback runs exactly
once per event and is cancelled only by close(). While it runs, heartbeats go on (the member is
still STABLE), and poll() calls do not restart the poll clock: time spent in a callback counts
toward max_poll_interval_ms, as in Java, where callbacks run inside poll().
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import KafkaError
from ..structs import TopicPartition
from .listener import call_listener
from .subscription import SubscriptionType

if TYPE_CHECKING:
    from .consumer import Consumer

log = logging.getLogger("aiokafka_lite.consumer")

REBALANCE = "rebalance"  # the step's name among the poll steps (and its task's: "aiokafka-lite rebalance")


async def ensure_group(consumer: Consumer) -> None:
    """Start the rebalance step when the member must (re)join, and wait for it. The wait is not
    the step: cancelling it (a poll timeout) leaves the step running for the next poll()."""
    group = consumer._group
    assert group is not None
    if group.needs_join:
        await consumer.poll_step(REBALANCE, lambda: rebalance(consumer))
    elif consumer._subscription.awaiting_callback():
        # on_partitions_assigned raised last time: called again, as in Java, until it returns.
        await consumer.poll_step(REBALANCE, lambda: _assigned_callback(consumer))
    else:
        await consumer.poll_step(REBALANCE, None)


async def rebalance(consumer: Consumer) -> None:
    group = consumer._group
    assert group is not None
    await _give_up_partitions(consumer)
    topics = frozenset(consumer._subscription.topics)
    assignment = await group.join(topics)
    subscribed = consumer._subscription.topics
    partitions = {tp for tp in assignment.partitions if tp.topic in subscribed}
    consumer._subscription.set_assignment(partitions)
    with consumer._timers_lock:
        consumer._timers.on_join(time.monotonic())
    group.lapse_reason = None
    liveness = consumer._liveness
    assert liveness is not None
    liveness.start()
    liveness.poke()
    consumer._next_auto_commit = asyncio.get_running_loop().time() + consumer.config.auto_commit_interval
    log.info("group %s: generation %d, assigned %s", group.group_id, assignment.generation_id,
             sorted(partitions))
    await _snapshot_partition_counts(consumer, assignment.generation_id)
    consumer._subscription.set_awaiting_callback(partitions, True)
    await _assigned_callback(consumer)
    # A subscribed topic the metadata calls invalid or unauthorized is raised from poll(), as in Java.
    consumer._cluster_or_fail().raise_topic_errors(subscribed)


async def _assigned_callback(consumer: Consumer) -> None:
    """on_partitions_assigned with the whole assignment; its partitions are fetched only once
    it has returned without an error."""
    partitions = consumer._subscription.assigned()
    await _run_listener(consumer, consumer._listener.on_partitions_assigned, partitions, "on_partitions_assigned")
    consumer._subscription.set_awaiting_callback(partitions, False)


async def _give_up_partitions(consumer: Consumer) -> None:
    """Eager protocol: give up every owned partition before JoinGroup, committing first when
    the generation is still valid; lost partitions (member removed) are not committed."""
    group = consumer._group
    assert group is not None
    owned = consumer._subscription.assigned()
    if consumer._subscription.type is SubscriptionType.PATTERN:
        await match_pattern(consumer)
    if not owned:
        return
    try:
        if group.partitions_lost:
            await _run_listener(consumer, consumer._listener.on_partitions_lost, owned, "on_partitions_lost")
        else:
            if consumer.config.enable_auto_commit:
                await _commit_quietly(consumer)
            await _run_listener(consumer, consumer._listener.on_partitions_revoked, owned, "on_partitions_revoked")
            # Commits the listener started (commit_async) go out in this generation, before the
            # JoinGroup that ends it.
            await consumer.drain_commits()
    finally:
        # Given up however the callback ended (an error goes to poll()'s caller; close() may
        # have cancelled it): the event was delivered once, and is not delivered again.
        consumer._subscription.set_assignment(())


async def _run_listener(consumer: Consumer, callback: Callable[[set[TopicPartition]], Any],
                        partitions: set[TopicPartition], what: str) -> None:
    consumer.pause_poll_clock()
    try:
        await call_listener(callback, partitions, what)
    finally:
        consumer.resume_poll_clock()


async def _commit_quietly(consumer: Consumer) -> None:
    group = consumer._group
    assert group is not None
    offsets = consumer._offsets_to_commit(None)
    if not offsets or not group.membership.is_stable:
        return
    try:
        await consumer.queue_commit(offsets)
    except KafkaError as exc:
        log.warning("group %s: auto-commit before rebalance failed: %s", group.group_id, exc)


async def _snapshot_partition_counts(consumer: Consumer, generation_id: int) -> None:
    """Remember how many partitions each subscribed topic has now, so a later metadata refresh
    can tell that partitions were added (see check_partition_counts)."""
    cluster = consumer._cluster_or_fail()
    topics = sorted(consumer._subscription.topics)
    try:
        await cluster.refresh_metadata(topics, timeout=consumer.config.request_timeout)
    except KafkaError as exc:  # the next refresh is compared with the leader's snapshot only
        log.debug("metadata after join failed: %s", exc)
        return
    group = consumer._group
    assert group is not None
    group.remember_partition_counts(generation_id, _counts(consumer, topics))


def check_partition_counts(consumer: Consumer) -> None:
    """After a metadata refresh: a subscribed topic whose partition count changed since the
    assignment triggers a rebalance (the leader checks every topic it assigned)."""
    group = consumer._group
    if group is None or not consumer._subscription.uses_group:
        return
    changed = group.partition_count_changes(_counts(consumer, group.watched_topics()))
    if changed:
        group.request_rejoin(f"the partition count of {', '.join(changed)} changed")
        group.on_rejoin_needed()


def topics_to_refresh(consumer: Consumer) -> list[str]:
    """The subscription, plus (on the leader) every topic it assigned to the group."""
    group = consumer._group
    watched = group.watched_topics() if group is not None else set()
    return sorted(set(consumer._subscription.topics) | watched)


def _counts(consumer: Consumer, topics: Any) -> dict[str, int]:
    """Partition counts of the topics the metadata knows (a missing topic is no evidence)."""
    cluster = consumer._cluster_or_fail()
    known = {t: cluster.partitions_for(t) for t in topics}
    return {t: len(parts) for t, parts in known.items() if parts}


async def match_pattern(consumer: Consumer) -> bool:
    cluster = consumer._cluster_or_fail()
    await cluster.refresh_metadata(None, timeout=None)
    return consumer._subscription.match_pattern(
        cluster.topics(exclude_internal=consumer.config.exclude_internal_topics))
