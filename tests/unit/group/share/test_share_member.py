"""The share member's asyncio shell with a scripted coordinator: tasks owned and stopped, errors
surfacing on the next call, every await bounded, the lapse watchdog. (The broker's side is proven in
tests/integration/test_share_member.py.)"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from aiokafka_lite.errors import BrokerError, GroupProtocolError, IllegalStateError, KafkaError, UnsupportedVersionError
from aiokafka_lite.group.share.member import ShareMember, ShareMemberSettings
from aiokafka_lite.group.share.state import State
from aiokafka_lite.structs import TopicPartition

pytestmark = pytest.mark.asyncio

T1 = uuid.UUID(int=1)
Reply = Callable[[dict[str, Any]], Any]


def answer(epoch: int, assignment: dict[uuid.UUID, list[int]] | None = None, code: int = 0) -> dict[str, Any]:
    return {"error_code": code, "error_message": None, "member_id": None, "member_epoch": epoch,
            "heartbeat_interval_ms": 50,
            "assignment": None if assignment is None else {
                "topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in assignment.items()]}}


class Conn:
    def __init__(self, reply: Reply, versions: bool = True) -> None:
        self.reply, self.versions = reply, versions
        self.sent: list[dict[str, Any]] = []
        self.closed = False

    def version_for(self, api: Any) -> int:
        if not self.versions:
            raise UnsupportedVersionError("the broker does not support ShareGroupHeartbeat")
        return 1

    async def send(self, api: Any, version: int, body: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        self.sent.append(body)
        result = self.reply(body)
        if asyncio.iscoroutine(result):
            result = await result
        assert isinstance(result, dict)
        return result


class Names:
    def __init__(self) -> None:
        self.known: dict[uuid.UUID, str] = {}

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.known.get(topic_id)


class FakeCluster:
    """What the member uses of Cluster: the coordinator's connection and the metadata's names."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.metadata = Names()
        self.refreshes = 0
        self.missing: set[str] = set()  # subscribed topics the cluster does not have
        self.topic_error: KafkaError | None = None

    async def coordinator_connection(self, group_id: str, timeout: float | None = None) -> Conn:
        return self.conn

    def coordinator(self, group_id: str) -> int | None:
        return 1

    def mark_coordinator_dead(self, group_id: str | None = None, reason: str = "") -> None:
        pass

    async def refresh_metadata(self, topics: Iterable[str] | None = None, timeout: float | None = None) -> None:
        self.refreshes += 1
        self.metadata.known[T1] = "jobs"

    def raise_topic_errors(self, topics: Iterable[str], *, subscribed: bool = False) -> set[str]:
        """The subscribed topics the metadata calls unknown; ``topic_error``, if set, is raised."""
        if self.topic_error is not None:
            raise self.topic_error
        return set(topics) & self.missing


def epochs_in_order(replies: list[dict[str, Any]]) -> Reply:
    """Scripted answers to heartbeats; a leave (epoch -1) is answered with epoch -1."""
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if body["member_epoch"] == -1:
            return answer(-1)
        return replies.pop(0) if len(replies) > 1 else replies[0]
    return reply


async def hang(body: dict[str, Any]) -> dict[str, Any]:
    await asyncio.Event().wait()  # a silent broker
    raise AssertionError("unreachable")


def member_with(reply: Reply, versions: bool = True, **settings: Any) -> tuple[ShareMember, Conn, FakeCluster]:
    conn = Conn(reply, versions)
    cluster = FakeCluster(conn)
    member = ShareMember(cluster, "workers", ShareMemberSettings(**settings))  # type: ignore[arg-type]
    return member, conn, cluster


async def until(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.005)


async def test_an_invalid_subscribed_topic_is_raised_once_from_the_next_poll() -> None:
    member, _, cluster = member_with(epochs_in_order([answer(1)]))
    cluster.topic_error = BrokerError(17, "topic 'bad name'")  # INVALID_TOPIC_EXCEPTION
    member.subscribe(["bad name"])
    try:
        await until(lambda: cluster.refreshes >= 1, "the subscribed topics looked up")
        with pytest.raises(BrokerError, match="bad name"):
            member.before_poll()
        member.before_poll()  # raised once, as the Consumer raises it from one poll
    finally:
        await member.close(timeout=1.0)


async def test_a_missing_subscribed_topic_is_looked_up_again_until_it_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("aiokafka_lite.group.share.member._MISSING_TOPIC_RECHECK", 0.05)
    member, _, cluster = member_with(epochs_in_order([answer(1)]))
    cluster.missing = {"later"}
    member.subscribe(["later"])
    try:
        await until(lambda: cluster.refreshes >= 3, "looked up again while missing")
        cluster.missing = set()
        await asyncio.sleep(0.1)
        settled = cluster.refreshes
        await asyncio.sleep(0.3)
        assert cluster.refreshes == settled, "no more look-ups once the topic exists"
    finally:
        await member.close(timeout=1.0)


async def test_joins_names_the_topic_ids_through_metadata_and_says_the_assignment_changed() -> None:
    changes: list[set[TopicPartition]] = []
    member, conn, cluster = member_with(epochs_in_order([answer(1, {T1: [0, 1]}), answer(1)]))
    member.on_change = lambda: changes.append(member.assignment())
    member.subscribe(["jobs"])
    try:
        await until(lambda: member.assignment() == {TopicPartition("jobs", 0), TopicPartition("jobs", 1)},
                    "the assignment named")
        assert cluster.refreshes >= 1
        assert member.assignment_by_id() == {T1: frozenset({0, 1})}
        assert changes[-1] == member.assignment()
        first = conn.sent[0]
        assert (first["member_epoch"], first["subscribed_topic_names"]) == (0, ["jobs"])
        await until(lambda: len(conn.sent) >= 3, "heartbeats at the broker's 50 ms interval")
        assert conn.sent[-1]["subscribed_topic_names"] is None  # unchanged: null
        member.subscribe(["jobs", "mail"])
        await until(lambda: conn.sent[-1]["subscribed_topic_names"] == ["jobs", "mail"], "the change sent at once")
        metrics = member.metrics()
        assert metrics["group_state"] == "STABLE"
        assert metrics["member_epoch"] == 1
        assert metrics["heartbeats_sent"] == len(conn.sent)
        assert metrics["heartbeat_failures"] == 0
    finally:
        await member.close(timeout=1.0)
    assert conn.sent[-1]["member_epoch"] == -1
    assert member.state is State.UNSUBSCRIBED


async def test_a_fatal_answer_is_raised_from_the_next_before_poll_every_time() -> None:
    member, _, _ = member_with(epochs_in_order([answer(0, code=30)]))
    member.subscribe(["jobs"])
    try:
        await until(lambda: member.fatal_error is not None, "the fatal answer")
        for _ in range(2):
            with pytest.raises(BrokerError, match=r"GROUP_AUTHORIZATION_FAILED.*READ on group 'workers'"):
                member.before_poll()
    finally:
        await member.close(timeout=1.0)


async def test_a_broker_without_share_groups_gives_the_typed_error() -> None:
    member, conn, _ = member_with(epochs_in_order([answer(1)]), versions=False)
    member.subscribe(["jobs"])
    try:
        await until(lambda: member.fatal_error is not None, "the fatal error")
        with pytest.raises(GroupProtocolError, match=r"Apache Kafka 4\.1\+ with share groups enabled"):
            member.before_poll()
        assert conn.sent == []
    finally:
        await member.close(timeout=1.0)


async def test_an_error_that_ends_a_task_surfaces_on_the_next_call() -> None:
    def broken(body: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("a bug")
    member, _, _ = member_with(broken)
    member.subscribe(["jobs"])
    try:
        await until(lambda: member.fatal_error is not None, "the task's error stored")
        with pytest.raises(RuntimeError, match="a bug"):
            member.before_poll()
    finally:
        await member.close(timeout=1.0)


async def test_leave_and_close_are_bounded_against_a_silent_coordinator() -> None:
    replies = [answer(1, {T1: [0]})]

    async def reply(body: dict[str, Any]) -> dict[str, Any]:
        if body["member_epoch"] != 0:
            return await hang(body)
        return replies[0]
    member, conn, _ = member_with(reply)
    member.subscribe(["jobs"])
    await until(lambda: member.in_group, "joined")
    await until(lambda: len(conn.sent) >= 2, "a heartbeat hanging in flight")
    began = time.monotonic()
    await member.close(timeout=0.2)
    took = time.monotonic() - began
    assert took < 0.5, f"close(timeout=0.2) took {took:.2f} s"
    assert member.state is State.UNSUBSCRIBED
    with pytest.raises(IllegalStateError, match="closed"):
        member.before_poll()


async def test_close_cancelled_is_not_swallowed_and_still_stops_the_tasks() -> None:
    member, _, _ = member_with(epochs_in_order([answer(1)]))
    member.subscribe(["jobs"])
    await until(lambda: member.in_group, "joined")
    member.cluster.conn.reply = hang  # type: ignore[attr-defined]
    closing = asyncio.create_task(member.close(timeout=30.0))
    await asyncio.sleep(0.05)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    tasks = [t for t in asyncio.all_tasks() if t.get_name().startswith("aiokafka-lite share")]
    assert tasks == []


async def test_a_poll_lapse_leaves_once_warns_once_and_the_next_poll_rejoins(caplog: pytest.LogCaptureFixture) -> None:
    member, conn, _ = member_with(epochs_in_order([answer(3, {T1: [0]})]), max_poll_interval_ms=200)
    member.subscribe(["jobs"])
    try:
        member.before_poll()
        await until(lambda: member.in_group, "joined")
        first = member.member_id
        await until(lambda: member.state is State.STALE, "left after the poll deadline")
        leaves = [b for b in conn.sent if b["member_epoch"] == -1]
        assert len(leaves) == 1
        sent = len(conn.sent)
        await asyncio.sleep(0.3)
        assert len(conn.sent) == sent, "no heartbeat while out of the group"
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1
        assert "max_poll_interval_ms=200" in warnings[0]
        assert "its acquired records go to live members" in warnings[0]
        metrics = member.metrics()
        assert 0.0 <= metrics["last_leave_delay_seconds"] < 0.1
        assert metrics["poll_interval_lapses"] == 1
        member.before_poll()
        await until(lambda: member.in_group, "rejoined")
        rejoin = conn.sent[sent]
        assert (rejoin["member_id"], rejoin["member_epoch"], rejoin["subscribed_topic_names"]) == (first, 0, ["jobs"])
    finally:
        await member.close(timeout=1.0)
