"""A fetch session the consumer is done with is closed on the broker (KIP-227: its id, epoch -1, no
partitions): a lane ``"auto"`` retired (test_fetch_lanes.py) and, at close(), each lane's with no
fetch in flight. The same on Apache Kafka, counted by the broker itself:
tests/integration/test_fetch_session_end.py."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from aiokafka_lite.errors import KafkaConnectionError
from aiokafka_lite.fetch.fetcher import SESSION_END_LIMIT, Fetcher
from aiokafka_lite.fetch.requests import FetchSettings, FetchTarget
from aiokafka_lite.fetch.sessions import FINAL_EPOCH, FetchSession
from aiokafka_lite.protocol.api import decode_request, encode_request
from aiokafka_lite.protocol.messages import FETCH
from aiokafka_lite.structs import TopicPartition

from .test_fetcher import FakeCluster, FakeConnection, ScriptedFetches, assigned, make_fetcher

TPS = [TopicPartition("t", p) for p in range(4)]
TARGET = FetchTarget(0, -1, -1)


def granted(session_id: int = 42) -> FetchSession[FetchTarget]:
    session = FetchSession[FetchTarget]()
    plan = session.plan({TPS[0]: TARGET}, version=16)
    assert session.answered(plan, 0, session_id)
    return session


# ---------------------------------------------------------------- sans-IO: FetchSession.end()

def test_end_names_the_session_with_the_final_epoch_and_no_partitions() -> None:
    session = granted(42)
    plan = session.end()
    assert plan is not None
    assert (plan.session_id, plan.epoch, plan.send, plan.forget, plan.wanted) == (42, FINAL_EPOCH, {}, [], {})
    # Forgotten here: nothing left to end, and the next fetch asks for a new session.
    assert session.end() is None
    assert (session.session_id, session.epoch, session.partitions) == (0, 0, {})
    again = session.plan({TPS[0]: TARGET}, version=16)
    assert (again.session_id, again.epoch, again.send) == (0, 0, {TPS[0]: TARGET})


def test_end_of_no_session_is_nothing_and_of_a_failed_one_still_names_it() -> None:
    assert FetchSession[FetchTarget]().end() is None
    session = granted(7)
    session.failed()  # a cancelled fetch: the broker may hold the session still
    plan = session.end()
    assert plan is not None
    assert (plan.session_id, plan.epoch) == (7, FINAL_EPOCH)


@pytest.mark.parametrize("version", [7, 12, 16])
def test_the_closing_request_is_a_valid_fetch(version: int) -> None:
    plan = granted(9).end()
    assert plan is not None
    body = FetchSettings(500, 1, 1 << 20, 1 << 20, 0, "").body(plan, {})
    _v, _cid, decoded = decode_request(FETCH, encode_request(FETCH, version, 1, "c", body)[4:])
    assert (decoded["session_id"], decoded["session_epoch"]) == (9, -1)
    assert decoded["topics"] == []
    assert decoded["forgotten_topics_data"] == []


# ---------------------------------------------------------------- the fetcher's close()


class Granting:
    """Grants a session to each full fetch; holds long polls until ``release``; answers a
    session's end at once, recording (lane, session id), or as ``on_end`` says."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.script = ScriptedFetches()
        self.next_id = 100
        self.ended: list[tuple[tuple[int, int], int]] = []
        self.on_end: Any = None

    async def __call__(self, node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        lane = self.cluster.lanes[-1]
        if body["session_epoch"] == -1 and body["session_id"]:
            assert not body["topics"]
            assert body["max_wait_ms"] == 0
            if self.on_end is not None:
                await self.on_end()
            self.ended.append((lane, body["session_id"]))
            return {"error_code": 0, "throttle_time_ms": 0, "session_id": 0, "responses": []}
        session_id = body["session_id"]
        if not session_id:
            session_id = self.next_id
            self.next_id += 1
        return {**await self.script(node_id, body), "session_id": session_id}


class ClosableCluster(FakeCluster):
    """FakeCluster whose connections can be closed (``closed`` lanes), as the pool's are."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.closed_lanes: set[tuple[int, int]] = set()

    async def connection(self, node_id: int, timeout: float | None, lane: int = 0) -> FakeConnection:
        conn = await super().connection(node_id, timeout, lane)
        cluster = self

        class Conn(FakeConnection):
            @property
            def closed(self) -> bool:
                return (self.node_id, self.lane) in cluster.closed_lanes

        return Conn(conn.cluster, conn.node_id, conn.lane)


async def started(lanes: int = 2, *, idle: bool = True) -> tuple[ClosableCluster, Granting, Fetcher]:
    """A fetcher on ``lanes`` connections to broker 1, each with a session granted; then either
    every partition paused and no fetch in flight (``idle``), or each lane's long poll held."""
    cluster = ClosableCluster(dict.fromkeys(TPS, 1))
    broker = Granting(cluster)
    cluster.handlers[FETCH.key] = broker
    sub = assigned(*TPS)
    fetcher = make_fetcher(cluster, sub, fetch_connections_per_broker=lanes)
    fetcher.send_fetches()
    for _ in range(10):
        await asyncio.sleep(0)
    broker.script.release.set()  # nothing to fetch: each first (full) fetch's long poll runs out
    for _ in range(10):
        await asyncio.sleep(0)
    if idle:
        sub.pause(TPS)
    else:
        broker.script.release.clear()
    # Answered at once with nothing: the next round waits one retry backoff (10 ms), then its
    # incremental long polls are held; with every partition paused there is none.
    await asyncio.sleep(0.05)
    assert fetcher.in_flight() == (0 if idle else lanes)
    node = fetcher.sessions()[1]
    assert all(c["session_id"] for c in node.get("connections", {0: node}).values())
    return cluster, broker, fetcher


@pytest.mark.asyncio
async def test_close_ends_each_idle_lanes_session_on_its_own_connection() -> None:
    _cluster, broker, fetcher = await started(lanes=2)
    ids = {lane: c["session_id"] for lane, c in fetcher.sessions()[1]["connections"].items()}
    await fetcher.close()
    assert sorted(broker.ended) == sorted(((1, lane), session_id) for lane, session_id in ids.items())
    assert all(c["session_id"] == 0 for c in fetcher.sessions()[1]["connections"].values())
    await fetcher.close()  # idempotent: nothing more sent
    assert len(broker.ended) == 2


@pytest.mark.asyncio
async def test_close_does_not_wait_behind_a_long_poll_in_flight() -> None:
    _cluster, broker, fetcher = await started(lanes=2, idle=False)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await fetcher.close()
    assert loop.time() - began < 0.05
    assert broker.ended == []  # left to the broker, as before: close(timeout) does not wait for the poll


@pytest.mark.asyncio
async def test_close_sends_nothing_on_a_closed_connection_and_opens_none() -> None:
    cluster, broker, fetcher = await started(lanes=2)
    cluster.closed_lanes.add((1, 1))
    asked = len(cluster.lanes)
    await fetcher.close()
    assert [lane for lane, _id in broker.ended] == [(1, 0)]
    assert cluster.lanes[asked:] == [(1, 0)]


@pytest.mark.asyncio
async def test_close_gives_up_briefly_and_quietly_on_a_broker_that_does_not_answer(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aiokafka_lite")
    _cluster, broker, fetcher = await started(lanes=1)
    broker.on_end = asyncio.Event().wait  # never answers
    loop = asyncio.get_running_loop()
    began = loop.time()
    await fetcher.close()
    assert loop.time() - began < SESSION_END_LIMIT + 0.2  # not request_timeout_ms (5 s here)
    assert broker.ended == []
    assert not [r for r in caplog.records if r.levelno > logging.DEBUG]


@pytest.mark.asyncio
async def test_a_failed_end_is_said_at_debug_only(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aiokafka_lite")
    _cluster, broker, fetcher = await started(lanes=1)

    async def refuse() -> None:
        raise KafkaConnectionError("gone")

    broker.on_end = refuse
    await fetcher.close()
    assert broker.ended == []
    said = [r for r in caplog.records if "fetch session" in r.getMessage()]
    assert said
    assert all(r.levelno == logging.DEBUG for r in said)
    assert not [r for r in caplog.records if r.levelno > logging.DEBUG]
