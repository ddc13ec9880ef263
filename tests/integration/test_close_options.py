"""close(group_membership=...) (KIP-1092, Java's CloseOptions.GroupMembershipOperation) on Apache
Kafka 4.x, under both group protocols: "remain" leaves a dynamic member's partitions with it until
its session lapses; "leave" moves a static member's partitions at once. ("default", today's rule,
is covered where static and dynamic members close: test_consumer_features, test_kip848_consumer.)"""

from __future__ import annotations

import pytest

from aiokafka_lite import Consumer, GroupMembershipOperation
from aiokafka_lite.testing.helpers import create_topic

from ._consumers import Poller
from ._protocols import GroupProtocol

pytestmark = pytest.mark.asyncio


def _settings(broker, group: str, protocol: GroupProtocol, **extra):
    base = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                enable_auto_commit=False, session_timeout_ms=4000, heartbeat_interval_ms=500)
    return protocol.settings(base, **extra)


async def _halves(a: Consumer, b: Consumer) -> None:
    """Both members polled until each holds two of the four partitions."""
    async with Poller(a) as a_poller, Poller(b):
        await a_poller.wait_for(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, timeout=30)


async def _seconds_until_b_holds_all(b: Consumer, timeout: float) -> float:
    async with Poller(b) as b_poller:
        return await b_poller.wait_for(lambda: len(b.assignment()) == 4, timeout=timeout)


async def test_remain_keeps_a_dynamic_members_partitions_until_its_session_lapses(
        apache_kafka_broker, unique_topic, unique_group, group_protocol):
    create_topic(apache_kafka_broker, unique_topic, partitions=4)
    conf = _settings(apache_kafka_broker, unique_group, group_protocol)
    session = group_protocol.session_timeout(conf)
    async with Consumer(unique_topic, **conf) as b:
        a = Consumer(unique_topic, **conf)
        await a.start()
        await _halves(a, b)
        await a.close(group_membership="remain")  # no LeaveGroup, no leave heartbeat
        took = await _seconds_until_b_holds_all(b, timeout=session + 20)
    assert took >= 0.8 * session, f"a's partitions moved after {took:.1f} s, before its {session} s session lapsed"


async def test_leave_moves_a_static_members_partitions_at_once(apache_kafka_broker, unique_topic, unique_group,
                                                               group_protocol):
    create_topic(apache_kafka_broker, unique_topic, partitions=4)
    conf = _settings(apache_kafka_broker, unique_group, group_protocol, session_timeout_ms=8000)
    session = group_protocol.session_timeout(conf)
    async with Consumer(unique_topic, **conf) as b:
        a = Consumer(unique_topic, group_instance_id="static-a", **conf)
        await a.start()
        await _halves(a, b)
        await a.close(group_membership=GroupMembershipOperation.LEAVE)  # by default a static member remains
        took = await _seconds_until_b_holds_all(b, timeout=session + 20)
    assert took < session / 2, f"a's partitions moved only after {took:.1f} s (session {session} s)"


async def test_an_unknown_group_membership_is_refused_before_anything_closes(apache_kafka_broker):
    from aiokafka_lite.errors import InvalidArgumentError
    consumer = Consumer(bootstrap_servers=apache_kafka_broker.bootstrap_servers)
    with pytest.raises(InvalidArgumentError, match="group_membership must be one of 'leave', 'remain', 'default'"):
        await consumer.close(group_membership="LEAVE_GROUP")
    assert not consumer.metrics()["closed"]
    await consumer.close()
    assert consumer.metrics()["closed"]
