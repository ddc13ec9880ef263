"""The KIP-848 member's reconciliation, as the poll path runs it: revoke what the target dropped
(commit first, then on_partitions_revoked), add what it brought (on_partitions_assigned), give up
lost partitions after fencing or a poll lapse (on_partitions_lost, no commit). The plan itself is
pure (Kip848Machine.plan); this is the part that calls the listener and moves the assignment."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..._net.cluster import Cluster
from ...config import ConsumerConfig
from ...structs import TopicPartition
from ...subscription import SubscriptionType
from ..member import ListenerEvent, MemberHost, RebalanceCounts
from .state import Kip848Machine, Plan, State

log = logging.getLogger("aiokafka_lite.consumer")


class Reconciler:
    def __init__(self, machine: Kip848Machine, host: MemberHost, cluster: Cluster, config: ConsumerConfig,
                 acknowledge: Callable[[], None], broker_regex: Callable[[], bool]) -> None:
        self.machine = machine
        self.host = host
        self.cluster = cluster
        self.config = config
        self.acknowledge = acknowledge  # heartbeat at once: the broker learns what is owned now
        self.broker_regex = broker_regex
        self.counts = RebalanceCounts()  # of the last reconciliation (metrics)
        self.rebalances = 0

    async def reconcile(self) -> None:
        m, sub = self.machine, self.host.subscription_state()
        plan = m.plan(self.cluster.metadata.topic_name)
        if plan is not None and plan.unresolved:
            await self.cluster.refresh_metadata(None, timeout=self.config.request_timeout)
            plan = m.plan(self.cluster.metadata.topic_name)
        if plan is None:
            return
        if self.config.enable_auto_commit and sub.assigned():
            # As Java (ConsumerMembershipManager.signalReconciliationStarted): every reconciliation
            # starts with an auto-commit of everything consumed, whether or not anything is revoked.
            await self.host.commit_before_revoke(sub.assigned())
        revoked = set(plan.revoke) & sub.assigned()
        if revoked:
            try:
                await self.host.run_listener(ListenerEvent.REVOKED, revoked)
                await self.host.drain_commits()
            finally:  # given up however the callback ended: delivered once, not again
                sub.set_assignment(sub.assigned() - revoked)
        if m.state is not State.RECONCILING or m.member_epoch != plan.epoch:
            return  # fenced, left or a newer target meanwhile: the next step plans again
        await self.assigned_callback(self._take(plan, revoked))

    def _take(self, plan: Plan, revoked: set[TopicPartition]) -> set[TopicPartition]:
        sub = self.host.subscription_state()
        added = set(plan.add) - sub.assigned()
        sub.set_assignment(sub.assigned() | added)
        sub.set_awaiting_callback(added, True)
        if sub.type is SubscriptionType.PATTERN and self.broker_regex():
            sub.match_pattern({tp.topic for tp in sub.assigned()})
        self.machine.reconciled(plan)
        self.counts = RebalanceCounts(assigned=len(added), revoked=len(revoked))
        self.rebalances += 1
        log.info("group %s: member epoch %d, assigned %s (added %s, revoked %s)", self.machine.group_id,
                 self.machine.member_epoch, sorted(sub.assigned()), sorted(added), sorted(revoked))
        self.acknowledge()
        self.host.member_joined()
        return added

    async def assigned_callback(self, partitions: set[TopicPartition]) -> None:
        await self.host.run_listener(ListenerEvent.ASSIGNED, partitions)
        self.host.subscription_state().set_awaiting_callback(partitions, False)

    async def lose(self) -> None:
        sub = self.host.subscription_state()
        lost = sub.assigned()
        self.counts = RebalanceCounts(lost=len(lost))
        if not lost:
            return
        try:
            await self.host.run_listener(ListenerEvent.LOST, lost)
        finally:
            sub.set_assignment(())
