"""KIP-932 share groups at the wire level, against Apache Kafka 4.3.1: the four share APIs' schemas
(protocol/messages/share_*.py) sent as raw requests over one Connection, and the broker's answers
decoded by them. Joining, the assignment, acquiring records, acknowledging them, describing the
group and leaving, in the order a share consumer will do them. What each step saw is printed (-s).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from aiokafka_lite._net.connection import Connection
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite.protocol import (
    FIND_COORDINATOR,
    SHARE_ACKNOWLEDGE,
    SHARE_FETCH,
    SHARE_GROUP_DESCRIBE,
    SHARE_GROUP_HEARTBEAT,
    Api,
)
from aiokafka_lite.protocol.records.decode import decode_records
from aiokafka_lite.testing.helpers import create_topic, produce, set_group_config

SHARE_APIS = (SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE)
ACCEPT = 1
DEADLINE = 30.0  # seconds for anything the broker does in the background (coordinator, assignment)
# This test's group sets its own acquisition lock (the broker's is Kafka's 30 s): the answers must
# carry it, and it is long enough that a loaded machine cannot expire a lock before the acknowledgement.
LOCK_MS = 15000


@pytest_asyncio.fixture
async def connection(apache_kafka_broker) -> AsyncIterator[Connection]:
    host, _, port = apache_kafka_broker.bootstrap_servers.split(",")[0].rpartition(":")
    conn = await Connection.open(host, int(port), ConnectionOptions(), timeout=10.0)
    try:
        yield conn
    finally:
        await conn.close()


async def _until(what: str, attempt: Callable[[], Awaitable[dict[str, Any] | None]]) -> dict[str, Any]:
    """Repeat ``attempt`` (every 0.2 s) until it returns a response, within DEADLINE."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while True:
        result = await attempt()
        if result is not None:
            return result
        if loop.time() > deadline:
            raise AssertionError(f"no {what} within {DEADLINE} s")
        await asyncio.sleep(0.2)


async def _send(conn: Connection, api: Api, body: dict[str, Any], version: int | None = None) -> dict[str, Any]:
    return await conn.send(api, conn.version_for(api) if version is None else version, body, timeout=10.0)


@pytest.mark.asyncio
async def test_api_versions_lists_the_share_apis_at_our_ranges(connection):
    for api in SHARE_APIS:
        assert connection.broker_versions.get(api.key) == (api.min_version, api.max_version), api.name
    print({api.name: connection.broker_versions[api.key] for api in SHARE_APIS})


class ShareMember:
    """One share-group member driven by hand: heartbeats, a share session, acknowledgements."""

    def __init__(self, conn: Connection, group: str, version: int) -> None:
        self.conn, self.group, self.version = conn, group, version  # version: of ShareFetch/ShareAcknowledge
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.session_epoch = 0

    async def find_coordinator(self) -> None:
        async def attempt() -> dict[str, Any] | None:
            answer = await _send(self.conn, FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [self.group]})
            coordinator = answer["coordinators"][0]
            return coordinator if coordinator["error_code"] == 0 else None
        await _until("group coordinator", attempt)

    async def heartbeat(self, topics: list[str] | None = None) -> dict[str, Any]:
        body = {"group_id": self.group, "member_id": self.member_id, "member_epoch": self.epoch,
                "subscribed_topic_names": topics}
        answer = await _send(self.conn, SHARE_GROUP_HEARTBEAT, body)
        assert answer["error_code"] == 0, answer
        self.epoch = answer["member_epoch"]
        return answer

    async def share_fetch(self, partitions: dict[uuid.UUID, list[int]], max_wait_ms: int,
                          acks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        topics = [{"topic_id": topic_id, "partitions": [
            {"partition_index": p, "acknowledgement_batches": acks or []} for p in indexes]}
            for topic_id, indexes in partitions.items()]
        body = {"group_id": self.group, "member_id": self.member_id, "share_session_epoch": self.session_epoch,
                "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_records": 500, "batch_size": 500,
                "topics": topics}
        answer = await _send(self.conn, SHARE_FETCH, body, self.version)
        assert answer["error_code"] == 0, answer
        self.session_epoch += 1
        return answer

    async def acknowledge(self, topic_id: uuid.UUID, partition: int, batches: list[dict[str, Any]]) -> dict[str, Any]:
        body = {"group_id": self.group, "member_id": self.member_id, "share_session_epoch": self.session_epoch,
                "topics": [{"topic_id": topic_id, "partitions": [
                    {"partition_index": partition, "acknowledgement_batches": batches}]}]}
        answer = await _send(self.conn, SHARE_ACKNOWLEDGE, body, self.version)
        self.session_epoch += 1
        return answer


async def _join(member: ShareMember, topic: str) -> tuple[int, uuid.UUID]:
    """Join with epoch 0; heartbeat until the assignment names the topic. (epoch at join, topic id)."""
    await member.find_coordinator()
    joined = await member.heartbeat([topic])
    assert joined["member_epoch"] > 0
    assert joined["member_id"] == member.member_id
    assert joined["heartbeat_interval_ms"] == 500  # the fixture's group.share.heartbeat.interval.ms

    async def assigned() -> dict[str, Any] | None:
        assignment = (await member.heartbeat())["assignment"]
        return assignment if assignment and assignment["topic_partitions"] else None
    assignment = joined["assignment"]
    if not (assignment and assignment["topic_partitions"]):
        assignment = await _until("assignment", assigned)
    [entry] = assignment["topic_partitions"]
    assert entry["partitions"] == [0]
    return joined["member_epoch"], entry["topic_id"]


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [1, 2], ids=["fetch-ack-v1", "fetch-ack-v2"])
async def test_join_fetch_acknowledge_describe_leave(apache_kafka_broker, connection, version):
    topic, group = f"share-wire-{uuid.uuid4().hex[:8]}", f"share-wire-{uuid.uuid4().hex[:8]}"
    create_topic(apache_kafka_broker, topic)
    values = [f"value-{i}".encode() for i in range(5)]
    produce(apache_kafka_broker, topic, [(None, v) for v in values], enable_idempotence=True)
    # A share group starts at the end of the log unless told otherwise (share.auto.offset.reset).
    set_group_config(apache_kafka_broker, group, {"share.auto.offset.reset": "earliest",
                                                  "share.record.lock.duration.ms": str(LOCK_MS)})
    member = ShareMember(connection, group, version)
    join_epoch, topic_id = await _join(member, topic)
    print(f"\njoined at member epoch {join_epoch}, assigned {topic} ({topic_id}) at epoch {member.epoch}")

    # A new share session (epoch 0); the share partition is set up on first use, so fetch until
    # the records come, within the session.
    async def acquired() -> dict[str, Any] | None:
        answer = await member.share_fetch({topic_id: [0]}, max_wait_ms=1000)
        [part] = answer["responses"][0]["partitions"]
        assert part["error_code"] == 0, part
        return {**part, "lock": answer["acquisition_lock_timeout_ms"]} if part["acquired_records"] else None
    part = await _until("acquired records", acquired)
    print(f"share session epoch {member.session_epoch - 1} acquired {part['acquired_records']}, "
          f"lock {part['lock']} ms")
    assert part["lock"] == LOCK_MS
    assert part["acquired_records"] == [{"first_offset": 0, "last_offset": 4, "delivery_count": 1}]
    assert isinstance(part["records"], memoryview)
    records = decode_records(part["records"], topic, 0)
    assert [(r.offset, r.value) for r in records] == list(enumerate(values))

    # Accept all five (one acknowledge type for the whole range).
    answer = await member.acknowledge(topic_id, 0, [{"first_offset": 0, "last_offset": 4,
                                                     "acknowledge_types": [ACCEPT]}])
    assert answer["error_code"] == 0, answer
    assert [(t["topic_id"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]])
            for t in answer["responses"]] == [(topic_id, [(0, 0)])]
    if version >= 2:
        assert answer["acquisition_lock_timeout_ms"] == LOCK_MS
    # Accepted records are not delivered again.
    again = await member.share_fetch({topic_id: [0]}, max_wait_ms=200)
    assert all(not p["acquired_records"] for t in again["responses"] for p in t["partitions"])

    described = await _send(connection, SHARE_GROUP_DESCRIBE, {"group_ids": [group]})
    [g] = described["groups"]
    assert (g["error_code"], g["group_id"], g["group_state"]) == (0, group, "Stable")
    [m] = g["members"]
    assert (m["member_id"], m["member_epoch"], m["subscribed_topic_names"]) == (member.member_id, member.epoch, [topic])
    assert m["assignment"]["topic_partitions"] == [{"topic_id": topic_id, "topic_name": topic, "partitions": [0]}]
    print(f"described: state {g['group_state']}, group epoch {g['group_epoch']}, assignor {g['assignor_name']}, "
          f"member epoch {m['member_epoch']}")

    member.epoch = -1
    left = await member.heartbeat()
    assert left["member_epoch"] == -1

    async def emptied() -> dict[str, Any] | None:
        [after] = (await _send(connection, SHARE_GROUP_DESCRIBE, {"group_ids": [group]}))["groups"]
        return after if not after["members"] else None
    after = await _until("the member gone from the group", emptied)
    assert after["group_state"] == "Empty"
