"""OffsetCommit and OffsetFetch for the classic group: the request bodies, what each answer means
for the membership, and the retries after a retriable error (bounded by the caller's timeout).

A commit goes out as the group member (the current generation and member id) or, standalone
(partitions assigned by hand), as a consumer outside the group. The requests travel over the
coordinator's connection: GroupCoordinator hands in its send and its coordinator-moved check.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..._net.backoff import Backoff
from ...config import ConsumerConfig
from ...errors import (
    BrokerError,
    CommitFailedError,
    FencedInstanceIdError,
    RebalanceInProgressError,
    is_retriable,
)
from ...protocol.messages import OFFSET_COMMIT, OFFSET_FETCH
from ...structs import OffsetAndMetadata, TopicPartition
from ..member import standalone_commit_refused
from .codes import (
    FENCED_INSTANCE_ID,
    GENERATION_GONE,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    UNSTABLE_OFFSET_COMMIT,
)
from .membership import NO_GENERATION, Event, GroupMembership, State

# Newer versions address topics by id only; this client tracks topics by name.
VERSION_CAPS = {OFFSET_COMMIT.key: 9, OFFSET_FETCH.key: 9}

# One request to the coordinator (api, body, timeout to find it): (version, response).
SendRequest = Callable[[Any, dict[str, Any], float | None], Awaitable[tuple[int, dict[str, Any]]]]


class GroupOffsets:
    def __init__(self, group_id: str, config: ConsumerConfig, membership: GroupMembership,
                 send: SendRequest, coordinator_error: Callable[[int], None],
                 lapse_reason: Callable[[], str | None]) -> None:
        self.group_id = group_id
        self.config = config
        self.membership = membership
        self._send = send
        self._coordinator_error = coordinator_error  # marks the coordinator unknown if it moved
        self._lapse_reason = lapse_reason  # why the member left on its own, if it did

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout: float | None,
                     standalone: bool = False) -> None:
        """OffsetCommit as the group member, or (standalone: partitions assigned by hand) as a
        consumer outside the group, with no generation and no member id."""
        m = self.membership
        generation = (NO_GENERATION, "") if standalone else m.generation_if_stable()
        if generation is None and m.state in (State.JOINING, State.SYNCING):
            # As Java: not fatal; the rebalance under way ends in a generation to commit in.
            raise RebalanceInProgressError(
                "the group is rebalancing: poll() until it completes, then commit again")
        if generation is None:
            raise CommitFailedError(self._stale_commit_reason())
        body = {
            "group_id": self.group_id,
            "generation_id_or_member_epoch": generation[0],
            "member_id": generation[1],
            "group_instance_id": None if standalone else m.group_instance_id,
            "topics": _by_topic(offsets, lambda tp, om: {
                "partition_index": tp.partition,
                "committed_offset": om.offset,
                "committed_leader_epoch": -1 if om.leader_epoch is None else om.leader_epoch,
                "committed_metadata": om.metadata,
            }),
        }
        backoff = self.retry_backoff()
        while True:
            _, resp = await self._send(OFFSET_COMMIT, body, timeout)
            codes = {p["error_code"] for t in resp["topics"] for p in t["partitions"]} - {NONE}
            if not codes:
                return
            if standalone:
                self._standalone_commit_failed(codes)
            else:
                self._commit_failed(codes, generation[0])
            backoff.failed(time.monotonic())
            await asyncio.sleep(backoff.delay())

    def _commit_failed(self, codes: set[int], generation_id: int) -> None:
        # Events carry the generation the commit was sent in: a late answer about an older
        # generation must not disturb a join that started meanwhile.
        m = self.membership
        if codes & GENERATION_GONE:
            m.handle(Event.UNKNOWN_MEMBER_ID if UNKNOWN_MEMBER_ID in codes else Event.ILLEGAL_GENERATION,
                     generation_id=generation_id)
            raise CommitFailedError(self._stale_commit_reason())
        if REBALANCE_IN_PROGRESS in codes:
            m.handle(Event.REBALANCE_IN_PROGRESS, generation_id=generation_id)
            raise RebalanceInProgressError(
                "the group is rebalancing: poll() to rejoin, then commit the records handed out since"
            )
        if FENCED_INSTANCE_ID in codes:
            m.handle(Event.FENCED)
            raise FencedInstanceIdError(f"OffsetCommit for group {self.group_id!r}")
        for code in codes:
            self._coordinator_error(code)
            if not is_retriable(code):
                raise BrokerError(code, f"OffsetCommit for group {self.group_id!r}")
        # Every code is retriable: the caller's loop retries within its timeout.

    def _standalone_commit_failed(self, codes: set[int]) -> None:
        if codes & GENERATION_GONE:
            raise standalone_commit_refused(self.group_id)
        for code in codes:
            self._coordinator_error(code)
            if not is_retriable(code):
                raise BrokerError(code, f"OffsetCommit for group {self.group_id!r}")

    def _stale_commit_reason(self) -> str:
        why = self._lapse_reason() or "the group rebalanced and this member's generation is no longer current"
        return (
            f"commit failed: {why}. The partitions may already be owned by another member, which "
            "will process the uncommitted records again. Poll more often, or raise "
            "max_poll_interval_ms or lower max_poll_records."
        )

    async def fetch_committed(self, tps: list[TopicPartition], timeout: float | None
                              ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        topics = _by_topic({tp: None for tp in tps}, lambda tp, _: tp.partition, key="partition_indexes")
        backoff = self.retry_backoff()
        while True:
            _, resp = await self._send(OFFSET_FETCH, _offset_fetch_body(self.group_id, topics), timeout)
            result, retry = _parse_offset_fetch(resp)
            if not retry:
                return {tp: result.get(tp) for tp in tps}
            for code in retry:
                self._coordinator_error(code)
            backoff.failed(time.monotonic())
            await asyncio.sleep(backoff.delay())

    def retry_backoff(self) -> Backoff:
        """A fresh exponential backoff for one call's retries: retry_backoff_ms doubling up to
        retry_backoff_max_ms, with jitter (KIP-580)."""
        return Backoff(self.config.retry_backoff, self.config.retry_backoff_max)


def _by_topic(items: Mapping[TopicPartition, Any], make: Any, key: str = "partitions") -> list[dict[str, Any]]:
    topics: dict[str, list[Any]] = {}
    for tp, value in items.items():
        topics.setdefault(tp.topic, []).append(make(tp, value))
    return [{"name": name, key: parts} for name, parts in topics.items()]


def _offset_fetch_body(group_id: str, topics: list[dict[str, Any]]) -> dict[str, Any]:
    # Both layouts are filled: v0-7 read the top-level fields, v8+ the batched `groups`.
    return {"group_id": group_id, "topics": topics, "require_stable": True,
            "groups": [{"group_id": group_id, "topics": topics}]}


def _parse_offset_fetch(resp: dict[str, Any]) -> tuple[dict[TopicPartition, OffsetAndMetadata], set[int]]:
    groups = resp.get("groups") or [resp]
    result: dict[TopicPartition, OffsetAndMetadata] = {}
    retry: set[int] = set()
    for group in groups:
        code = group.get("error_code", NONE)
        if code != NONE:
            if is_retriable(code):
                retry.add(code)
                continue
            raise BrokerError(code, "OffsetFetch")
        for topic in group["topics"]:
            for p in topic["partitions"]:
                if p["error_code"] == UNSTABLE_OFFSET_COMMIT or is_retriable(p["error_code"]):
                    retry.add(p["error_code"])
                elif p["error_code"] != NONE:
                    raise BrokerError(p["error_code"], f"OffsetFetch {topic['name']}-{p['partition_index']}")
                elif p["committed_offset"] >= 0:
                    epoch = p.get("committed_leader_epoch", -1)
                    result[TopicPartition(topic["name"], p["partition_index"])] = OffsetAndMetadata(
                        p["committed_offset"], p.get("metadata") or "", None if epoch is None or epoch < 0 else epoch)
    return result, retry
