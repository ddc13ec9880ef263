"""The group path: find the coordinator, join and sync (eager protocol), heartbeat, leave, and the
partition counts an assignment was made with. Every request goes over the coordinator's own
connection; offsets.py builds and reads the OffsetCommit and OffsetFetch requests sent over it.

The join runs as an owned task, so a poll() whose timeout lapses mid-rebalance returns empty
without cancelling the rebalance; the next poll picks the finished (or failed) join up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..._net.backoff import Backoff
from ..._net.cluster import Cluster
from ..._net.connection import DEFAULT, Connection, Timeout
from ..._net.failure_log import FailureLog
from ...config import ConsumerConfig
from ...errors import (
    BrokerError,
    ConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    broker_error,
)
from ...protocol import consumer_protocol as cp
from ...protocol.messages import (
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    SYNC_GROUP,
)
from ...structs import GroupMembershipOperation, OffsetAndMetadata, TopicPartition
from .assignors import PartitionAssignor, claim_generation, lookup_assignor
from .codes import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_MOVED,
    FENCED_INSTANCE_ID,
    ILLEGAL_GENERATION,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    REBALANCE_IN_PROGRESS,
    REQUEST_TIMED_OUT,
    UNKNOWN_MEMBER_ID,
)
from .membership import NO_GENERATION, Event, GroupMembership, State
from .offsets import VERSION_CAPS, GroupOffsets

log = logging.getLogger("aiokafka_lite.consumer")

# JoinGroup's request timeout: the rebalance timeout plus this, so the broker answers first.
JOIN_MARGIN = 5.0


@dataclass(frozen=True)
class Assignment:
    generation_id: int
    partitions: frozenset[TopicPartition]


class GroupCoordinator:
    def __init__(self, cluster: Cluster, config: ConsumerConfig) -> None:
        assert config.group_id is not None
        self.cluster = cluster
        self.config = config
        self.group_id: str = config.group_id
        self.membership = GroupMembership(self.group_id, config.group_instance_id)
        self.rejoin_reason: str | None = None
        self.assignors: list[PartitionAssignor] = [
            lookup_assignor(name) for name in config.partition_assignment_strategy
        ]
        self.rebalances = 0
        self.last_rebalance_seconds: float | None = None
        self.lapse_reason: str | None = None  # why the member left on its own, for CommitFailedError
        # Partition counts per topic when the assignment was made, as (generation, counts):
        # the leader's for every topic it assigned, this member's for its subscription.
        self._leader_counts: tuple[int, dict[str, int]] = (NO_GENERATION, {})
        self._member_counts: tuple[int, dict[str, int]] = (NO_GENERATION, {})
        # Called when a background path finds that the member must rejoin: wakes a waiting poll().
        self.on_rejoin_needed: Callable[[], None] = lambda: None
        # Join failures are said once; a streak longer than the rebalance timeout earns a WARNING
        # (shorter ones happen whenever a broker restarts). metrics() reads the streak.
        self.join_failures = FailureLog(log, f"group {self.group_id}: join",
                                        warn_after_seconds=config.max_poll_interval)
        self.coordinator_unreachable_since: float | None = None  # monotonic; during a join
        self._offsets = GroupOffsets(self.group_id, config, self.membership, self._send,
                                     self.coordinator_error, lambda: self.lapse_reason)

    # ------------------------------------------------------------ coordinator

    async def connection(self, timeout: float | None) -> Connection:
        return await self.cluster.coordinator_connection(self.group_id, timeout=timeout)

    async def _send(self, api: Any, body: dict[str, Any], timeout: float | None,
                    request_timeout: Timeout = DEFAULT) -> tuple[int, dict[str, Any]]:
        """One request to the coordinator: (version, response). Connection loss marks it unknown."""
        conn = await self.connection(timeout)
        version = conn.version_for(api, VERSION_CAPS.get(api.key))
        try:
            return version, await conn.send(api, version, body, timeout=request_timeout)
        except (KafkaConnectionError, KafkaTimeoutError):
            self.cluster.mark_coordinator_dead(self.group_id)
            raise

    def coordinator_error(self, code: int) -> None:
        if code in COORDINATOR_MOVED:
            self.cluster.mark_coordinator_dead(self.group_id)

    # ------------------------------------------------------------ join + sync

    async def join(self, topics: frozenset[str], owned: set[TopicPartition]) -> Assignment:
        """JoinGroup then SyncGroup until this member holds an assignment for a generation.

        Bounded by the caller (the consumer's join task is cancelled on close); retriable
        errors back off and retry, fatal ones raise.
        """
        started = asyncio.get_running_loop().time()
        # KIP-580: retry_backoff_ms doubling up to retry_backoff_max_ms, with jitter.
        backoff = Backoff(self.config.retry_backoff, self.config.retry_backoff_max)
        while True:
            try:
                assignment = await self._join_once(topics, owned)
            except _Retry as retry:
                if not retry.backs_off:  # a step of the protocol (member id, new generation)
                    log.debug("group %s: rejoining: %s", self.group_id, retry)
                    continue
                await self._join_attempt_failed(retry, backoff)
                continue
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                self.membership.handle(Event.COORDINATOR_LOST)
                if self.coordinator_unreachable_since is None:
                    self.coordinator_unreachable_since = time.monotonic()
                await self._join_attempt_failed(exc, backoff)
                continue
            self.rebalances += 1
            self.last_rebalance_seconds = asyncio.get_running_loop().time() - started
            self.join_failures.recovered(detail=f"generation {assignment.generation_id}")
            return assignment

    async def _join_attempt_failed(self, error: KafkaError, backoff: Backoff) -> None:
        backoff.failed(time.monotonic())
        wait = backoff.wait_time(time.monotonic())
        self.join_failures.failed(error, then=f"retrying in {wait:.2f} s")
        await asyncio.sleep(wait)

    async def _join_once(self, topics: frozenset[str], owned: set[TopicPartition]) -> Assignment:
        m = self.membership
        m.handle(Event.JOIN_SENT)
        _version, resp = await self._send(JOIN_GROUP, self._join_body(topics, owned), None,
                                         request_timeout=self.config.rebalance_timeout + JOIN_MARGIN)
        self.coordinator_unreachable_since = None
        code = resp["error_code"]
        if code == MEMBER_ID_REQUIRED:  # KIP-394: rejoin at once with the id the broker gave
            m.handle(Event.MEMBER_ID_REQUIRED, member_id=resp["member_id"])
            raise _Retry("member id required", backs_off=False)
        if code != NONE:
            self._join_failed(code, "JoinGroup")
        m.handle(Event.JOIN_OK, member_id=resp["member_id"], generation_id=resp["generation_id"],
                 protocol_name=resp["protocol_name"], leader_id=resp["leader"])
        assignments: dict[str, bytes] = {}
        if resp["leader"] == resp["member_id"]:
            assignments = await self._assign(resp["protocol_name"], resp["members"])
        return await self._sync(assignments)

    def _join_body(self, topics: frozenset[str], owned: set[TopicPartition]) -> dict[str, Any]:
        m = self.membership
        # The partitions still owned (none after an eager revocation) and the generation they
        # were owned in: a cooperative leader keeps them where they are (KIP-429).
        protocols = [
            {"name": a.name, "metadata": cp.encode_subscription(cp.Subscription(
                topics=sorted(topics), user_data=a.subscription_user_data(m.generation_id),
                owned_partitions=sorted(owned), generation_id=m.generation_id))}
            for a in self.assignors
        ]
        return {
            "group_id": self.group_id,
            "session_timeout_ms": self.config.session_timeout_ms,
            "rebalance_timeout_ms": self.config.max_poll_interval_ms,
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "protocol_type": "consumer",
            "protocols": protocols,
            "reason": self.rejoin_reason,
        }

    def _join_failed(self, code: int, what: str) -> None:
        m = self.membership
        if code in COORDINATOR_MOVED:
            self.coordinator_error(code)
            m.handle(Event.COORDINATOR_LOST)
            raise _Retry(f"{what}: coordinator moved", backs_off=True)
        if code in (COORDINATOR_LOAD_IN_PROGRESS, REQUEST_TIMED_OUT):
            m.handle(Event.COORDINATOR_LOST)
            raise _Retry(f"{what}: coordinator busy", backs_off=True)
        if code == UNKNOWN_MEMBER_ID:
            m.handle(Event.UNKNOWN_MEMBER_ID)
            raise _Retry(f"{what}: member unknown", backs_off=False)
        if code in (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS):
            m.handle(Event.REBALANCE_IN_PROGRESS if code == REBALANCE_IN_PROGRESS else Event.ILLEGAL_GENERATION)
            raise _Retry(f"{what}: generation moved on", backs_off=False)
        if code == INVALID_SESSION_TIMEOUT:
            raise ConfigError(
                # Found at run time, when how the setting was spelled is gone: both names.
                f"the broker rejected session_timeout_ms (session.timeout.ms)={self.config.session_timeout_ms}: "
                "it must lie "
                "within the broker's group.min.session.timeout.ms and group.max.session.timeout.ms "
                "(Kafka's defaults: 6000 to 1800000)"
            )
        if code == FENCED_INSTANCE_ID:
            m.handle(Event.FENCED)
        raise broker_error(code, f"{what} for group {self.group_id!r}")

    async def _assign(self, protocol: str, members: list[dict[str, Any]]) -> dict[str, bytes]:
        """As leader: decode every member's subscription, run the chosen assignor."""
        assignor = next(a for a in self.assignors if a.name == protocol)
        subscriptions = {mem["member_id"]: cp.decode_subscription(mem["metadata"], mem.get("group_instance_id"))
                         for mem in members}
        all_topics = sorted({t for s in subscriptions.values() for t in s.topics})
        await self.cluster.refresh_metadata(all_topics, timeout=self.config.request_timeout)
        partitions = {t: len(self.cluster.partitions_for(t) or ()) for t in all_topics}
        self._leader_counts = (self.membership.generation_id, partitions)
        result = assignor.assign(partitions, subscriptions)
        # The claims (owned partitions, and the generation they were owned in) with the result:
        # what a sticky assignor kept or withheld can be read from this line alone.
        log.info("group %s: leader assigned %s with %s; claims (generation, owned) %s", self.group_id,
                 {mid: _by_topic(a.partitions()) for mid, a in result.items()}, protocol,
                 {mid: (claim_generation(s), _by_topic(s.owned_partitions)) for mid, s in subscriptions.items()
                  if s.owned_partitions})
        return {mid: cp.encode_assignment(a) for mid, a in result.items()}

    async def _sync(self, assignments: Mapping[str, bytes]) -> Assignment:
        m = self.membership
        m.handle(Event.SYNC_SENT)
        body = {
            "group_id": self.group_id,
            "generation_id": m.generation_id,
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "protocol_type": "consumer",
            "protocol_name": m.protocol_name,
            "assignments": [{"member_id": k, "assignment": v} for k, v in assignments.items()],
        }
        _, resp = await self._send(SYNC_GROUP, body, None,
                                   request_timeout=self.config.rebalance_timeout + JOIN_MARGIN)
        self.coordinator_unreachable_since = None
        if resp["error_code"] != NONE:
            self._join_failed(resp["error_code"], "SyncGroup")
        raw = resp["assignment"]
        decoded = cp.decode_assignment(bytes(raw)) if raw else cp.Assignment(())
        m.handle(Event.SYNC_OK)
        return Assignment(m.generation_id, frozenset(decoded.partitions()))

    # ------------------------------------------------------------ heartbeat + leave

    async def heartbeat(self) -> int:
        """One Heartbeat; returns the broker's error code (the heartbeat task interprets it)."""
        m = self.membership
        body = heartbeat_body(self.group_id, m.generation_id, m.member_id, m.group_instance_id)
        _, resp = await self._send(HEARTBEAT, body, None)
        code: int = resp["error_code"]
        self.coordinator_error(code)
        return code

    async def leave(self, reason: str, timeout: float | None,
                    operation: GroupMembershipOperation = GroupMembershipOperation.DEFAULT) -> bool:
        """LeaveGroup for a dynamic member; static members stay until their session expires, as in
        Java, unless ``operation`` is LEAVE; with REMAIN nobody leaves (KIP-1092). Returns True when
        a LeaveGroup was sent and acknowledged."""
        m = self.membership
        if not m.in_group:
            return False
        member_id = m.member_id
        m.handle(Event.LEAVE_SENT)
        try:
            leaves = operation is GroupMembershipOperation.LEAVE or (
                operation is GroupMembershipOperation.DEFAULT and not m.is_static)
            if not leaves or not member_id:
                return False
            if self.cluster.coordinator(self.group_id) is None:
                # As in Java: with no coordinator known there is none to tell (looking one up
                # could take as long as the outage); the session timeout removes the member.
                log.info("group %s: coordinator unknown, leaving without LeaveGroup", self.group_id)
                return False
            body = leave_body(self.group_id, member_id, reason, self.config.group_instance_id)
            _, resp = await self._send(LEAVE_GROUP, body, timeout, request_timeout=timeout)
            if resp["error_code"] != NONE:
                log.info("group %s: LeaveGroup answered %s", self.group_id, BrokerError(resp["error_code"]))
            return True
        finally:
            m.handle(Event.LEAVE_DONE)

    def left_elsewhere(self, reason: str) -> None:
        """The heartbeat thread left the group at the poll deadline: bring the state up to date."""
        if self.membership.in_group:
            self.lapse(reason)
            self.membership.handle(Event.LEAVE_SENT)
            self.membership.handle(Event.LEAVE_DONE)

    def lapse(self, reason: str) -> None:
        """The poll deadline lapsed: the caller sends LeaveGroup next (see leave())."""
        self.lapse_reason = reason
        self.membership.handle(Event.POLL_DEADLINE_LAPSED)

    @property
    def needs_join(self) -> bool:
        m = self.membership
        return m.state is State.UNJOINED or (m.rejoin_needed and m.state is State.STABLE)

    @property
    def partitions_lost(self) -> bool:
        """The generation is gone (member removed, lapsed or fenced): owned partitions may
        already belong to others, so they are lost rather than revoked and not committed."""
        return self.membership.generation_id == NO_GENERATION

    def request_rejoin(self, reason: str) -> None:
        if self.membership.state not in (State.FAILED, State.CLOSED):
            self.rejoin_reason = reason
            self.membership.handle(Event.REJOIN_NEEDED)

    # ------------------------------------------------------------ partition counts

    def remember_partition_counts(self, generation_id: int, counts: Mapping[str, int]) -> None:
        self._member_counts = (generation_id, dict(counts))

    def _current_snapshots(self) -> list[dict[str, int]]:
        generation = self.membership.generation_id
        return [counts for gen, counts in (self._leader_counts, self._member_counts)
                if gen == generation and gen != NO_GENERATION]

    def watched_topics(self) -> set[str]:
        """Topics whose partition counts the current generation's assignment depends on."""
        return {t for counts in self._current_snapshots() for t in counts}

    def partition_count_changes(self, now: Mapping[str, int]) -> list[str]:
        """Topics whose partition count differs from the current generation's snapshots (as in
        Java, partitions added to a subscribed topic mean a new assignment)."""
        return sorted({t for counts in self._current_snapshots() for t, n in counts.items()
                       if t in now and now[t] != n})

    # ------------------------------------------------------------ offsets (offsets.py)

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout: float | None,
                     standalone: bool = False) -> None:
        await self._offsets.commit(offsets, timeout, standalone=standalone)

    async def fetch_committed(self, tps: list[TopicPartition], timeout: float | None
                              ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return await self._offsets.fetch_committed(tps, timeout)


def heartbeat_body(group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> dict[str, Any]:
    return {"group_id": group_id, "generation_id": generation_id, "member_id": member_id,
            "group_instance_id": instance_id}


def leave_body(group_id: str, member_id: str, reason: str, instance_id: str | None = None) -> dict[str, Any]:
    # v0-2 take member_id; v3+ the batched members list, where a static member (leaving only when
    # close() says LEAVE) names its instance id too.
    return {"group_id": group_id, "member_id": member_id,
            "members": [{"member_id": member_id, "group_instance_id": instance_id, "reason": reason}]}


class _Retry(KafkaError):
    """Join again: after the backoff (a failure), or at once (a step of the protocol, as in Java)."""

    def __init__(self, why: str, *, backs_off: bool) -> None:
        super().__init__(why)
        self.backs_off = backs_off


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partitions as {topic: [numbers]}, for a log line a person can read."""
    grouped: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped
