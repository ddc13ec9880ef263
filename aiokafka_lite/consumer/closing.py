"""close(): the graceful part within the timeout, then the forced part that always runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from ..errors import KafkaError
from .listener import call_listener
from .membership import State
from .rebalance import REBALANCE
from .subscription import SubscriptionType

if TYPE_CHECKING:
    from .consumer import Consumer

log = logging.getLogger("aiokafka_lite.consumer")


async def close_gracefully(consumer: Consumer, timeout: float | None) -> None:
    """Auto-commit, revoke, LeaveGroup; a lapse or an error here only skips to the forced part."""
    group = consumer._group
    if not consumer._started or group is None:
        return
    try:
        async with asyncio.timeout(timeout):
            # close() is what cancels the poll steps, a rebalance's listener callbacks included.
            in_flight = consumer.running_poll_step(REBALANCE) is not None and \
                group.membership.state in (State.JOINING, State.SYNCING)
            await consumer.cancel_poll_steps()
            if in_flight:
                # A JoinGroup may be in flight on the coordinator connection, and a broker
                # answers one connection's requests in order: LeaveGroup would wait behind
                # it. Start over on a fresh connection.
                consumer._cluster_or_fail().mark_coordinator_dead(group.group_id, "closing mid-join")
            owned = consumer._subscription.assigned()
            member = group.membership.is_stable and consumer._subscription.uses_group
            standalone = consumer._subscription.type is SubscriptionType.MANUAL
            offsets = consumer._offsets_to_commit(None)
            if owned and (member or standalone) and consumer.config.enable_auto_commit and offsets:
                await consumer.queue_commit(offsets)  # after every commit made before it
            await consumer.drain_commits()  # commits made earlier land before the member leaves
            if owned and member:
                token = consumer.revoking_on_close()
                try:
                    await call_listener(consumer._listener.on_partitions_revoked, owned, "on_partitions_revoked")
                    await consumer.drain_commits()  # and so do the listener's own commit_async calls
                finally:
                    consumer.done_revoking_on_close(token)
            if consumer._liveness is not None:
                await consumer._liveness.stop()
            await group.leave("the consumer is being closed", timeout=None)
    except TimeoutError:
        log.warning("close(): the graceful part took longer than %s s; closing by force", timeout)
    except KafkaError as exc:
        log.warning("close(): %s; closing by force", exc)


async def close_by_force(consumer: Consumer) -> None:
    """Cancel and await every task the consumer owns, close every connection."""
    await _cancel(consumer._start_task)
    await consumer.cancel_poll_steps()
    for commit in consumer.pending_commits():
        await _cancel(commit)
    if consumer._liveness is not None:
        await consumer._liveness.stop()
    await consumer._stall.stop()
    for fut in list(consumer._side_tasks):
        await _cancel(fut)
    if consumer._fetcher is not None:
        await consumer._fetcher.close()
    if consumer._cluster is not None:
        await consumer._cluster.close()


async def _cancel(fut: asyncio.Future[Any] | None) -> None:
    if fut is None or fut.done():
        if fut is not None and not fut.cancelled():
            fut.exception()  # retrieved, so asyncio does not log "exception never retrieved"
        return
    fut.cancel()
    with contextlib.suppress(asyncio.CancelledError, KafkaError):
        await fut
