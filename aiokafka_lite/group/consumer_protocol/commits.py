"""Commits and committed-offset fetches as a KIP-848 member (the I/O half of offsets.py).

Every request carries the member id and the current member epoch. STALE_MEMBER_EPOCH means the
epoch moved on while the request was out: retried after the next heartbeat answer, within the
caller's timeout, while the member is still in the group and still holds every partition of the
commit; a member that is no longer in the group (fenced, left after a poll lapse) gets
CommitFailedError, as in Java. So does a commit for a partition that moved to another member
meanwhile: since KIP-1251 (Kafka 4.3) the broker accepts an older epoch for partitions held since
then and answers STALE_MEMBER_EPOCH for one the member has lost, and sending that again in the new
epoch would overwrite the new owner's offsets (a zombie commit). A committed-offset fetch the
broker refuses because it no longer knows the member is read again from outside the group: it is
never taken for "no committed offset".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from ..._net.backoff import Backoff
from ..._net.cluster import Cluster
from ...config import ConsumerConfig
from ...errors import CommitFailedError, KafkaError, KafkaTimeoutError
from ...protocol.messages import OFFSET_COMMIT, OFFSET_FETCH
from ...structs import OffsetAndMetadata, TopicPartition
from ..member import generation_moved, standalone_commit_refused
from . import offsets as offsets_io
from .state import Kip848Machine


class MemberOffsets:
    def __init__(self, cluster: Cluster, config: ConsumerConfig, machine: Kip848Machine,
                 next_heartbeat_answer: Callable[[], Awaitable[None]],
                 stale_reason: Callable[[], str]) -> None:
        self.cluster = cluster
        self.config = config
        self.machine = machine
        self.group_id = machine.group_id
        self._next_heartbeat_answer = next_heartbeat_answer
        self._stale_reason = stale_reason

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout: float | None,
                     standalone: bool = False) -> None:
        try:
            async with asyncio.timeout(timeout):
                await self._commit(offsets, standalone)
        except TimeoutError as exc:
            raise KafkaTimeoutError(f"commit for group {self.group_id!r} took over {timeout} s") from exc

    async def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], standalone: bool) -> None:
        m = self.machine
        backoff = self._backoff()
        joins = m.joins  # the membership the commit is made in: a retry never reaches the next one
        refused_epoch = False
        while True:
            if standalone:
                epoch, member_id, instance = -1, "", None
            elif m.joins != joins:
                raise generation_moved(self.group_id)
            elif m.in_group:
                if refused_epoch:
                    self._check_still_owned(offsets)
                epoch, member_id, instance = m.member_epoch, m.member_id, m.instance_id
            else:
                raise CommitFailedError(self._stale_reason())
            body = offsets_io.commit_body(self.group_id, member_id, epoch, instance, offsets)
            outcome = offsets_io.commit_outcome(await self._send(OFFSET_COMMIT, body), self.group_id)
            if outcome.done:
                return
            if standalone and outcome.gone:  # UNKNOWN_MEMBER_ID: the group has members
                raise standalone_commit_refused(self.group_id)
            refused_epoch = outcome.stale
            await self._after_error(outcome, backoff, standalone)

    def _check_still_owned(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        moved = set(offsets) - self.machine.owned_partitions()
        if moved:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(moved))
            raise CommitFailedError(
                f"commit failed: {names} moved to another member of group "
                f"{self.group_id!r} before the commit was accepted (the broker refused its member "
                "epoch); the new owner will process the uncommitted records again")

    async def fetch_committed(self, tps: Iterable[TopicPartition], timeout: float | None
                              ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        wanted = list(tps)
        backoff = self._backoff()
        as_member = True
        try:
            async with asyncio.timeout(timeout):
                while True:
                    m = self.machine
                    in_group = as_member and m.in_group
                    member = (m.member_id, m.member_epoch) if in_group else (None, -1)
                    body = offsets_io.fetch_body(self.group_id, member[0], member[1], wanted)
                    outcome = offsets_io.fetch_outcome(await self._send(OFFSET_FETCH, body))
                    if outcome.done:
                        return {tp: outcome.offsets.get(tp) for tp in wanted}
                    if outcome.gone and in_group:
                        # No longer a member (fenced, removed) before this member learnt it: the
                        # answer says nothing about the offsets, which are read again at once
                        # from outside the group (no member id, epoch -1), never taken as "none".
                        as_member = False
                        continue
                    await self._after_error(outcome, backoff, standalone=not in_group)
        except TimeoutError as exc:
            raise KafkaTimeoutError(f"committed() for group {self.group_id!r} took over {timeout} s") from exc

    async def _after_error(self, outcome: offsets_io.Outcome, backoff: Backoff, standalone: bool) -> None:
        if outcome.error is not None:
            raise outcome.error
        if outcome.gone or (outcome.stale and (standalone or not self.machine.in_group)):
            raise CommitFailedError(self._stale_reason())
        if outcome.stale:
            await self._next_heartbeat_answer()
            return
        if outcome.rediscover:
            self.cluster.mark_coordinator_dead(self.group_id)
        backoff.failed(time.monotonic())
        await asyncio.sleep(backoff.delay())

    async def _send(self, api: Any, body: dict[str, Any]) -> dict[str, Any]:
        conn = await self.cluster.coordinator_connection(self.group_id, timeout=self.config.request_timeout)
        version = conn.version_for(api, offsets_io.OFFSET_VERSION_CAP)
        try:
            return await conn.send(api, version, body)
        except KafkaError:
            self.cluster.mark_coordinator_dead(self.group_id)
            raise

    def _backoff(self) -> Backoff:
        return Backoff(self.config.retry_backoff, self.config.retry_backoff_max)
