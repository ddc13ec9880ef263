"""The Consumer's public API beyond the basic paths, on Apache Kafka 4.x: transactions
(read_committed), pattern subscription, rebalance listeners, static membership, pause/resume,
seeks and offset resets, auto-commit and commit_async, deserializers, `async for`, metrics."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, OffsetAndMetadata, TopicPartition
from aiokafka_lite.errors import (
    BrokerError,
    FencedInstanceIdError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
)
from aiokafka_lite.testing.helpers import create_topic, produce, produce_transactional

from ._consumers import Poller, poll_until
from ._protocols import GroupProtocol

pytestmark = pytest.mark.asyncio


CLASSIC = GroupProtocol("classic")


def settings(broker, group=None, protocol=CLASSIC, **extra):
    base = dict(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=1000)
    if group is not None:
        base["group_id"] = group
    return protocol.settings(base, **extra)


def values(records):
    return [r.value for r in records]


# ---------------------------------------------------------------- read_committed


async def test_read_committed_skips_aborted_records_and_markers(apache_kafka_broker, unique_topic):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    produce(broker, unique_topic, [(None, "plain-0"), (None, "plain-1")])
    produce_transactional(broker, unique_topic, [(None, "committed-0"), (None, "committed-1")], commit=True)
    produce_transactional(broker, unique_topic, [(None, "aborted-0"), (None, "aborted-1")], commit=False)
    produce(broker, unique_topic, [(None, "plain-2")])
    produce_transactional(broker, unique_topic, [(None, "aborted-2")], commit=False)
    produce_transactional(broker, unique_topic, [(None, "committed-2")], commit=True)
    everything = [b"plain-0", b"plain-1", b"committed-0", b"committed-1", b"aborted-0", b"aborted-1",
                  b"plain-2", b"aborted-2", b"committed-2"]
    visible = [v for v in everything if not v.startswith(b"aborted")]

    async with Consumer(**settings(broker, isolation_level="read_committed")) as committed_reader, \
            Consumer(**settings(broker, isolation_level="read_uncommitted")) as raw_reader:
        committed_reader.assign([tp])
        raw_reader.assign([tp])
        end = (await raw_reader.end_offsets([tp]))[tp]
        # 9 records + 4 transaction markers (2 commits, 2 aborts).
        assert end == len(everything) + 4
        got = await poll_until(committed_reader, lambda g: len(g) >= len(visible), timeout=30)
        assert values(got) == visible
        offsets = [r.offset for r in got]
        assert offsets == sorted(offsets)
        # The position moves past the aborted records and the final commit marker to the end.
        await poll_until(committed_reader, lambda _: committed_reader.metrics()["lag"][f"{tp.topic}-0"] == 0,
                         timeout=10)
        assert await committed_reader.position(tp) == end
        assert len(await committed_reader.poll(timeout=0.5)) == 0
        raw = await poll_until(raw_reader, lambda g: len(g) >= len(everything), timeout=30)
        assert values(raw) == everything
        assert await raw_reader.position(tp) == end


async def test_read_committed_stops_at_an_open_transaction(apache_kafka_broker, unique_topic):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    produce(broker, unique_topic, [(None, "before")])
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                         "transactional.id": f"open-{uuid.uuid4().hex[:8]}"})
    await asyncio.to_thread(producer.init_transactions, 30)
    producer.begin_transaction()
    producer.produce(unique_topic, value=b"in-open-transaction")
    assert await asyncio.to_thread(producer.flush, 30) == 0
    produce(broker, unique_topic, [(None, "after")])  # a plain record behind the open transaction
    try:
        async with Consumer(**settings(broker, isolation_level="read_committed")) as committed_reader, \
                Consumer(**settings(broker)) as raw_reader:
            committed_reader.assign([tp])
            raw_reader.assign([tp])
            # The last stable offset is the open transaction's first offset (1).
            assert await committed_reader.end_offsets([tp]) == {tp: 1}
            assert await raw_reader.end_offsets([tp]) == {tp: 3}
            got = await poll_until(committed_reader, lambda g: len(g) >= 1, timeout=30)
            for _ in range(3):
                got.extend(await committed_reader.poll(timeout=0.3))
            assert values(got) == [b"before"]
            assert await committed_reader.position(tp) == 1
            raw = await poll_until(raw_reader, lambda g: len(g) >= 3, timeout=30)
            assert values(raw) == [b"before", b"in-open-transaction", b"after"]
            await asyncio.to_thread(producer.commit_transaction, 30)
            rest = await poll_until(committed_reader, lambda g: len(g) >= 2, timeout=30)
            assert values(rest) == [b"in-open-transaction", b"after"]
    finally:
        with contextlib.suppress(Exception):
            producer.abort_transaction(5)


# ---------------------------------------------------------------- pattern subscription


async def test_pattern_subscription_picks_up_new_topics(apache_kafka_broker, unique_group, group_protocol):
    broker = apache_kafka_broker
    prefix = f"pat-{uuid.uuid4().hex[:8]}"
    first, other = f"{prefix}-a", f"x{prefix}-other"
    create_topic(broker, first, partitions=2)
    create_topic(broker, other, partitions=1)
    produce(broker, first, [(None, f"a{i}") for i in range(10)])
    produce(broker, other, [(None, "ignored")])
    # Auto-commit: the rebalance for the new topic commits before revoking, so nothing is read twice.
    conf = settings(broker, unique_group, group_protocol, metadata_max_age_ms=1000, enable_auto_commit=True)
    async with Consumer(**conf) as consumer:
        consumer.subscribe(pattern=rf"^{prefix}-.*")
        got = await poll_until(consumer, lambda g: len(g) >= 10, timeout=30)
        assert sorted(values(got)) == sorted(f"a{i}".encode() for i in range(10))
        assert consumer.subscription() == {first}
        assert consumer.assignment() == {TopicPartition(first, 0), TopicPartition(first, 1)}
        second = f"{prefix}-b"
        create_topic(broker, second, partitions=1)
        produce(broker, second, [(None, f"b{i}") for i in range(5)])
        more = await poll_until(consumer, lambda g: len(g) >= 5, timeout=20)
        assert sorted(values(more)) == sorted(f"b{i}".encode() for i in range(5))
        assert consumer.subscription() == {first, second}
        assert TopicPartition(second, 0) in consumer.assignment()
        assert all(r.topic != other for r in got + more)


# ---------------------------------------------------------------- rebalance listener


class RecordingListener(ConsumerRebalanceListener):
    """Records every call with the task it ran in; async or plain methods, as chosen."""

    def __init__(self, *, use_async: bool, fail_on: str | None = None) -> None:
        self.calls: list[tuple[str, set[TopicPartition], asyncio.Task[object] | None]] = []
        self.fail_on = fail_on
        if use_async:
            self.on_partitions_assigned = self._async_assigned  # type: ignore[method-assign]
            self.on_partitions_revoked = self._async_revoked  # type: ignore[method-assign]
            self.on_partitions_lost = self._async_lost  # type: ignore[method-assign]

    def _record(self, what: str, partitions: set[TopicPartition]) -> None:
        self.calls.append((what, set(partitions), asyncio.current_task()))
        if self.fail_on == what:
            self.fail_on = None  # once
            raise RuntimeError(f"listener failed in {what}")

    def on_partitions_assigned(self, assigned):
        self._record("assigned", assigned)

    def on_partitions_revoked(self, revoked):
        self._record("revoked", revoked)

    def on_partitions_lost(self, lost):
        self._record("lost", lost)

    async def _async_assigned(self, assigned):
        await asyncio.sleep(0)
        self._record("assigned", assigned)

    async def _async_revoked(self, revoked):
        await asyncio.sleep(0)
        self._record("revoked", revoked)

    async def _async_lost(self, lost):
        await asyncio.sleep(0)
        self._record("lost", lost)

    def names(self):
        return [name for name, _, _ in self.calls]


async def _poll_in_task(consumer, done, timeout=30.0):
    """poll_until in a task of its own, so the listener's task can be compared with it."""
    task = asyncio.create_task(poll_until(consumer, done, timeout=timeout, poll_timeout=0.3))
    await task
    return task


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_listener_runs_in_the_rebalance_step_with_right_sets(apache_kafka_broker, unique_topic,
                                                                   unique_group, use_async):
    """Callbacks run in the consumer's rebalance task, which poll() starts and waits for (a poll
    timeout cannot cancel them: issue #11, item 2); one task per rebalance runs both.

    Classic (eager) only: it checks that everything is revoked before the rejoin."""
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=4)
    everything = {TopicPartition(unique_topic, p) for p in range(4)}
    listener_a = RecordingListener(use_async=use_async)
    listener_b = RecordingListener(use_async=use_async)
    a = Consumer(**settings(broker, unique_group))
    b = Consumer(**settings(broker, unique_group))
    a.subscribe([unique_topic], listener=listener_a)
    b.subscribe([unique_topic], listener=listener_b)
    async with a, b:
        task = await _poll_in_task(a, lambda _: a.assignment() == everything)
        assert [call[:2] for call in listener_a.calls] == [("assigned", everything)]
        first_step = listener_a.calls[0][2]
        assert first_step is not task
        assert first_step is not None
        assert first_step.get_name() == "aiokafka-lite rebalance"
        async with Poller(b):
            task = await _poll_in_task(a, lambda _: len(a.assignment()) == 2 and len(b.assignment()) == 2)
        assert listener_a.names() == ["assigned", "revoked", "assigned"]
        _, revoked, revoked_in = listener_a.calls[1]
        _, assigned, assigned_in = listener_a.calls[2]
        assert revoked == everything  # eager protocol: everything is revoked before rejoining
        assert assigned == a.assignment()
        assert revoked_in is assigned_in  # one step per rebalance
        assert revoked_in not in (task, first_step)
        assert listener_b.names() == ["assigned"]
        assert listener_b.calls[0][1] == b.assignment()
        assert a.assignment() | b.assignment() == everything
        assert not a.assignment() & b.assignment()


async def test_listener_errors_propagate_from_poll(apache_kafka_broker, unique_topic, unique_group):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    produce(broker, unique_topic, [(None, f"v{i}") for i in range(10)])
    listener = RecordingListener(use_async=True, fail_on="assigned")
    consumer = Consumer(**settings(broker, unique_group))
    consumer.subscribe([unique_topic], listener=listener)
    async with consumer:
        with pytest.raises(RuntimeError, match="listener failed in assigned"):
            await poll_until(consumer, lambda g: len(g) >= 10, timeout=30)
        # The assignment stands (as in Java); the next poll() calls the callback again, and
        # its partitions are fetched once it has returned.
        assert len(consumer.assignment()) == 2
        got = await poll_until(consumer, lambda g: len(g) >= 10, timeout=30)
        assert listener.names() == ["assigned", "assigned"]
        assert sorted(values(got)) == sorted(f"v{i}".encode() for i in range(10))
        # A failing on_partitions_revoked: poll() raises it, the partitions are given up anyway,
        # and the next poll() rejoins without revoking them a second time.
        listener.fail_on = "revoked"
        # A changed subscription rejoins (the same one again would not, as in Java).
        create_topic(broker, f"{unique_topic}-more", partitions=1)
        consumer.subscribe([unique_topic, f"{unique_topic}-more"])
        with pytest.raises(RuntimeError, match="listener failed in revoked"):
            await poll_until(consumer, lambda _: False, timeout=30)
        assert consumer.assignment() == set()
        await poll_until(consumer, lambda _: len(consumer.assignment()) == 3, timeout=30)
        assert listener.names() == ["assigned", "assigned", "revoked", "assigned"]


async def test_the_same_subscription_with_a_new_listener_does_not_rejoin(
        apache_kafka_broker, unique_topic, unique_group, group_protocol):
    """As in Java: subscribe() again with the same topics (process() does so to put its listener
    in, and to give the application's back) changes the listener and nothing else."""
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    first, second = RecordingListener(use_async=False), RecordingListener(use_async=True)
    consumer = Consumer(**settings(broker, unique_group, group_protocol))
    consumer.subscribe([unique_topic], listener=first)
    async with consumer:
        await poll_until(consumer, lambda _: len(consumer.assignment()) == 2, timeout=30)
        rebalances = consumer.metrics()["rebalances"]
        consumer.subscribe([unique_topic], listener=second)
        for _ in range(4):  # two seconds of polls: a rejoin would run the listeners here
            await consumer.poll(0.5)
        assert consumer.metrics()["rebalances"] == rebalances
        assert len(consumer.assignment()) == 2
    assert first.names() == ["assigned"]
    assert second.names() == ["revoked"]  # close() revoked through the listener now in place


async def test_partitions_lost_after_poll_interval_lapse(
        apache_kafka_broker, unique_topic, unique_group, group_protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    listener = RecordingListener(use_async=False)
    consumer = Consumer(**settings(broker, unique_group, group_protocol, max_poll_interval_ms=2000))
    consumer.subscribe([unique_topic], listener=listener)
    async with consumer:
        await poll_until(consumer, lambda _: len(consumer.assignment()) == 2, timeout=30)
        owned = consumer.assignment()
        await asyncio.sleep(3.0)  # no poll: the watchdog leaves the group
        assert consumer.metrics()["poll_interval_lapses"] == 1
        task = await _poll_in_task(consumer, lambda _: consumer.metrics()["group_state"] == "STABLE"
                                   and len(consumer.assignment()) == 2)
        assert listener.names() == ["assigned", "lost", "assigned"]
        assert listener.calls[1][1] == owned
        lost_in, assigned_in = listener.calls[1][2], listener.calls[2][2]
        assert lost_in is not task
        assert assigned_in is not task
        assert lost_in.get_name() == assigned_in.get_name() == "aiokafka-lite rebalance"
        if group_protocol.is_classic:
            assert lost_in is assigned_in  # the one rebalance step that poll() started and waited for
        # KIP-848: the rejoin is a heartbeat, and the new assignment arrives in a later poll's step,
        # as in Java's AsyncKafkaConsumer (onPartitionsLost runs, the member goes JOINING, and
        # onPartitionsAssigned follows once a heartbeat brings the target: PlaintextConsumerPollTest
        # testAsyncConsumerMaxPollIntervalMs only awaits the second assignment).


# ---------------------------------------------------------------- static membership


async def _stable_pair(a, b, topic):
    """Start b (the leader) first, then a; poll both until each holds half of the 4 partitions."""
    async with Poller(b) as b_poller:
        await b_poller.wait_for(lambda: len(b.assignment()) == 4, timeout=30)
        await poll_until(a, lambda _: len(a.assignment()) == 2 and len(b.assignment()) == 2, timeout=30)
    return b.metrics()["generation_id"]


async def test_static_member_restart_gets_same_partitions_without_rebalance(apache_kafka_broker, unique_topic,
                                                                          unique_group):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=4)
    conf = settings(broker, unique_group, session_timeout_ms=6000)
    b = Consumer(unique_topic, **conf)
    a = Consumer(unique_topic, group_instance_id="static-a", **conf)
    async with b:
        async with a:
            generation = await _stable_pair(a, b, unique_topic)
            owned_a, owned_b = a.assignment(), b.assignment()
            rebalances_b = b.metrics()["rebalances"]
        loop = asyncio.get_running_loop()
        closed_at = loop.time()
        async with Poller(b):
            # No LeaveGroup from a static member: b keeps its half (no rebalance) for now.
            await asyncio.sleep(2.0)
            assert b.assignment() == owned_b
            assert b.metrics()["generation_id"] == generation
            async with Consumer(unique_topic, group_instance_id="static-a", **conf) as a2:
                await poll_until(a2, lambda _: bool(a2.assignment()), timeout=20)
                assert loop.time() - closed_at < 6.0  # within the session timeout
                assert a2.assignment() == owned_a
                await asyncio.sleep(2.0)  # b heartbeats meanwhile: no rebalance comes
                assert b.assignment() == owned_b
                assert b.metrics()["generation_id"] == generation
                assert b.metrics()["rebalances"] == rebalances_b


async def test_static_member_close_keeps_partitions_until_session_timeout(apache_kafka_broker, unique_topic,
                                                                         unique_group):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=4)
    conf = settings(broker, unique_group, session_timeout_ms=4000)
    b = Consumer(unique_topic, **conf)
    a = Consumer(unique_topic, group_instance_id="static-a", **conf)
    async with b:
        async with a:
            await _stable_pair(a, b, unique_topic)
        loop = asyncio.get_running_loop()
        closed_at = loop.time()
        async with Poller(b) as b_poller:
            await b_poller.wait_for(lambda: len(b.assignment()) == 4, timeout=20)
            took = loop.time() - closed_at
        assert 4.0 * 0.8 <= took < 4.0 + 6.0, took


async def test_fenced_static_member_gets_a_typed_error(apache_kafka_broker, unique_topic, unique_group):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    conf = settings(broker, unique_group)
    old = Consumer(unique_topic, group_instance_id="same", **conf)
    new = Consumer(unique_topic, group_instance_id="same", **conf)
    async with old, new:
        await poll_until(old, lambda _: len(old.assignment()) == 2, timeout=30)
        await poll_until(new, lambda _: len(new.assignment()) == 2, timeout=30)
        # The old member learns it was replaced from its next heartbeat (or commit): the error
        # is raised from its next poll(), and again from every later one.
        with pytest.raises(FencedInstanceIdError, match="FENCED_INSTANCE_ID") as info:
            await poll_until(old, lambda _: False, timeout=10, poll_timeout=0.3)
        assert info.value.code == 82
        assert not info.value.retriable
        assert "group_instance_id" in str(info.value)
        with pytest.raises(BrokerError, match="FENCED_INSTANCE_ID"):
            await old.poll(timeout=0.1)
        assert old.metrics()["group_state"] == "FAILED"
        with pytest.raises(BrokerError, match="FENCED_INSTANCE_ID"):
            await old.commit({TopicPartition(unique_topic, 0): 0})
    # close() of the fenced member completes; the new one keeps working.


# ---------------------------------------------------------------- pause / resume


async def test_pause_and_resume(apache_kafka_broker, unique_topic):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    p0, p1 = TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)
    produce(broker, unique_topic, [{"value": f"p{p}-{i}", "partition": p} for p in (0, 1) for i in range(50)])
    async with Consumer(**settings(broker)) as consumer:
        consumer.assign([p0, p1])
        first = await poll_until(consumer, lambda g: {r.partition for r in g} == {0, 1}, timeout=30)
        consumer.pause(p0)
        assert consumer.paused() == {p0}
        paused_at = await consumer.position(p0)
        during = await poll_until(consumer, lambda g: sum(r.partition == 1 for r in first + g) >= 50, timeout=30)
        for _ in range(3):
            during.extend(await consumer.poll(timeout=0.2))
        assert {r.partition for r in during} <= {1}  # buffered p0 data is held back
        assert await consumer.position(p0) == paused_at
        consumer.resume(p0)
        assert consumer.paused() == set()
        rest = await poll_until(consumer, lambda g: sum(r.partition == 0 for r in first + during + g) >= 50,
                                timeout=30)
        every = first + during + rest
        for p in (0, 1):
            offsets = [r.offset for r in every if r.partition == p]
            assert offsets == list(range(50)), p  # no gap, no duplicate


# ---------------------------------------------------------------- seeks and resets


async def test_seek_and_position_during_consumption(apache_kafka_broker, unique_topic):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    produce(broker, unique_topic, [(None, f"v{i}") for i in range(30)])
    async with Consumer(**settings(broker, max_poll_records=10)) as consumer:
        consumer.assign([tp])
        got = await poll_until(consumer, lambda g: len(g) >= 10)
        assert await consumer.position(tp) == got[-1].offset + 1
        consumer.seek(tp, 5)
        assert await consumer.position(tp) == 5
        again = await poll_until(consumer, lambda g: len(g) >= 1)
        assert again[0].offset == 5  # buffered data from before the seek is dropped
        await consumer.seek_to_end(tp)
        assert await consumer.position(tp) == 30
        assert len(await consumer.poll(timeout=0.5)) == 0
        produce(broker, unique_topic, [(None, "new")])
        new = await poll_until(consumer, lambda g: len(g) >= 1)
        assert [(r.offset, r.value) for r in new] == [(30, b"new")]
        await consumer.seek_to_beginning(tp)
        assert await consumer.position(tp) == 0
        from_start = await poll_until(consumer, lambda g: len(g) >= 31)
        assert [r.offset for r in from_start] == list(range(31))


async def test_auto_offset_reset_none_raises_naming_partitions(
        apache_kafka_broker, unique_topic, unique_group, group_protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    async with Consumer(unique_topic, **settings(broker, unique_group, group_protocol,
                                                 auto_offset_reset="none")) as consumer:
        with pytest.raises(NoOffsetForPartitionError) as info:
            await poll_until(consumer, lambda _: False, timeout=30)
        assert f"{unique_topic}-0" in str(info.value)
        assert f"{unique_topic}-1" in str(info.value)
        # seek() is the way out.
        for tp in consumer.assignment():
            consumer.seek(tp, 0)
        produce(broker, unique_topic, [{"value": "x", "partition": 1}])
        got = await poll_until(consumer, lambda g: len(g) >= 1, timeout=30)
        assert values(got) == [b"x"]


async def test_auto_offset_reset_latest_skips_existing_records(
        apache_kafka_broker, unique_topic, unique_group, group_protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    produce(broker, unique_topic, [(None, f"old{i}") for i in range(10)])
    async with Consumer(unique_topic, **settings(broker, unique_group, group_protocol,
                                                 auto_offset_reset="latest")) as consumer:
        await poll_until(consumer, lambda _: bool(consumer.assignment()), timeout=30)
        assert await consumer.position(tp) == 10
        produce(broker, unique_topic, [(None, "new")])
        got = await poll_until(consumer, lambda g: len(g) >= 1, timeout=30)
        assert values(got) == [b"new"]


@pytest.mark.parametrize("reset", ["earliest", "latest", "none"])
async def test_seek_beyond_the_end_resets(apache_kafka_broker, unique_topic, reset):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    produce(broker, unique_topic, [(None, f"v{i}") for i in range(5)])
    async with Consumer(**settings(broker, auto_offset_reset=reset)) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        if reset == "none":
            with pytest.raises(OffsetOutOfRangeError, match="1000"):
                await poll_until(consumer, lambda _: False, timeout=10)
            return
        if reset == "earliest":
            got = await poll_until(consumer, lambda g: len(g) >= 5, timeout=10)
            assert [r.offset for r in got] == list(range(5))
        else:
            await poll_until(consumer, lambda _: consumer._subscription.state(tp).position == 5, timeout=10)
            produce(broker, unique_topic, [(None, "after")])
            got = await poll_until(consumer, lambda g: len(g) >= 1, timeout=10)
            assert [(r.offset, r.value) for r in got] == [(5, b"after")]


# ---------------------------------------------------------------- commits


async def test_auto_commit_and_commit_on_close(apache_kafka_broker, unique_topic, unique_group, group_protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    produce(broker, unique_topic, [(None, f"v{i}") for i in range(20)])
    conf = settings(broker, unique_group, group_protocol, enable_auto_commit=True, auto_commit_interval_ms=500)
    async with Consumer(unique_topic, **conf) as consumer:
        await poll_until(consumer, lambda g: len(g) >= 20, timeout=30)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while (await consumer.committed([tp]))[tp] != OffsetAndMetadata(20, "", 0):
            assert loop.time() < deadline, await consumer.committed([tp])
            await consumer.poll(timeout=0.2)  # auto-commit runs in the poll path
    produce(broker, unique_topic, [(None, f"w{i}") for i in range(7)])
    conf["auto_commit_interval_ms"] = 600_000  # only close() commits now
    async with Consumer(unique_topic, **conf) as consumer:
        got = await poll_until(consumer, lambda g: len(g) >= 7, timeout=30)
        assert [r.offset for r in got] == list(range(20, 27))  # resumed from the auto-commit
        assert (await consumer.committed([tp]))[tp].offset == 20
    async with Consumer(**settings(broker, unique_group, group_protocol)) as checker:
        assert (await checker.committed([tp]))[tp].offset == 27


async def test_commit_async_callback_and_committed_none(
        apache_kafka_broker, unique_topic, unique_group, group_protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    p0, p1 = TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)
    produce(broker, unique_topic, [{"value": f"v{i}", "partition": 0} for i in range(5)])
    async with Consumer(unique_topic, **settings(broker, unique_group, group_protocol)) as consumer:
        await poll_until(consumer, lambda g: len(g) >= 5, timeout=30)
        assert await consumer.committed([p0, p1]) == {p0: None, p1: None}
        outcomes = []
        fut = consumer.commit_async(callback=lambda offsets, exc: outcomes.append((dict(offsets), exc)))
        assert await asyncio.wait_for(fut, 10) is None
        await asyncio.sleep(0)  # done-callbacks run one loop step after the future resolves
        # p1 had nothing, but its position (0, from the reset) is committed too.
        expected = {p0: OffsetAndMetadata(5, "", 0), p1: OffsetAndMetadata(0, "", None)}
        assert outcomes == [(expected, None)]
        committed = await consumer.committed([p0, p1])
        assert committed[p0].offset == 5
        assert committed[p1].offset == 0
        explicit = consumer.commit_async({p1: OffsetAndMetadata(0, "meta")})
        await asyncio.wait_for(explicit, 10)
        assert (await consumer.committed([p1]))[p1].metadata == "meta"


# ---------------------------------------------------------------- deserializers, iteration, metrics


@pytest.mark.parametrize("mode", ["assign", "group"])
async def test_deserializers_async_for_and_close_from_another_task(apache_kafka_broker, unique_topic,
                                                                   unique_group, mode):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    produce(broker, unique_topic, [(f"k{i}", str(i)) for i in range(20)] + [(None, None)])
    conf = settings(broker, unique_group if mode == "group" else None,
                    key_deserializer=lambda b: None if b is None else b.decode().upper(),
                    value_deserializer=lambda b: None if b is None else int(b))
    consumer = Consumer(**conf)
    if mode == "group":
        consumer.subscribe([unique_topic])
    else:
        consumer.assign([tp])
    got = []
    async with consumer:
        async def consume():
            async for record in consumer:
                got.append(record)
        task = asyncio.create_task(consume())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while len(got) < 21:
            assert loop.time() < deadline
            assert not task.done()
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # the iterator waits in poll() now
        await consumer.close()
        closed_at = loop.time()
        await asyncio.wait_for(task, 5)  # ended by the close, without an error
        assert loop.time() - closed_at < 0.5  # at once, not after the poll's own timeout
    assert [(r.key, r.value) for r in got] == [(f"K{i}", i) for i in range(20)] + [(None, None)]


async def test_max_records_and_metrics(apache_kafka_broker, unique_topic, unique_group, group_protocol):
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=2)
    produce(broker, unique_topic, [{"value": f"v{i}", "partition": i % 2} for i in range(40)])
    async with Consumer(unique_topic, **settings(broker, unique_group, group_protocol)) as consumer:
        got = []
        for _ in range(20):  # the first polls join the group
            got.extend(await consumer.poll(timeout=2.0, max_records=3))
            if got:
                break
        assert 1 <= len(got) <= 3
        first_batch_size = len(got)
        polls = consumer.metrics()["polls"]
        while len(got) < 40:
            batch = await consumer.poll(timeout=2.0, max_records=3)
            assert 1 <= len(batch) <= 3  # the data is all there: every poll gets some, never more than 3
            got.extend(batch)
            m = consumer.metrics()
            for p in (0, 1):
                lag = m["lag"][f"{unique_topic}-{p}"]
                handed = sum(r.partition == p for r in got)
                assert lag is None or lag == 20 - handed, (p, lag, handed)
        assert consumer.metrics()["polls"] - polls >= (40 - first_batch_size) // 3
        assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(40))
        await poll_until(consumer, lambda _: list(consumer.metrics()["lag"].values()) == [0, 0], timeout=10)
        await asyncio.sleep(1.5)  # at least one heartbeat round trip, no poll
        m = consumer.metrics()
        assert m["group_id"] == unique_group
        assert m["group_state"] == "STABLE"
        assert m["generation_id"] >= 1
        assert m["member_id"]
        assert m["rebalances"] == 1
        assert sorted(m["assignment"]) == [f"{unique_topic}-0", f"{unique_topic}-1"]
        assert m["heartbeats_sent"] >= 1
        assert m["heartbeat_rtt_seconds"] is not None
        assert 0 <= m["heartbeat_rtt_seconds"] < 1.0
        assert 1.4 <= m["seconds_since_last_poll"] < 5
