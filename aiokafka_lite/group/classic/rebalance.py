"""What a rebalance does under the classic protocol, eager or cooperative (KIP-429), as the
rebalance step of the poll path (a task the consumer owns: see member.py and poll_steps.py).

Eager: revoke every owned partition (committing first) -> JoinGroup + SyncGroup -> take the new
assignment -> on_partitions_assigned(all of it).

Cooperative: keep the owned partitions, and report them in JoinGroup -> JoinGroup + SyncGroup ->
revoke only what the new assignment takes away (committing first) -> on_partitions_assigned(only
what was added) -> if something was revoked, rejoin at once: the leader withheld those partitions
for a second round, in which their new owner gets them. Kept partitions are fetched throughout.

Either way, partitions of a generation that is gone (member removed, poll deadline lapsed) are
lost: on_partitions_lost, no commit.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from ...errors import KafkaError
from ...structs import TopicPartition
from ...subscription import SubscriptionType
from ..member import ListenerEvent, MemberHost, RebalanceCounts
from .assignors import RebalanceProtocol
from .coordinator import GroupCoordinator

log = logging.getLogger("aiokafka_lite.consumer")


@dataclass
class RebalanceOutcome:
    generation_id: int
    assigned: set[TopicPartition]  # the whole new assignment
    counts: RebalanceCounts


async def rebalance(group: GroupCoordinator, host: MemberHost, protocol: RebalanceProtocol) -> RebalanceOutcome:
    """One rebalance, from giving partitions up to on_partitions_assigned."""
    counts = RebalanceCounts()
    sub = host.subscription_state()
    if sub.type is SubscriptionType.PATTERN:
        await host.refresh_pattern()
    await _before_join(group, host, protocol, counts)
    owned = sub.assigned()
    assignment = await group.join(frozenset(sub.topics), owned)
    await host.until_polled()  # kept partitions were read meanwhile; callbacks run inside poll()
    subscribed = sub.topics
    target = {tp for tp in assignment.partitions if tp.topic in subscribed}
    revoked = owned - target
    if revoked:  # cooperative only: an eager member owns nothing by now
        await _revoke(host, revoked, counts)
        group.request_rejoin(f"revoked {len(revoked)} partitions for the leader to hand out")
    added = target - owned
    sub.set_assignment(target)
    counts.assigned = len(added)
    log.info("group %s: generation %d, assigned %s%s", group.group_id, assignment.generation_id,
             sorted(target), "" if protocol is RebalanceProtocol.EAGER else f" (added {sorted(added)})")
    sub.set_awaiting_callback(added, True)
    return RebalanceOutcome(assignment.generation_id, added, counts)


async def _before_join(group: GroupCoordinator, host: MemberHost, protocol: RebalanceProtocol,
                       counts: RebalanceCounts) -> None:
    """Eager: give up every owned partition. Cooperative: give up only what can no longer be
    ours (unsubscribed topics), commit the rest. Lost partitions are never committed."""
    sub = host.subscription_state()
    owned = sub.assigned()
    if not owned:
        return
    await host.until_polled()
    if group.partitions_lost:
        counts.lost = len(owned)
        try:
            await _run_marked(host, ListenerEvent.LOST, owned)
        finally:
            sub.set_assignment(())  # given up however the callback ended: delivered once
        return
    if protocol is RebalanceProtocol.EAGER:
        await _revoke(host, owned, counts)
        return
    gone = {tp for tp in owned if tp.topic not in sub.topics}
    if gone:
        await _revoke(host, gone, counts)
    if host.config.enable_auto_commit and owned - gone:
        await host.commit_before_revoke(owned - gone)  # as Java, before every JoinGroup
    host.callbacks_done()  # kept partitions are read again while the join waits for the broker


async def _revoke(host: MemberHost, partitions: set[TopicPartition], counts: RebalanceCounts) -> None:
    """Commit (auto-commit) -> on_partitions_revoked -> their commits land -> drop them."""
    sub = host.subscription_state()
    counts.revoked += len(partitions)
    sub.set_pending_revocation(partitions)  # no record of theirs is handed out from now on
    try:
        if host.config.enable_auto_commit:
            await host.commit_before_revoke(partitions)
        await host.run_listener(ListenerEvent.REVOKED, partitions)
        # Commits the listener started (commit_async) go out in this generation, before the
        # JoinGroup that ends it.
        await host.drain_commits()
    finally:
        # Given up however the callback ended (an error goes to poll()'s caller; close() may
        # have cancelled it): the event was delivered once, and is not delivered again.
        sub.set_assignment(sub.assigned() - partitions)


async def _run_marked(host: MemberHost, event: ListenerEvent, partitions: set[TopicPartition]) -> None:
    host.subscription_state().set_pending_revocation(partitions)
    await host.run_listener(event, partitions)


async def assigned_callback(host: MemberHost, partitions: set[TopicPartition]) -> None:
    """on_partitions_assigned; its partitions are fetched only once it has returned without an
    error (a failed callback is called again by the next poll, as in Java)."""
    await host.run_listener(ListenerEvent.ASSIGNED, partitions)
    host.subscription_state().set_awaiting_callback(partitions, False)


async def snapshot_partition_counts(group: GroupCoordinator, host: MemberHost, generation_id: int) -> None:
    """Remember how many partitions each subscribed topic has now, so a later metadata refresh
    can tell that partitions were added (see ClassicMember.metadata_refreshed)."""
    topics = sorted(host.subscription_state().topics)
    try:
        await host.cluster.refresh_metadata(topics, timeout=host.config.request_timeout)
    except KafkaError as exc:  # the next refresh is compared with the leader's snapshot only
        log.debug("metadata after join failed: %s", exc)
        return
    group.remember_partition_counts(generation_id, partition_counts(host, topics))


def partition_counts(host: MemberHost, topics: Iterable[str]) -> dict[str, int]:
    """Partition counts of the topics the metadata knows (a missing topic is no evidence)."""
    known = {t: host.cluster.partitions_for(t) for t in topics}
    return {t: len(parts) for t, parts in known.items() if parts}

