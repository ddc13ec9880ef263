"""API misuse raises clear typed errors, before any connection attempt (no broker needed)."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite import Consumer, ConsumerRecord, OffsetAndMetadata, TopicPartition
from aiokafka_lite.errors import (
    ConfigError,
    ConsumerClosedError,
    IllegalStateError,
    InvalidArgumentError,
    KafkaError,
)

# Nothing listens on port 1: a test that connected by mistake would fail (or time out), not pass.
NOWHERE = "127.0.0.1:1"
TP = TopicPartition("t", 0)



def group_consumer(**extra):
    return Consumer(bootstrap_servers=NOWHERE, group_id="g", **extra)


def plain_consumer(**extra):
    return Consumer(bootstrap_servers=NOWHERE, **extra)


@pytest.mark.asyncio
async def test_poll_before_subscribe_or_assign():
    consumer = group_consumer()
    with pytest.raises(IllegalStateError, match=r"poll\(\) before subscribe\(\) or assign\(\)"):
        await consumer.poll(timeout=0.1)
    assert not consumer.metrics()["started"]  # raised before connecting
    await consumer.close()


@pytest.mark.parametrize("timeout", [-0.1, -1, None, "1", True])
@pytest.mark.asyncio
async def test_poll_rejects_bad_timeouts(timeout):
    consumer = plain_consumer()
    consumer.assign([TP])
    with pytest.raises(InvalidArgumentError, match="poll timeout") as info:
        await consumer.poll(timeout=timeout)
    assert isinstance(info.value, ValueError)
    await consumer.close()


@pytest.mark.parametrize("max_records", [0, -5, 1.5, True])
@pytest.mark.asyncio
async def test_poll_rejects_bad_max_records(max_records):
    consumer = plain_consumer()
    consumer.assign([TP])
    with pytest.raises(InvalidArgumentError, match="max_records"):
        await consumer.poll(timeout=0.1, max_records=max_records)
    await consumer.close()


@pytest.mark.parametrize("call", [
    lambda c: c.commit({TP: 1}, timeout=-1),
    lambda c: c.committed([TP], timeout=-0.5),
    lambda c: c.beginning_offsets([TP], timeout=-1),
    lambda c: c.end_offsets([TP], timeout="soon"),
    lambda c: c.offsets_for_times({TP: 0}, timeout=-1),
    lambda c: c.partitions_for("t", timeout=-1),
    lambda c: c.list_topics(timeout=-1),
    lambda c: c.seek_to_beginning(TP, timeout=-1),
    lambda c: c.seek_to_end(TP, timeout=-1),
    lambda c: c.position(TP, timeout=-1),
], ids=["commit", "committed", "beginning_offsets", "end_offsets", "offsets_for_times", "partitions_for",
        "list_topics", "seek_to_beginning", "seek_to_end", "position"])
@pytest.mark.asyncio
async def test_awaitables_reject_bad_timeouts(call):
    consumer = group_consumer()
    consumer.assign([TP])
    with pytest.raises(InvalidArgumentError, match="timeout"):
        await call(consumer)
    assert not consumer.metrics()["started"]
    await consumer.close()


@pytest.mark.asyncio
async def test_bad_arguments_to_offset_calls():
    consumer = group_consumer()
    consumer.assign([TP])
    with pytest.raises(InvalidArgumentError, match="collection of TopicPartition"):
        await consumer.committed(TP)  # a bare partition, not a collection
    with pytest.raises(InvalidArgumentError, match="TopicPartition objects"):
        await consumer.end_offsets([("t", 0)])
    with pytest.raises(InvalidArgumentError, match="collection of TopicPartition"):
        await consumer.beginning_offsets("t")
    with pytest.raises(InvalidArgumentError, match="keys must be TopicPartition"):
        await consumer.commit({"t": 1})
    with pytest.raises(InvalidArgumentError, match="invalid offset"):
        await consumer.commit({TP: -1})
    with pytest.raises(InvalidArgumentError, match="invalid offset"):
        consumer.commit_async({TP: "x"})
    with pytest.raises(InvalidArgumentError, match=r"pause\(\) takes TopicPartition arguments, got \[.*unpack it"):
        consumer.pause([TP])  # pause(*partitions), not pause(partitions)
    with pytest.raises(InvalidArgumentError, match=r"resume\(\) takes TopicPartition arguments, got 't'$"):
        consumer.resume("t")
    assert consumer.paused() == set()
    assert not consumer.metrics()["started"]
    await consumer.close()


@pytest.mark.asyncio
async def test_seek_pause_position_on_unassigned_partition():
    consumer = plain_consumer()
    consumer.assign([TP])
    other = TopicPartition("t", 1)
    with pytest.raises(IllegalStateError, match="not assigned"):
        consumer.seek(other, 0)
    with pytest.raises(IllegalStateError, match="not assigned"):
        consumer.pause(other)
    with pytest.raises(IllegalStateError, match="not assigned"):
        consumer.resume(other)
    with pytest.raises(IllegalStateError, match="not assigned"):
        await consumer.position(other)
    with pytest.raises(IllegalStateError, match="not assigned"):
        await consumer.seek_to_end(other)
    with pytest.raises(InvalidArgumentError, match="seek offset"):
        consumer.seek(TP, -1)
    assert not consumer.metrics()["started"]
    await consumer.close()


@pytest.mark.asyncio
async def test_group_calls_without_group_id():
    consumer = plain_consumer()
    with pytest.raises(IllegalStateError, match="needs a group_id"):
        consumer.subscribe(["t"])
    with pytest.raises(IllegalStateError, match="needs a group_id"):
        consumer.subscribe(pattern="t.*")
    consumer.assign([TP])
    with pytest.raises(IllegalStateError, match="needs a group_id"):
        await consumer.commit({TP: 1})
    with pytest.raises(IllegalStateError, match="needs a group_id"):
        consumer.commit_async()
    with pytest.raises(IllegalStateError, match="needs a group_id"):
        await consumer.committed([TP])
    await consumer.close()


@pytest.mark.asyncio
async def test_subscribe_and_assign_are_exclusive():
    consumer = group_consumer()
    consumer.subscribe(["t"])
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        consumer.assign([TP])
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        consumer.subscribe(pattern="x.*")
    assert consumer.subscription() == {"t"}
    consumer.unsubscribe()
    consumer.assign([TP])
    assert consumer.assignment() == {TP}
    with pytest.raises(IllegalStateError, match="mutually exclusive"):
        consumer.subscribe(["t"])
    with pytest.raises(InvalidArgumentError, match="topics or a pattern"):
        consumer.subscribe(["t"], pattern="t")
    await consumer.close()


@pytest.mark.asyncio
async def test_subscribe_to_nothing_is_unsubscribe():
    consumer = group_consumer()
    consumer.subscribe("t")  # a single name is one topic, not its characters
    assert consumer.subscription() == {"t"}
    consumer.subscribe([])
    assert consumer.subscription() == set()
    with pytest.raises(IllegalStateError, match="before subscribe"):
        await consumer.poll(timeout=0.1)
    await consumer.close()


@pytest.mark.asyncio
async def test_topics_in_the_constructor_subscribe():
    consumer = Consumer("a", "b", bootstrap_servers=NOWHERE, group_id="g")
    assert consumer.subscription() == {"a", "b"}
    await consumer.close()
    with pytest.raises(IllegalStateError, match="needs a group_id"):
        Consumer("a", bootstrap_servers=NOWHERE)


def test_unknown_setting_suggests_the_right_name():
    with pytest.raises(ConfigError, match="session_timeout_ms") as info:
        Consumer(bootstrap_servers=NOWHERE, group_id="g", sesion_timeout_ms=6000)
    assert "sesion_timeout_ms" in str(info.value)
    assert isinstance(info.value, ValueError)
    with pytest.raises(ConfigError, match=r"did you mean 'group\.id'"):
        Consumer.from_properties({"bootstrap.servers": NOWHERE, "group.idd": "g"})


def test_invalid_setting_value_names_it():
    with pytest.raises(ConfigError, match="heartbeat_interval_ms"):
        Consumer(bootstrap_servers=NOWHERE, group_id="g", session_timeout_ms=6000, heartbeat_interval_ms=6000)
    with pytest.raises(ConfigError, match="auto_offset_reset"):
        Consumer(bootstrap_servers=NOWHERE, auto_offset_reset="beginning")


CLOSED_CALLS = {
    "start": lambda c: c.start(),
    "poll": lambda c: c.poll(timeout=0.1),
    "commit": lambda c: c.commit(),
    "commit_async": lambda c: c.commit_async(),
    "subscribe": lambda c: c.subscribe(["t"]),
    "subscribe_pattern": lambda c: c.subscribe(pattern="t.*"),
    "assign": lambda c: c.assign([TP]),
    "unsubscribe": lambda c: c.unsubscribe(),
    "assignment": lambda c: c.assignment(),
    "subscription": lambda c: c.subscription(),
    "seek": lambda c: c.seek(TP, 0),
    "seek_to_beginning": lambda c: c.seek_to_beginning(TP),
    "seek_to_end": lambda c: c.seek_to_end(TP),
    "pause": lambda c: c.pause(TP),
    "resume": lambda c: c.resume(TP),
    "paused": lambda c: c.paused(),
    "position": lambda c: c.position(TP),
    "committed": lambda c: c.committed([TP]),
    "beginning_offsets": lambda c: c.beginning_offsets([TP]),
    "end_offsets": lambda c: c.end_offsets([TP]),
    "offsets_for_times": lambda c: c.offsets_for_times({TP: 0}),
    "partitions_for": lambda c: c.partitions_for("t"),
    "list_topics": lambda c: c.list_topics(),
}


@pytest.mark.parametrize("name", sorted(CLOSED_CALLS))
@pytest.mark.asyncio
async def test_every_method_after_close_raises_consumer_closed(name):
    consumer = group_consumer()
    await consumer.close()

    async def call():
        result = CLOSED_CALLS[name](consumer)
        if asyncio.iscoroutine(result):
            await result

    with pytest.raises(ConsumerClosedError, match="closed") as info:
        await call()
    # Distinct from cancellation, and catchable as an IllegalStateError / KafkaError.
    assert isinstance(info.value, IllegalStateError)
    assert isinstance(info.value, KafkaError)
    assert not isinstance(info.value, asyncio.CancelledError)


@pytest.mark.asyncio
async def test_close_is_idempotent_and_async_for_ends():
    consumer = group_consumer()
    consumer.subscribe(["t"])
    await consumer.close()
    await consumer.close()
    await asyncio.gather(consumer.close(), consumer.close())
    assert [r async for r in consumer] == []
    snapshot = consumer.metrics()  # still readable: a snapshot for a /metrics endpoint
    assert snapshot["closed"] is True
    assert snapshot["started"] is False


@pytest.mark.asyncio
async def test_async_context_manager_closes_on_error():
    consumer = group_consumer()
    consumer.subscribe(["t"])
    consumer.start = _no_start  # type: ignore[method-assign]  # no broker: skip connecting
    with pytest.raises(RuntimeError, match="boom"):
        async with consumer:
            raise RuntimeError("boom")
    assert consumer.metrics()["closed"] is True
    with pytest.raises(ConsumerClosedError):
        await consumer.poll(timeout=0.1)


async def _no_start(timeout: object = None) -> None:
    return None


@pytest.mark.asyncio
async def test_start_without_broker_times_out_as_kafka_timeout():
    consumer = group_consumer()
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(KafkaError):
        await consumer.start(timeout=0.5)
    assert loop.time() - began < 2.0
    await consumer.close()


@pytest.mark.asyncio
async def test_commit_offsets_accept_ints_and_offset_and_metadata():
    consumer = group_consumer()
    consumer.assign([TP, TopicPartition("t", 1)])
    consumer.seek(TP, 3)
    offsets = consumer._offsets_to_commit({TP: 5, TopicPartition("t", 1): OffsetAndMetadata(9, "m")})
    assert offsets == {TP: OffsetAndMetadata(5), TopicPartition("t", 1): OffsetAndMetadata(9, "m")}
    # Default: the positions of partitions with one (records handed out so far).
    assert consumer._offsets_to_commit(None) == {TP: OffsetAndMetadata(3)}
    # Records buffered by `async for` but not yet yielded are not committed.
    consumer._iter_buffer.append(ConsumerRecord("t", 0, 1, 0, 0, None, b"v", ()))
    assert consumer._offsets_to_commit(None) == {TP: OffsetAndMetadata(1)}
    await consumer.close()


class _FirstCommitStuck:
    """A group member whose first commit never gets an answer (e.g. waiting after
    STALE_MEMBER_EPOCH for a heartbeat answer that never comes); the next ones land."""

    group_id = "g"

    def __init__(self) -> None:
        self.landed: list[dict[TopicPartition, OffsetAndMetadata]] = []

    def commit_generation(self) -> object:
        return 1

    async def commit(self, offsets, timeout, standalone=False):
        if not self.landed and not getattr(self, "stuck", False):
            self.stuck = True
            await asyncio.Event().wait()
        self.landed.append(dict(offsets))


@pytest.mark.asyncio
async def test_the_consumers_own_commits_are_bounded_so_none_blocks_the_queue():
    """Auto-commit, the commit before a rebalance and at close queue behind every other commit
    (commit_order): each is bounded by default_api_timeout_ms once it runs, so one that gets no
    answer fails (KafkaTimeoutError) and the ones behind it go out."""
    async with asyncio.timeout(10):
        consumer = group_consumer(default_api_timeout_ms=300)
        consumer.subscribe(["t"])
        member = consumer._member = _FirstCommitStuck()
        first = consumer._parts.queue_commit({TP: OffsetAndMetadata(1)})
        second = consumer._parts.queue_commit({TP: OffsetAndMetadata(2)})
        done, _ = await asyncio.wait({first, second}, timeout=3)
        assert done == {first, second}  # before the fix: neither ended
        assert isinstance(first.exception(), KafkaError)
        assert isinstance(first.exception(), TimeoutError)
        assert second.exception() is None
        assert member.landed == [{TP: OffsetAndMetadata(2)}]
        consumer._member = None
        await consumer.close()
