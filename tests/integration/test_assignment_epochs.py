"""KIP-1251 (assignment epochs, Kafka 4.3) with our KIP-848 member, on Apache Kafka 4.3.1.

The broker now checks a commit's member epoch against the epoch each partition was assigned at
(assignment epoch <= the request's epoch <= the member's epoch): a commit sent just before the
member's epoch moved on still lands for the partitions it kept, and is refused with
STALE_MEMBER_EPOCH for one it has lost since. Our member retries STALE_MEMBER_EPOCH after the next
heartbeat, in its new epoch; it must do so only while it still holds every partition of the commit,
or the retry would carry the lost partition's old offsets over the new owner's (a zombie commit).

A seam holds member A's OffsetCommits, one per partition, built in A's epoch, until member B has
taken one partition and A's epoch has moved on; then lets them go to the broker. (In one request,
a partition the member lost fails the whole request: the broker refuses every partition of it.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokafka_lite import Consumer, OffsetAndMetadata, TopicPartition
from aiokafka_lite.errors import CommitFailedError
from aiokafka_lite.protocol.messages import OFFSET_COMMIT
from aiokafka_lite.testing.helpers import create_topic

from ._consumers import Poller, poll_until, until

pytestmark = pytest.mark.asyncio


class HeldCommits:
    """The member's OffsetCommits wait for `released` before they are sent; each one sent is
    recorded with its member epoch and its error codes by partition."""

    def __init__(self, consumer: Consumer, expected: int) -> None:
        offsets = consumer._member.offsets  # type: ignore[union-attr]
        real = offsets._send
        self.released = asyncio.Event()
        self.waiting = 0
        self.all_waiting = asyncio.Event()
        self.sent: list[tuple[int, dict[int, int]]] = []

        async def send(api: Any, body: dict[str, Any]) -> dict[str, Any]:
            if api is OFFSET_COMMIT and not self.released.is_set():
                self.waiting += 1
                if self.waiting == expected:
                    self.all_waiting.set()
                await self.released.wait()
            response = await real(api, body)
            if api is OFFSET_COMMIT:
                self.sent.append((body["generation_id_or_member_epoch"],
                                  {p["partition_index"]: p["error_code"]
                                   for t in response["topics"] for p in t["partitions"]}))
            return response
        offsets._send = send


def _settings(broker: Any, group: str) -> dict[str, Any]:
    return dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, group_protocol="consumer",
                auto_offset_reset="earliest", enable_auto_commit=False)


async def test_late_commits_land_for_the_partition_kept_and_are_not_resent_for_the_one_lost(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str) -> None:
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    every = {TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)}
    async with asyncio.timeout(90):
        async with Consumer(unique_topic, **_settings(broker, unique_group)) as a:
            await poll_until(a, lambda _: a.assignment() == every and a.metrics()["group_state"] == "STABLE",
                             timeout=30)
            epoch_before = a.metrics()["generation_id"]
            seam = HeldCommits(a, expected=2)
            # One commit per partition, built now in A's epoch and held until B has taken one.
            # The member's own commit path: Consumer.commit() would hold A's revocation until it
            # completed (a revocation waits for commits under way), so these stand for requests
            # built before the revocation that reach the broker after it.
            commits = {tp: asyncio.create_task(a._member.offsets.commit(  # type: ignore[union-attr]
                {tp: OffsetAndMetadata(5 + tp.partition)}, 30)) for tp in every}
            await seam.all_waiting.wait()
            async with Consumer(unique_topic, **_settings(broker, unique_group)) as b, Poller(a), Poller(b):
                await until(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1
                            and a.metrics()["generation_id"] > epoch_before, 30,
                            "B to take a partition from A, and A's epoch to move on")
                (kept,), (lost,) = a.assignment(), b.assignment()
                await b.commit({lost: 3})  # the new owner's progress
                seam.released.set()
                results = await asyncio.gather(*commits.values(), return_exceptions=True)
                outcomes = dict(zip(commits, results, strict=True))
                committed = await b.committed(every, timeout=10)
    # Both went out in A's old epoch: KIP-1251 took it for the partition A kept, and refused it
    # (STALE_MEMBER_EPOCH, 113) for the one A lost. The refused one was not sent again in A's
    # new epoch, which the broker would have taken.
    assert sorted(seam.sent, key=str) == sorted([(epoch_before, {kept.partition: 0}),
                                                 (epoch_before, {lost.partition: 113})], key=str), seam.sent
    assert outcomes[kept] is None
    assert isinstance(outcomes[lost], CommitFailedError), repr(outcomes[lost])
    assert f"{lost.topic}-{lost.partition} moved to another member" in str(outcomes[lost])
    offsets = {tp: None if om is None else om.offset for tp, om in committed.items()}
    assert offsets == {kept: 5 + kept.partition, lost: 3}, "A's late commit overwrote B's"
