"""Kafka's PlaintextConsumerCallbackTest (clients-integration-tests): calling the consumer from inside
rebalance listener callbacks, under both group protocols (Kafka's testClassicConsumer*/testAsyncConsumer*
pairs); the cooperative and eager callback-set scenarios are classic, the KIP-848 one is Kafka's
testOnPartitionsAssignedCalledWithNewPartitionsOnlyForAsyncConsumer.

Kafka polls 100 ms at a time while waiting for the callback; here each poll may take 2 s, so that
defect 2 (a callback cancelled when the poll's timeout lapses, covered by test_plaintext_consumer_poll)
does not make these scenarios flaky: a callback awaiting a ListOffsets round trip would be cut short."""

from __future__ import annotations

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, TopicPartition
from aiokafka_lite.errors import IllegalStateError
from aiokafka_lite.testing.helpers import create_topic

from ..integration._protocols import GroupProtocol
from ._kit import consume_and_verify, poll_until_true, send_records, settings

pytestmark = pytest.mark.asyncio

CALLBACK_POLL = 2.0  # seconds per poll while waiting for a callback (see the module docstring)


class Hooked(ConsumerRebalanceListener):
    """Runs ``on_assigned`` / ``on_revoked`` hooks once the test partition is in the callback's set."""

    def __init__(self, tp, on_assigned=None, on_revoked=None):
        self.tp = tp
        self.on_assigned, self.on_revoked = on_assigned, on_revoked
        self.assigned = self.revoked = False
        self.errors: list[BaseException] = []

    async def on_partitions_assigned(self, assigned):
        if self.tp in assigned:
            if self.on_assigned is not None:
                await self._run(self.on_assigned, assigned)
            self.assigned = True

    async def on_partitions_revoked(self, revoked):
        if self.tp in revoked:
            if self.on_revoked is not None:
                await self._run(self.on_revoked, revoked)
            self.revoked = True

    async def _run(self, hook, partitions):
        try:
            await hook(partitions)
        except BaseException as exc:  # kept for the test to re-raise: poll() would hide which hook failed
            self.errors.append(exc)
            raise


async def trigger_on_partitions_assigned(consumer, topic, tp, hook):
    listener = Hooked(tp, on_assigned=hook)
    consumer.subscribe([topic], listener=listener)
    await poll_until_true(consumer, lambda: listener.assigned, poll_timeout=CALLBACK_POLL)
    assert listener.errors == []


async def trigger_on_partitions_revoked(broker, group, protocol, topic, tp, hook):
    """The revocation comes from close(), as in Kafka's triggerOnPartitionsRevoked."""
    listener = Hooked(tp, on_revoked=hook)
    async with Consumer(**settings(broker, group, protocol)) as consumer:
        hook.consumer = consumer
        consumer.subscribe([topic], listener=listener)
        await poll_until_true(consumer, lambda: listener.assigned, poll_timeout=CALLBACK_POLL)
    assert listener.errors == []
    assert listener.revoked


class Hook:
    """An async hook that gets the consumer it runs for (set before the callback can fire)."""

    def __init__(self, body):
        self.body = body
        self.consumer = None

    async def __call__(self, partitions):
        await self.body(self.consumer, partitions)


async def test_consumer_rebalance_listener_assign_on_partitions_assigned(broker, topic, tp, unique_group,
                                                                         group_protocol):
    """PlaintextConsumerCallbackTest.testClassicConsumerRebalanceListenerAssignOnPartitionsAssigned."""
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        async def hook(partitions):
            with pytest.raises(IllegalStateError, match="mutually exclusive"):
                consumer.assign([tp])
        await trigger_on_partitions_assigned(consumer, topic, tp, hook)


async def test_consumer_rebalance_listener_assignment_on_partitions_assigned(broker, topic, tp, unique_group,
                                                                             group_protocol):
    """PlaintextConsumerCallbackTest.testClassicConsumerRebalanceListenerAssignmentOnPartitionsAssigned."""
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        async def hook(partitions):
            assert tp in consumer.assignment()
        await trigger_on_partitions_assigned(consumer, topic, tp, hook)


async def test_consumer_rebalance_listener_beginning_offsets_on_partitions_assigned(broker, topic, tp, unique_group,
                                                                                    group_protocol):
    """PlaintextConsumerCallbackTest.testClassicConsumerRebalanceListenerBeginningOffsetsOnPartitionsAssigned."""
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        async def hook(partitions):
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
        await trigger_on_partitions_assigned(consumer, topic, tp, hook)


async def test_consumer_rebalance_listener_assign_on_partitions_revoked(broker, topic, tp, unique_group,
                                                                        group_protocol):
    """PlaintextConsumerCallbackTest.testClassicConsumerRebalanceListenerAssignOnPartitionsRevoked."""
    async def body(consumer, partitions):
        with pytest.raises(IllegalStateError, match="mutually exclusive"):
            consumer.assign([tp])
    await trigger_on_partitions_revoked(broker, unique_group, group_protocol, topic, tp, Hook(body))


async def test_consumer_rebalance_listener_assignment_on_partitions_revoked(broker, topic, tp, unique_group,
                                                                            group_protocol):
    """PlaintextConsumerCallbackTest.testClassicConsumerRebalanceListenerAssignmentOnPartitionsRevoked."""
    async def body(consumer, partitions):
        assert tp in consumer.assignment()
    await trigger_on_partitions_revoked(broker, unique_group, group_protocol, topic, tp, Hook(body))


async def test_consumer_rebalance_listener_beginning_offsets_on_partitions_revoked(broker, topic, tp, unique_group,
                                                                                   group_protocol):
    """PlaintextConsumerCallbackTest.testClassicConsumerRebalanceListenerBeginningOffsetsOnPartitionsRevoked."""
    async def body(consumer, partitions):
        assert await consumer.beginning_offsets([tp]) == {tp: 0}
    await trigger_on_partitions_revoked(broker, unique_group, group_protocol, topic, tp, Hook(body))


async def test_commit_on_partitions_revoked(broker, topic, tp, unique_group, group_protocol):
    """PlaintextConsumerCallbackTest.testClassicConsumerAwareCommitOnPartitionsRevoked (through our listener:
    commit() from on_partitions_revoked during close())."""
    async def body(consumer, partitions):
        await consumer.commit()
    await trigger_on_partitions_revoked(broker, unique_group, group_protocol, topic, tp, Hook(body))


async def test_get_position_of_newly_assigned_partition_on_partitions_assigned_callback(broker, topic, tp,
                                                                                       unique_group, group_protocol):
    """PlaintextConsumerCallbackTest.testClassicConsumerGetPositionOfNewlyAssignedPartitionOnPartitionsAssignedCallback."""
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        async def hook(partitions):
            assert await consumer.position(tp) == 0
        await trigger_on_partitions_assigned(consumer, topic, tp, hook)


async def test_seek_position_and_pause_newly_assigned_partition_on_partitions_assigned_callback(broker, topic, tp,
                                                                                              unique_group,
                                                                                              group_protocol):
    """PlaintextConsumerCallbackTest.testClassicConsumerSeekPositionAndPauseNewlyAssignedPartitionOnPartitionsAssignedCallback."""
    send_records(broker, tp, 120, start_ts=1000)
    async with Consumer(**settings(broker, unique_group, group_protocol)) as consumer:
        async def hook(partitions):
            consumer.seek(tp, 100)
            consumer.pause(tp)
        await trigger_on_partitions_assigned(consumer, topic, tp, hook)
        assert tp in consumer.paused()
        consumer.resume(tp)
        await consume_and_verify(consumer, tp, 20, 100, start_index=100, start_ts=1000)


async def _assigned_called_with(consumer, topics, expected):
    """Kafka's subscribeAndExpectOnPartitionsAssigned: the callback's set is exactly ``expected``."""
    seen: list[set[TopicPartition]] = []

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned):
            if expected <= assigned:
                seen.append(set(assigned))

    consumer.subscribe(topics, listener=Listener())
    await poll_until_true(consumer, lambda: bool(seen), poll_timeout=CALLBACK_POLL)
    assert seen[0] == expected


async def _on_partitions_assigned_called_with_expected_partitions(broker, group, unique_topic, new_only, **conf):
    topic = f"{unique_topic}-one"
    new_topic = f"{unique_topic}-new"
    create_topic(broker, topic, partitions=1)
    create_topic(broker, new_topic, partitions=1)
    tp, added = TopicPartition(topic, 0), TopicPartition(new_topic, 0)
    async with Consumer(**settings(broker, group, **conf)) as consumer:
        await _assigned_called_with(consumer, [topic], {tp})
        assert consumer.assignment() == {tp}
        await _assigned_called_with(consumer, [topic, new_topic], {added} if new_only else {tp, added})
        assert consumer.assignment() == {tp, added}


async def test_on_partitions_assigned_called_with_new_partitions_only_for_classic_cooperative(broker, unique_topic,
                                                                                            unique_group):
    """PlaintextConsumerCallbackTest.testOnPartitionsAssignedCalledWithNewPartitionsOnlyForClassicCooperative."""
    await _on_partitions_assigned_called_with_expected_partitions(
        broker, unique_group, unique_topic, new_only=True, partition_assignment_strategy=("cooperative-sticky",))


async def test_on_partitions_assigned_called_with_new_partitions_only_for_classic_eager(broker, unique_topic,
                                                                                      unique_group):
    """PlaintextConsumerCallbackTest.testOnPartitionsAssignedCalledWithNewPartitionsOnlyForClassicEager
    (eager: the callback gets the whole new assignment)."""
    await _on_partitions_assigned_called_with_expected_partitions(
        broker, unique_group, unique_topic, new_only=False, partition_assignment_strategy=("range",))


async def test_on_partitions_assigned_called_with_new_partitions_only_for_async_consumer(broker, unique_topic,
                                                                                       unique_group):
    """PlaintextConsumerCallbackTest.testOnPartitionsAssignedCalledWithNewPartitionsOnlyForAsyncConsumer
    (KIP-848 reconciles incrementally: the callback gets the added partitions only)."""
    await _on_partitions_assigned_called_with_expected_partitions(
        broker, unique_group, unique_topic, new_only=True, protocol=GroupProtocol("consumer"))
