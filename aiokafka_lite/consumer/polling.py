"""The poll path (caller's task): rejoin if needed -> positions -> hand out buffered records ->
top up fetches. The rebalance step (with the listener callbacks) is a task the consumer owns,
which poll() waits for (rebalance.py); so are position look-ups and metadata refreshes
(poll_steps.py): a poll() whose timeout lapses leaves them running for the next one."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ..structs import ConsumerRecords, TopicPartition
from .rebalance import check_partition_counts, ensure_group, match_pattern, topics_to_refresh
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
        sub = consumer._subscription
        if sub.needing_position() or sub.needing_reset():
            await consumer.poll_step("positions", lambda: update_positions(consumer, None))
        if metadata_refresh_due(consumer):
            await consumer.poll_step("metadata", lambda: refresh_metadata(consumer))
        records = fetcher.fetched_records(max_records)
        fetcher.send_fetches()  # keep the next fetch in flight while the caller works
        if records:
            return ConsumerRecords(records)
        await fetcher.wait_for_data(_wait_slice(consumer))


def _wait_slice(consumer: Consumer) -> float:
    # Wake regularly so a rebalance flagged by the heartbeat task is acted on within one interval,
    # and often enough to restart the poll clock well before max_poll_interval_ms lapses.
    return min(consumer.config.heartbeat_interval, consumer.config.max_poll_interval / 2)


def maybe_auto_commit(consumer: Consumer) -> None:
    """Commit what previous polls handed out, every auto_commit_interval_ms, in the background
    (queued behind earlier commits)."""
    group = consumer._group
    if not consumer.config.enable_auto_commit or group is None:
        return
    if consumer._subscription.uses_group and not group.membership.is_stable:
        return  # partitions assigned by hand are committed as a standalone consumer
    now = asyncio.get_running_loop().time()
    if now < consumer._next_auto_commit:
        return
    consumer._next_auto_commit = now + consumer.config.auto_commit_interval
    offsets = consumer._offsets_to_commit(None)
    if offsets:
        consumer.queue_commit(offsets).add_done_callback(_log_auto_commit_failure)


async def update_positions(consumer: Consumer, only: list[TopicPartition] | None) -> None:
    """Committed offsets for partitions without a position; then resolve pending resets."""
    sub = consumer._subscription
    need = [tp for tp in sub.needing_position() if only is None or tp in only]
    if need:
        committed = {}
        if consumer._group is not None:  # subscribed or assigned by hand: the group's offsets
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


def metadata_refresh_due(consumer: Consumer) -> bool:
    fetcher = consumer._fetcher
    assert fetcher is not None
    return fetcher.metadata_refresh_needed or \
        consumer._cluster_or_fail().metadata_age() > consumer.config.metadata_max_age


async def refresh_metadata(consumer: Consumer) -> None:
    fetcher = consumer._fetcher
    cluster = consumer._cluster
    assert fetcher is not None
    assert cluster is not None
    if consumer._subscription.type is SubscriptionType.PATTERN:
        topics_changed = await match_pattern(consumer)
        if topics_changed and consumer._group is not None:
            consumer._group.request_rejoin("new topics match the subscribed pattern")
    else:
        await cluster.refresh_metadata(topics_to_refresh(consumer), timeout=None)
    check_partition_counts(consumer)
    fetcher.metadata_refresh_needed = False
    cluster.raise_topic_errors(consumer._subscription.topics)  # from this poll(), once per refresh


def _log_auto_commit_failure(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.info("auto-commit failed: %s", fut.exception())
