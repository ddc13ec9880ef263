"""close(): the graceful part, within the timeout (the forced part is lifecycle.close_by_force)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from ..errors import InvalidArgumentError, KafkaError
from ..structs import GroupMembershipOperation, OffsetAndMetadata, TopicPartition
from ..subscription import SubscriptionType
from .polling import REBALANCE

if TYPE_CHECKING:
    from .._net.cluster import Cluster
    from ..config import ConsumerConfig
    from ..group.member import GroupMember
    from ..subscription import SubscriptionState

log = logging.getLogger("aiokafka_lite.consumer")

# The forced part's LeaveGroup gets this long (seconds): enough for a broker that answers, short
# enough that a close whose graceful part was cut short still returns promptly.
FORCED_LEAVE_LIMIT = 0.5


class RebalanceParts(Protocol):
    """What stopping a rebalance needs of the consumer (implemented in parts.py)."""

    @property
    def cluster(self) -> Cluster: ...
    def running_poll_step(self, name: str) -> asyncio.Task[None] | None: ...
    async def cancel_poll_steps(self, name: str | None = None) -> None: ...


async def stop_rebalance(parts: RebalanceParts, member: GroupMember, why: str, every_step: bool = False) -> None:
    """Cancel the rebalance step (its listener callbacks included; with every_step, the other
    poll steps too) before the member leaves the group."""
    mid_join = parts.running_poll_step(REBALANCE) is not None and member.mid_join
    await parts.cancel_poll_steps(None if every_step else REBALANCE)
    if mid_join:
        # A join request may be in flight on the coordinator connection, and a broker answers
        # one connection's requests in order: the leave would wait behind it. Start over on a
        # fresh connection.
        parts.cluster.mark_coordinator_dead(member.group_id, why)


class CloseParts(RebalanceParts, Protocol):
    """What close() needs of the consumer (implemented in parts.py)."""

    config: ConsumerConfig

    @property
    def started(self) -> bool: ...
    @property
    def member(self) -> GroupMember | None: ...
    def subscription_state(self) -> SubscriptionState: ...
    def offsets_to_commit(self) -> dict[TopicPartition, OffsetAndMetadata]: ...
    def queue_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> asyncio.Task[None]: ...
    async def drain_commits(self) -> None: ...
    async def revoke_on_close(self, partitions: set[TopicPartition]) -> None: ...
    async def finish_unsubscribe(self) -> None: ...


async def close_gracefully(parts: CloseParts, timeout: float | None,
                           operation: GroupMembershipOperation = GroupMembershipOperation.DEFAULT,
                           last_metrics_push: Callable[[], Awaitable[None]] | None = None) -> None:
    """Auto-commit, revoke, leave the group, then the metrics push marked terminating (KIP-714);
    a lapse or an error here only skips to the forced part."""
    if not parts.started:
        return
    try:
        async with asyncio.timeout(timeout):
            if parts.member is not None:
                await _leave_gracefully(parts, parts.member, operation)
            if last_metrics_push is not None:
                await last_metrics_push()
    except TimeoutError:
        log.warning("close(): the graceful part took longer than %s s; closing by force", timeout)
    except KafkaError as exc:
        log.warning("close(): %s; closing by force", exc)


async def _leave_gracefully(parts: CloseParts, member: GroupMember, operation: GroupMembershipOperation) -> None:
    """Finish an unsubscribe, stop a rebalance, auto-commit, wait for earlier commits, revoke, leave."""
    await parts.finish_unsubscribe()  # its revocation and leave come first, as they began first
    # close() is what cancels the poll steps, a rebalance's listener callbacks included.
    await stop_rebalance(parts, member, "closing mid-join", every_step=True)
    sub = parts.subscription_state()
    owned = sub.assigned()
    in_group = member.is_stable and sub.uses_group
    standalone = sub.type is SubscriptionType.MANUAL
    offsets = parts.offsets_to_commit()
    if owned and (in_group or standalone) and parts.config.enable_auto_commit and offsets:
        await parts.queue_commit(offsets)  # after every commit made before it
    await parts.drain_commits()  # commits made earlier land before the member leaves
    if owned and in_group:
        await parts.revoke_on_close(owned)
    await member.stop_liveness()
    await member.leave("the consumer is being closed", timeout=None, operation=operation)


def membership_operation(value: object) -> GroupMembershipOperation:
    """close()'s ``group_membership``: a GroupMembershipOperation or its value ("leave", "remain",
    "default"); anything else is refused before anything closes."""
    if isinstance(value, GroupMembershipOperation):
        return value
    for operation in GroupMembershipOperation:
        if value == operation.value:
            return operation
    allowed = ", ".join(repr(op.value) for op in GroupMembershipOperation)
    raise InvalidArgumentError(f"group_membership must be one of {allowed} (or a GroupMembershipOperation), "
                               f"got {value!r}")


async def leave_by_force(member: GroupMember,
                         operation: GroupMembershipOperation = GroupMembershipOperation.DEFAULT) -> None:
    """Closing by force (a lapsed or cancelled graceful part, close(timeout=0)) still tells the
    group, as Java's close() sends its LeaveGroup whatever the timeout: the partitions move now,
    not when the session lapses. Best effort, briefly; no listener callback runs here."""
    if not member.is_stable:
        return  # left already, never joined, or mid-join (the leave would queue behind the join)
    try:
        async with asyncio.timeout(FORCED_LEAVE_LIMIT):
            await member.leave("the consumer is being closed", timeout=None, operation=operation)
    except (TimeoutError, KafkaError) as exc:
        log.info("close(): the LeaveGroup of a forced close did not complete: %s", exc)
