"""close(): the graceful part within the timeout, then the forced part that always runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from ..errors import KafkaError
from .listener import call_listener

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
            join = consumer._join_task
            if join is not None and not join.done():
                # A JoinGroup may be in flight on the coordinator connection, and a broker answers
                # one connection's requests in order: LeaveGroup would wait behind it. Start over
                # on a fresh connection.
                await _cancel(join)
                consumer._cluster_or_fail().mark_coordinator_dead(group.group_id, "closing mid-join")
            consumer._join_task = None
            owned = consumer._subscription.assigned()
            if group.membership.is_stable and owned and consumer._subscription.uses_group:
                if consumer.config.enable_auto_commit:
                    offsets = consumer._offsets_to_commit(None)
                    if offsets:
                        await group.commit(offsets, None)
                await call_listener(consumer._listener.on_partitions_revoked, owned, "on_partitions_revoked")
            if consumer._liveness is not None:
                await consumer._liveness.stop()
            await group.leave("the consumer is being closed", timeout=None)
    except TimeoutError:
        log.warning("close(): the graceful part took longer than %s s; closing by force", timeout)
    except KafkaError as exc:
        log.warning("close(): %s; closing by force", exc)


async def close_by_force(consumer: Consumer) -> None:
    """Cancel and await every task the consumer owns, close every connection."""
    await _cancel(consumer._join_task)
    consumer._join_task = None
    if consumer._liveness is not None:
        await consumer._liveness.stop()
    await consumer._stall.stop()
    for fut in list(consumer._side_tasks):
        await _cancel(fut)
    if consumer._fetcher is not None:
        await consumer._fetcher.close()
    if consumer._cluster is not None:
        await consumer._cluster.close()


async def _cancel(fut: asyncio.Future[object] | None) -> None:
    if fut is None or fut.done():
        if fut is not None and not fut.cancelled():
            fut.exception()  # retrieved, so asyncio does not log "exception never retrieved"
        return
    fut.cancel()
    with contextlib.suppress(asyncio.CancelledError, KafkaError):
        await fut
