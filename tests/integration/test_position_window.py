"""position() while the partition's state changes under it (on Tansu): the offset lookup it waits
for is held at a gate while another task revokes and re-assigns the partition, or unassigns it.
As in Java, position() then looks again (within its timeout), or raises IllegalStateError when the
partition is no longer assigned; never an AssertionError."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.errors import IllegalStateError
from aiokafka_lite.testing.helpers import create_topic, produce

pytestmark = pytest.mark.asyncio


class Gate:
    """Holds the consumer's first ListOffsets lookup until released."""

    def __init__(self, consumer: Consumer) -> None:
        self.asked = asyncio.Event()
        self.open = asyncio.Event()
        lookup = consumer._offsets  # set by start()
        assert lookup is not None
        real = lookup.list_offsets

        async def gated(*args: Any, **kwargs: Any) -> Any:
            if not self.asked.is_set():
                self.asked.set()
                await self.open.wait()
            return await real(*args, **kwargs)
        lookup.list_offsets = gated  # type: ignore[method-assign]


async def _held_position(broker: Any, topic: str, meanwhile: Any) -> tuple[int | BaseException, int]:
    """position() of partition 0 (no committed offset: a reset to earliest), with `meanwhile`
    run while its ListOffsets is held; and the partition's end offset."""
    tp = TopicPartition(topic, 0)
    async with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign([tp])
        gate = Gate(c)
        asking = asyncio.create_task(c.position(tp, timeout=10))
        await gate.asked.wait()
        meanwhile(c, tp)
        gate.open.set()
        outcome = (await asyncio.gather(asking, return_exceptions=True))[0]
        return outcome, (await c.end_offsets([tp], timeout=10))[tp]


@pytest.fixture
def topic(tansu_broker: Any, unique_topic: str) -> str:
    create_topic(tansu_broker, unique_topic, partitions=1)
    produce(tansu_broker, unique_topic, [(None, f"v{i}") for i in range(3)])
    return unique_topic


async def test_position_after_a_revoke_and_reassign_in_its_window(
        tansu_broker: Any, topic: str, caplog: pytest.LogCaptureFixture) -> None:
    def reassign(c: Consumer, tp: TopicPartition) -> None:
        c.assign([])
        c.assign([tp])  # a fresh partition state: no position, no reset pending

    async with asyncio.timeout(30):
        outcome, _ = await _held_position(tansu_broker, topic, reassign)
    assert outcome == 0, repr(outcome)  # before the fix: AssertionError
    assert [r.getMessage() for r in caplog.records
            if r.name.startswith("aiokafka_lite") and r.levelno >= logging.WARNING] == []


async def test_position_of_a_partition_unassigned_in_its_window(tansu_broker: Any, topic: str) -> None:
    async with asyncio.timeout(30):
        outcome, _ = await _held_position(tansu_broker, topic, lambda c, tp: c.assign([]))
    assert isinstance(outcome, IllegalStateError), repr(outcome)
    assert "only check the position for partitions assigned" in str(outcome)


async def test_position_after_a_seek_to_another_reset_in_its_window(tansu_broker: Any, topic: str) -> None:
    """The reset the lookup was for was replaced (earliest -> latest): position() resolves the new one."""
    from aiokafka_lite.subscription import ResetStrategy

    def reset_to_latest(c: Consumer, tp: TopicPartition) -> None:
        c._subscription.request_reset(tp, ResetStrategy.LATEST)  # what seek_to_end() does first

    async with asyncio.timeout(30):
        outcome, end = await _held_position(tansu_broker, topic, reset_to_latest)
    assert outcome == end > 0, repr(outcome)  # before the fix: AssertionError
