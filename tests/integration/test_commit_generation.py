"""A commit is bound to the membership it was first sent in (Java binds it to its generation): a
commit whose request failed on the connection while the member lost its partitions (a poll lapse)
and rejoined is not sent again in the new generation or member epoch (a zombie commit). On Apache
Kafka 4.x, under both group protocols.

The commit's first request is held by a seam on the member until the member has rejoined, then
fails as a broken connection would; Consumer._retry_on_connection retries it after the backoff."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.errors import CommitFailedError, KafkaConnectionError
from aiokafka_lite.testing.helpers import create_topic

from ._consumers import poll_until, until
from ._protocols import GroupProtocol

pytestmark = pytest.mark.asyncio

LAPSE_MS = 3000


def settings(broker: Any, group: str, protocol: GroupProtocol, **extra: Any) -> dict[str, Any]:
    base = dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                enable_auto_commit=False, session_timeout_ms=30000, heartbeat_interval_ms=500,
                retry_backoff_ms=50, max_poll_interval_ms=LAPSE_MS)
    return protocol.settings(base, **extra)


class FirstRequestDiesLate:
    """The member's first commit call waits for `released`, then fails as a lost connection."""

    def __init__(self, consumer: Consumer) -> None:
        member = consumer._member
        assert member is not None
        self.calls = 0
        self.released = asyncio.Event()
        self.entered = asyncio.Event()
        real = member.commit

        async def commit(offsets: Any, timeout: Any, standalone: bool = False) -> None:
            self.calls += 1
            if self.calls == 1:
                self.entered.set()
                await self.released.wait()
                raise KafkaConnectionError("test: the connection broke with the OffsetCommit in flight")
            await real(offsets, timeout, standalone=standalone)
        member.commit = commit  # type: ignore[method-assign]


async def test_a_commit_retried_after_the_member_rejoined_is_not_sent_in_the_new_generation(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, group_protocol: GroupProtocol) -> None:
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    async with asyncio.timeout(90):
        async with Consumer(unique_topic, **settings(broker, unique_group, group_protocol)) as c:
            await poll_until(c, lambda _: c.assignment() == {tp} and c.metrics()["group_state"] == "STABLE",
                             timeout=30)
            await c.commit({tp: 5})
            before = c.metrics()["generation_id"]
            seam = FirstRequestDiesLate(c)
            committing = asyncio.create_task(c.commit({tp: 7}, timeout=60))
            await seam.entered.wait()
            # No poll for longer than max_poll_interval_ms: the watchdog leaves the group, the
            # partition is lost; the next polls rejoin in a new generation (member epoch).
            await until(lambda: c.metrics()["poll_interval_lapses"] == 1, LAPSE_MS / 1000 + 10, "the lapse")
            await poll_until(c, lambda _: c.metrics()["group_state"] == "STABLE" and c.assignment() == {tp}
                             and c.metrics()["generation_id"] not in (before, -1, 0), timeout=30)
            seam.released.set()
            outcome = (await asyncio.gather(committing, return_exceptions=True))[0]
            committed = (await c.committed([tp], timeout=10))[tp]
    assert committed is not None
    assert committed.offset == 5, "the old commit went out in the new generation"  # before the fix: 7
    assert isinstance(outcome, CommitFailedError), repr(outcome)
    assert "rejoined while the commit was being retried" in str(outcome)


async def test_a_commit_retried_in_the_same_generation_still_lands(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, group_protocol: GroupProtocol) -> None:
    """The binding does not cost the ordinary retry: nothing changed, the retry commits."""
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    async with asyncio.timeout(60):
        async with Consumer(unique_topic, **settings(broker, unique_group, group_protocol,
                                                     max_poll_interval_ms=60000)) as c:
            await poll_until(c, lambda _: c.assignment() == {tp} and c.metrics()["group_state"] == "STABLE",
                             timeout=30)
            seam = FirstRequestDiesLate(c)
            seam.released.set()
            await c.commit({tp: 9}, timeout=10)
            assert seam.calls == 2
            assert (await c.committed([tp], timeout=10))[tp].offset == 9
