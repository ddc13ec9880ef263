"""KIP-848 commits and committed-offset fetches (kip848_commits.py) against a scripted
coordinator: no broker. The member's state is driven through its state machine."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from aiokafka_lite import OffsetAndMetadata, TopicPartition
from aiokafka_lite.config import ConsumerConfig
from aiokafka_lite.errors import CommitFailedError
from aiokafka_lite.group.consumer_protocol.member import Kip848Member
from aiokafka_lite.group.consumer_protocol.state import State, Subscription
from aiokafka_lite.liveness.timers import LivenessTimers
from aiokafka_lite.subscription import SubscriptionState

pytestmark = pytest.mark.asyncio

TP = TopicPartition("t", 0)
TOPIC_ID = uuid.UUID(int=7)
UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH = 25, 110, 113
Answer = Callable[[dict[str, Any]], dict[str, Any]]


class Coordinator:
    """The coordinator connection: answers each request with the next scripted answer."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []

    def version_for(self, api: Any, client_max: int | None = None) -> int:
        return 9

    async def send(self, api: Any, version: int, body: dict[str, Any], timeout: Any = None) -> dict[str, Any]:
        self.requests.append(body)
        return self.answers.pop(0)(body)


class Cluster:
    def __init__(self, conn: Coordinator) -> None:
        self.conn = conn

    async def coordinator_connection(self, group_id: str, timeout: Any = None) -> Coordinator:
        return self.conn

    def coordinator(self, group_id: str) -> int | None:
        return None  # leaves go without a heartbeat (nothing scripted for them)

    def mark_coordinator_dead(self, group_id: str | None = None, reason: str = "") -> None:
        pass


class Host:
    def __init__(self, config: ConsumerConfig) -> None:
        self.config = config
        self.sub = SubscriptionState()

    def subscription_state(self) -> SubscriptionState:
        return self.sub

    def wake(self) -> None:
        pass


def fetch_answer(code: int = 0, offset: int = -1) -> Answer:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        partitions = [] if code else [{"partition_index": 0, "committed_offset": offset,
                                       "committed_leader_epoch": -1, "metadata": "", "error_code": 0}]
        return {"groups": [{"group_id": "g", "error_code": code,
                            "topics": [{"name": "t", "partitions": partitions}] if partitions else []}]}
    return answer


def commit_answer(code: int) -> Answer:
    return lambda body: {"topics": [{"name": "t", "partitions": [
        {"partition_index": p["partition_index"], "error_code": code} for p in body["topics"][0]["partitions"]]}]}


def member_in_group(conn: Coordinator, **settings: Any) -> Kip848Member:
    config = ConsumerConfig.from_kwargs(bootstrap_servers="127.0.0.1:1", group_id="g",
                                        group_protocol="consumer", **settings)
    timers = LivenessTimers(config.session_timeout, config.heartbeat_interval, config.max_poll_interval,
                            config.retry_backoff, config.retry_backoff_max)
    member = Kip848Member(Cluster(conn), config, Host(config), timers, threading.Lock())  # type: ignore[arg-type]
    m = member.machine
    m.subscribe(Subscription(frozenset({"t"})))
    m.heartbeat_request()
    m.on_heartbeat_response({"error_code": 0, "error_message": None, "member_id": None, "member_epoch": 4,
                             "heartbeat_interval_ms": 5000,
                             "assignment": {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [0]}]}})
    plan = m.plan(lambda topic_id: "t")
    assert plan is not None
    assert m.reconciled(plan)
    m.heartbeat_request()  # acknowledges the partition
    m.on_heartbeat_response({"error_code": 0, "error_message": None, "member_id": None, "member_epoch": 4,
                             "heartbeat_interval_ms": 5000, "assignment": None})
    assert m.state is State.STABLE
    assert m.in_group
    return member


# ---------------------------------------------------------------- committed offsets


@pytest.mark.parametrize("code", [UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH])
async def test_a_fetch_refused_to_a_former_member_is_not_read_as_no_committed_offset(code: int) -> None:
    """The member is no longer in the group (the broker knows before the member does): the
    partition's committed offset is still read, from outside the group; None would make
    auto_offset_reset apply to a partition that has one."""
    conn = Coordinator(fetch_answer(code), fetch_answer(offset=42))
    member = member_in_group(conn)
    async with asyncio.timeout(5):
        got = await member.fetch_committed([TP], timeout=None)
    assert got == {TP: OffsetAndMetadata(42, "", None)}  # before the fix: {TP: None}
    first, second = (r["groups"][0] for r in conn.requests)
    assert (first["member_id"], first["member_epoch"]) == (member.machine.member_id, 4)
    assert (second["member_id"], second["member_epoch"]) == (None, -1)


async def test_a_fetch_with_no_committed_offset_is_still_none() -> None:
    conn = Coordinator(fetch_answer(offset=-1))
    async with asyncio.timeout(5):
        assert await member_in_group(conn).fetch_committed([TP], timeout=None) == {TP: None}


# ---------------------------------------------------------------- a commit waiting after STALE_MEMBER_EPOCH


async def _stale_commit(member: Kip848Member) -> asyncio.Task[None]:
    """A commit that met STALE_MEMBER_EPOCH and now waits for the next heartbeat answer (none
    comes: no heartbeat task runs here)."""
    task = asyncio.create_task(member.commit({TP: OffsetAndMetadata(7)}, timeout=None))
    for _ in range(100):
        await asyncio.sleep(0)
        if member.offsets.cluster.conn.requests:  # type: ignore[attr-defined]
            break
    await asyncio.sleep(0.01)
    assert not task.done()
    return task


async def test_a_poll_lapse_ends_a_commit_waiting_for_a_heartbeat_answer() -> None:
    member = member_in_group(Coordinator(commit_answer(STALE_MEMBER_EPOCH)))
    async with asyncio.timeout(5):
        waiting = await _stale_commit(member)
        await member._leave_on_lapse("test: 9.0 s since the last poll() exceeds max_poll_interval_ms=3000")
        assert member.machine.state is State.STALE
        with pytest.raises(CommitFailedError, match="max_poll_interval_ms=3000"):
            await asyncio.wait_for(waiting, 1)  # before the fix: waited for ever (TimeoutError here)


async def test_a_lapse_seen_by_the_heartbeat_thread_ends_a_waiting_commit() -> None:
    member = member_in_group(Coordinator(commit_answer(STALE_MEMBER_EPOCH)))
    async with asyncio.timeout(5):
        waiting = await _stale_commit(member)
        member._thread_lapsed("test: the heartbeat thread saw the lapse")
        with pytest.raises(CommitFailedError):
            await asyncio.wait_for(waiting, 1)


async def test_leaving_ends_a_commit_waiting_for_a_heartbeat_answer() -> None:
    member = member_in_group(Coordinator(commit_answer(STALE_MEMBER_EPOCH)))
    async with asyncio.timeout(5):
        waiting = await _stale_commit(member)
        await member.leave("test: unsubscribe", timeout=1)
        with pytest.raises(CommitFailedError):
            await asyncio.wait_for(waiting, 1)


async def test_stopping_liveness_ends_a_commit_waiting_for_a_heartbeat_answer() -> None:
    """No heartbeat answer can come once heartbeats stopped (close): the commit looks again, and
    the member still in the group retries (here: the broker takes it)."""
    member = member_in_group(Coordinator(commit_answer(STALE_MEMBER_EPOCH), commit_answer(0)))
    async with asyncio.timeout(5):
        waiting = await _stale_commit(member)
        await member.stop_liveness()
        await asyncio.wait_for(waiting, 1)


async def test_a_fencing_answer_ends_a_waiting_commit() -> None:
    member = member_in_group(Coordinator(commit_answer(STALE_MEMBER_EPOCH)))
    async with asyncio.timeout(5):
        waiting = await _stale_commit(member)
        member._on_answer({"error_code": FENCED_MEMBER_EPOCH, "error_message": None, "member_id": None,
                           "member_epoch": -1, "heartbeat_interval_ms": 0, "assignment": None},
                          joining=False, carried=True)
        with pytest.raises(CommitFailedError):
            await asyncio.wait_for(waiting, 1)


# ---------------------------------------------------------------- KIP-1251: retried only for partitions still held


async def test_a_commit_refused_its_epoch_is_sent_again_while_the_member_holds_the_partition() -> None:
    conn = Coordinator(commit_answer(STALE_MEMBER_EPOCH), commit_answer(0))
    member = member_in_group(conn)
    async with asyncio.timeout(5):
        waiting = await _stale_commit(member)
        member._on_answer({"error_code": 0, "error_message": None, "member_id": None, "member_epoch": 5,
                           "heartbeat_interval_ms": 5000, "assignment": None}, joining=False, carried=True)
        await asyncio.wait_for(waiting, 1)
    assert [r["generation_id_or_member_epoch"] for r in conn.requests] == [4, 5]


async def test_a_commit_refused_its_epoch_is_not_sent_again_once_the_partition_moved() -> None:
    """Since KIP-1251 the broker refuses an old epoch only for a partition the member has lost:
    sent again in the new epoch, which the broker takes, it would overwrite the new owner's offsets."""
    conn = Coordinator(commit_answer(STALE_MEMBER_EPOCH), commit_answer(0))
    member = member_in_group(conn)
    m = member.machine
    async with asyncio.timeout(5):
        waiting = await _stale_commit(member)
        # The next answer takes the partition away; the member revokes it (as a poll would).
        m.on_heartbeat_response({"error_code": 0, "error_message": None, "member_id": None, "member_epoch": 4,
                                 "heartbeat_interval_ms": 5000, "assignment": {"topic_partitions": []}})
        plan = m.plan(lambda topic_id: "t")
        assert plan is not None
        assert m.reconciled(plan)
        m.heartbeat_request()  # acknowledges the revocation; the answer brings epoch 5
        member._on_answer({"error_code": 0, "error_message": None, "member_id": None, "member_epoch": 5,
                           "heartbeat_interval_ms": 5000, "assignment": None}, joining=False, carried=True)
        with pytest.raises(CommitFailedError, match="t-0 moved to another member"):
            await asyncio.wait_for(waiting, 1)
    assert len(conn.requests) == 1  # before the fix: sent again in epoch 5
