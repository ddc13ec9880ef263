"""The classic group protocol behind the GroupMember interface: JoinGroup/SyncGroup through the
coordinator (coordinator.py), the rebalance itself (rebalance.py, eager or cooperative), and the
KIP-62 background paths, as asyncio tasks (liveness_tasks.py) or a thread (heartbeat_thread.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from ..._net.cluster import Cluster
from ...config import ConsumerConfig
from ...liveness.health import HealthInputs
from ...liveness.timers import LivenessTimers
from ...structs import GroupMembershipOperation, OffsetAndMetadata, TopicPartition
from ..member import GroupMember, MemberHost, RebalanceCounts
from .assignors import RebalanceProtocol, rebalance_protocol
from .coordinator import GroupCoordinator
from .heartbeat_thread import HeartbeatThread
from .liveness_tasks import LivenessTasks
from .membership import State
from .rebalance import assigned_callback, rebalance, snapshot_partition_counts


class ClassicMember(GroupMember):
    protocol = "classic"

    def __init__(self, cluster: Cluster, config: ConsumerConfig, host: MemberHost,
                 timers: LivenessTimers, timers_lock: threading.Lock) -> None:
        self._group = GroupCoordinator(cluster, config)
        self._group.on_rejoin_needed = host.wake
        self.group_id = self._group.group_id
        self._host = host
        self._config = config
        self._timers = timers
        self._timers_lock = timers_lock
        self.rebalance_protocol = rebalance_protocol(self._group.assignors)
        self._liveness: LivenessTasks | HeartbeatThread
        if config.heartbeat_mode == "thread":
            self._liveness = HeartbeatThread(self._group, timers, timers_lock, cluster.options)
        else:
            self._liveness = LivenessTasks(self._group, timers, time.monotonic)
        self.last_rebalance = RebalanceCounts()

    # -- the poll path ------------------------------------------------------------------

    def rebalance_due(self) -> bool:
        return self._group.needs_join or bool(self._host.subscription_state().awaiting_callback())

    async def rebalance_step(self) -> None:
        try:
            await self._rebalance_step()
        finally:
            self._host.callbacks_done()

    async def _rebalance_step(self) -> None:
        sub = self._host.subscription_state()
        if not self._group.needs_join:
            # on_partitions_assigned raised last time: called again, as in Java, until it returns.
            await self._host.until_polled()
            await assigned_callback(self._host, sub.awaiting_callback())
            return
        outcome = await rebalance(self._group, self._host, self.rebalance_protocol)
        self.last_rebalance = outcome.counts
        with self._timers_lock:
            self._timers.on_join(time.monotonic())
        self._group.lapse_reason = None
        self._liveness.start()
        self._liveness.poke()
        self._host.member_joined()
        await snapshot_partition_counts(self._group, self._host, outcome.generation_id)
        await assigned_callback(self._host, outcome.assigned)
        # A subscribed topic the metadata calls invalid or unauthorized is raised from poll(), as in Java.
        self._host.cluster.raise_topic_errors(sub.topics, subscribed=True)

    def keeps_fetching_while_rebalancing(self) -> bool:
        # Eager: everything is revoked first, so poll() waits for the new assignment.
        return self.rebalance_protocol is RebalanceProtocol.COOPERATIVE

    def before_poll(self) -> None:
        self._liveness.apply_pending()  # what the heartbeat thread learned, if any
        if self._liveness.fatal_error is not None:
            raise self._liveness.fatal_error

    def after_poll(self) -> None:
        if self._config.heartbeat_mode == "thread":
            self._liveness.poke()  # keep the heartbeat thread's identity snapshot current

    def subscription_changed(self, reason: str) -> None:
        self._group.request_rejoin(reason)
        self._host.wake()

    def watched_topics(self) -> set[str]:
        return self._group.watched_topics()

    def metadata_refreshed(self, partition_counts_now: Mapping[str, int]) -> None:
        # As in Java, partitions added to a subscribed topic (or, on the leader, to any topic it
        # assigned) mean a new assignment.
        changed = self._group.partition_count_changes(partition_counts_now)
        if changed:
            self.subscription_changed(f"the partition count of {', '.join(changed)} changed")

    # -- liveness -----------------------------------------------------------------------

    async def stop_liveness(self) -> None:
        await self._liveness.stop()

    @property
    def fatal_error(self) -> BaseException | None:
        return self._liveness.fatal_error

    # -- state ------------------------------------------------------------------------

    @property
    def is_stable(self) -> bool:
        return self._group.membership.is_stable

    @property
    def mid_join(self) -> bool:
        return self._group.membership.state in (State.JOINING, State.SYNCING)

    # -- offsets and leaving --------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout: float | None,
                     standalone: bool = False) -> None:
        await self._group.commit(offsets, timeout, standalone=standalone)

    async def fetch_committed(self, tps: Iterable[TopicPartition], timeout: float | None
                              ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return await self._group.fetch_committed(list(tps), timeout)

    def commit_generation(self) -> Hashable:
        m = self._group.membership
        return m.generation_id, m.member_id

    async def leave(self, reason: str, timeout: float | None,
                    operation: GroupMembershipOperation = GroupMembershipOperation.DEFAULT) -> bool:
        return await self._group.leave(reason, timeout, operation)

    # -- metrics ------------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        group, m, live = self._group, self._group.membership, self._liveness
        return {
            "group_id": group.group_id,
            "group_protocol": self.protocol,
            "rebalance_protocol": self.rebalance_protocol.value,
            "group_state": m.state.name,
            "generation_id": m.generation_id,
            "member_id": m.member_id,
            "rebalances": group.rebalances,
            "last_rebalance_seconds": group.last_rebalance_seconds,
            "last_rebalance_partitions": vars(self.last_rebalance).copy(),
            "heartbeats_sent": live.heartbeats_sent,
            "heartbeat_failures": live.heartbeat_failures,
            "poll_interval_lapses": live.poll_lapses,
            "last_leave_delay_seconds": live.last_leave_delay,
        }

    def health_inputs(self) -> HealthInputs:
        group, config = self._group, self._config
        return HealthInputs(
            group.group_id, config.max_poll_interval_ms, config.session_timeout_ms,
            joins=group.join_failures, lookups=group.cluster.coordinator_lookups(group.group_id),
            heartbeats=self._liveness.failure_log if group.membership.is_stable else None,
            coordinator_unreachable_since=group.coordinator_unreachable_since)
