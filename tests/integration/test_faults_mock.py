"""Fault injection on librdkafka's mock cluster (3 brokers): group and fetch errors, brokers down
and back, a coordinator move, every broker down past the session timeout, RTT spikes.

Every case runs a group through the fault while it processes records with a commit after each
batch, and checks (``_faults.consume_through_fault``): no offset skipped, the group commits up to
the end of every partition, and no call overran its bound. Typed errors a call raised along the
way are allowed (and listed in the failure message); a hang or a lost record is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.errors import BrokerError, KafkaError
from aiokafka_lite.testing.helpers import produce
from aiokafka_lite.testing.mock_cluster import ApiKey, MockCluster

from ._faults import FaultRun, consume_through_fault

pytestmark = pytest.mark.asyncio

PARTITIONS = 4
RECORDS = 400

# Broker error codes.
OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER = 1, 2, 3, 6
REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 7, 14, 15, 16
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 22, 25, 27
FENCED_LEADER_EPOCH, FENCED_INSTANCE_ID = 74, 82
FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH = 70, 71

GROUP_ERRORS = {
    "NOT_COORDINATOR": NOT_COORDINATOR, "COORDINATOR_NOT_AVAILABLE": COORDINATOR_NOT_AVAILABLE,
    "COORDINATOR_LOAD_IN_PROGRESS": COORDINATOR_LOAD_IN_PROGRESS, "REBALANCE_IN_PROGRESS": REBALANCE_IN_PROGRESS,
    "UNKNOWN_MEMBER_ID": UNKNOWN_MEMBER_ID, "ILLEGAL_GENERATION": ILLEGAL_GENERATION,
    "REQUEST_TIMED_OUT": REQUEST_TIMED_OUT,
}
GROUP_APIS = {"JoinGroup": ApiKey.JOIN_GROUP, "SyncGroup": ApiKey.SYNC_GROUP, "Heartbeat": ApiKey.HEARTBEAT,
              "OffsetCommit": ApiKey.OFFSET_COMMIT, "OffsetFetch": ApiKey.OFFSET_FETCH}
# Errors an API never returns in practice (JoinGroup/SyncGroup answer no ILLEGAL_GENERATION... ) are
# still injected: a client must survive a broker that does.
GROUP_CASES = [pytest.param(api, code, id=f"{api_name}-{code_name}")
               for api_name, api in GROUP_APIS.items() for code_name, code in GROUP_ERRORS.items()]
FETCH_CASES = [pytest.param(code, id=name) for name, code in {
    "NOT_LEADER_OR_FOLLOWER": NOT_LEADER_OR_FOLLOWER, "FENCED_LEADER_EPOCH": FENCED_LEADER_EPOCH,
    "OFFSET_OUT_OF_RANGE": OFFSET_OUT_OF_RANGE, "UNKNOWN_TOPIC_OR_PARTITION": UNKNOWN_TOPIC_OR_PARTITION,
    "CORRUPT_MESSAGE": CORRUPT_MESSAGE,
    # Session errors (KIP-227) even though the mock grants no session: a full fetch follows.
    "FETCH_SESSION_ID_NOT_FOUND": FETCH_SESSION_ID_NOT_FOUND,
    "INVALID_FETCH_SESSION_EPOCH": INVALID_FETCH_SESSION_EPOCH}.items()]


def settings(cluster: MockCluster, group: str, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(
        bootstrap_servers=cluster.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=300,
        request_timeout_ms=3000, retry_backoff_ms=50, reconnect_backoff_max_ms=300,
        default_api_timeout_ms=10000, max_poll_records=25)
    base.update(extra)
    return base


def prepare(cluster: MockCluster, topic: str) -> dict[int, int]:
    cluster.create_topic(topic, partitions=PARTITIONS)
    produce(cluster, topic, [{"value": f"v{i}", "partition": i % PARTITIONS} for i in range(RECORDS)])
    return dict.fromkeys(range(PARTITIONS), RECORDS // PARTITIONS)


def group_of(cluster: MockCluster, topic: str, group: str, members: int, **extra: Any) -> list[Consumer]:
    return [Consumer(topic, **settings(cluster, group, **extra)) for _ in range(members)]


def once(action: Callable[[], None]) -> Any:
    async def fault() -> None:
        action()
    return fault


async def poll_for(consumer: Consumer, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    began = loop.time()
    while loop.time() - began < seconds:
        await consumer.poll(timeout=0.3)


def check(run: FaultRun) -> None:
    assert run.lost == 0, run.summary()
    assert run.fault_done, run.summary()
    print(f"\n{run.summary()}")


@pytest.mark.parametrize(("api", "code"), GROUP_CASES)
async def test_group_error_mid_run(mock_cluster: MockCluster, unique_topic: str, unique_group: str,
                                   api: int, code: int) -> None:
    """Two members; the error hits the next two requests of that API (a second injection at
    start-up covers JoinGroup/SyncGroup/OffsetFetch, which otherwise run only on rebalances)."""
    ends = prepare(mock_cluster, unique_topic)
    mock_cluster.push_request_errors(api, [code, code])
    # The mock holds a rebalance that a JoinGroup or SyncGroup error interrupted for about a session
    # before it completes it: a 3 s session (10 heartbeats) makes each such wait 2 s instead of 5 s.
    session = {"session_timeout_ms": 3000}
    consumers = group_of(mock_cluster, unique_topic, unique_group, 2, **session)

    async def fault() -> None:
        mock_cluster.push_request_errors(api, [code, code])
        if api in (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.OFFSET_FETCH):
            # A third member joins and leaves: two rebalances meet the injected errors. It
            # commits nothing, so whatever it was handed is fetched again by the others.
            async with Consumer(unique_topic, **settings(mock_cluster, unique_group, **session)) as visitor:
                # Its poll may meet the injected error too (OffsetFetch answering a member error, as
                # Java raises it as well): a typed error is an allowed outcome, a hang is not.
                with contextlib.suppress(KafkaError):
                    await visitor.poll(timeout=3.0)

    check(await consume_through_fault(consumers, unique_topic, ends, fault, inject_after=RECORDS // 4))


@pytest.mark.parametrize("code", FETCH_CASES)
async def test_fetch_error_mid_run(mock_cluster: MockCluster, unique_topic: str, unique_group: str,
                                   code: int, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    ends = prepare(mock_cluster, unique_topic)
    consumers = group_of(mock_cluster, unique_topic, unique_group, 1)
    run = await consume_through_fault(consumers, unique_topic, ends,
                                      once(lambda: mock_cluster.push_request_errors(ApiKey.FETCH, [code] * 3)),
                                      inject_after=RECORDS // 4)
    check(run)
    # The injected error was really met: retried (logged) or raised to the caller, typed.
    name = BrokerError(code).name
    assert name in caplog.text or any(name in str(e) for e in run.errors), run.summary()


async def test_fenced_instance_id_is_a_typed_error(mock_cluster: MockCluster, unique_topic: str,
                                                   unique_group: str) -> None:
    prepare(mock_cluster, unique_topic)
    async with Consumer(unique_topic, **settings(mock_cluster, unique_group,
                                                 group_instance_id="static-1")) as consumer:
        got = 0
        while not got:
            got = len(await consumer.poll(timeout=0.5))
        mock_cluster.push_request_errors(ApiKey.HEARTBEAT, [FENCED_INSTANCE_ID] * 5)
        with pytest.raises(KafkaError) as caught:
            await poll_for(consumer, seconds=10.0)
        assert "FENCED_INSTANCE_ID" in str(caught.value) or isinstance(caught.value, BrokerError)


async def test_broker_down_and_back(mock_cluster: MockCluster, unique_topic: str, unique_group: str) -> None:
    ends = prepare(mock_cluster, unique_topic)

    async def fault() -> None:
        for broker_id in (1, 2, 3):
            mock_cluster.broker_set_down(broker_id)
            await asyncio.sleep(1.5)
            mock_cluster.broker_set_up(broker_id)

    run = await consume_through_fault(group_of(mock_cluster, unique_topic, unique_group, 2), unique_topic,
                                      ends, fault, inject_after=RECORDS // 4)
    check(run)


async def test_coordinator_moves(mock_cluster: MockCluster, unique_topic: str, unique_group: str) -> None:
    ends = prepare(mock_cluster, unique_topic)
    mock_cluster.coordinator_set("group", unique_group, 1)

    async def fault() -> None:
        for broker_id in (2, 3, 1):
            mock_cluster.coordinator_set("group", unique_group, broker_id)
            await asyncio.sleep(1.0)

    check(await consume_through_fault(group_of(mock_cluster, unique_topic, unique_group, 2), unique_topic,
                                      ends, fault, inject_after=RECORDS // 4))


async def test_all_brokers_down_longer_than_the_session(mock_cluster: MockCluster, unique_topic: str,
                                                        unique_group: str) -> None:
    ends = prepare(mock_cluster, unique_topic)

    async def fault() -> None:
        mock_cluster.broker_set_down(-1)
        await asyncio.sleep(6.0 * 1.5)  # session_timeout_ms=6000
        mock_cluster.broker_set_up(-1)

    check(await consume_through_fault(group_of(mock_cluster, unique_topic, unique_group, 2), unique_topic,
                                      ends, fault, inject_after=RECORDS // 4, timeout=90))


async def test_rtt_spike_above_request_timeout(mock_cluster: MockCluster, unique_topic: str,
                                               unique_group: str) -> None:
    ends = prepare(mock_cluster, unique_topic)

    async def fault() -> None:
        mock_cluster.broker_set_rtt(-1, 4500)  # request_timeout_ms=3000
        await asyncio.sleep(5.0)
        mock_cluster.broker_set_rtt(-1, 0)

    check(await consume_through_fault(group_of(mock_cluster, unique_topic, unique_group, 2), unique_topic,
                                      ends, fault, inject_after=RECORDS // 4, timeout=90))
