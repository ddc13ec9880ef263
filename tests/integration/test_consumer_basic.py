"""Subscribe, consume, commit, committed, seek and offsets on every broker kind."""

from __future__ import annotations

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.errors import IllegalStateError
from aiokafka_lite.testing.helpers import produce

from ._consumers import poll_until

pytestmark = pytest.mark.asyncio


async def test_group_consumes_everything_and_commits(any_broker, unique_topic, unique_group, group_protocol):
    any_broker.create_topic(unique_topic, partitions=3)
    sent = [(f"k{i}", f"v{i}") for i in range(300)]
    produce(any_broker.bootstrap_servers, unique_topic, sent)
    conf = group_protocol.settings(bootstrap_servers=any_broker.bootstrap_servers, group_id=unique_group,
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   session_timeout_ms=10000, heartbeat_interval_ms=1000)
    async with Consumer(unique_topic, **conf) as consumer:
        records = await poll_until(consumer, lambda got: len(got) >= 300)
        assert sorted((r.key, r.value) for r in records) == sorted(
            (k.encode(), v.encode()) for k, v in sent)
        assert len({(r.partition, r.offset) for r in records}) == 300
        await consumer.commit()
        tps = [TopicPartition(unique_topic, p) for p in range(3)]
        committed = await consumer.committed(tps)
        next_offsets = {}
        for r in records:
            tp = TopicPartition(r.topic, r.partition)
            next_offsets[tp] = max(next_offsets.get(tp, 0), r.offset + 1)
        assert {tp: om.offset for tp, om in committed.items() if om} == next_offsets
        if "end_offsets" in any_broker.capabilities:  # not Tansu: DEVIATIONS["list_offsets_latest"]
            assert await consumer.end_offsets(tps) == next_offsets


async def test_manual_assign_seek_and_offsets(any_broker, unique_topic):
    any_broker.create_topic(unique_topic, partitions=1)
    produce(any_broker.bootstrap_servers, unique_topic, [(None, f"v{i}") for i in range(50)])
    tp = TopicPartition(unique_topic, 0)
    async with Consumer(bootstrap_servers=any_broker.bootstrap_servers, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        assert await consumer.beginning_offsets([tp]) == {tp: 0}
        if "end_offsets" in any_broker.capabilities:  # see above
            assert await consumer.end_offsets([tp]) == {tp: 50}
        consumer.seek(tp, 42)
        records = await poll_until(consumer, lambda got: len(got) >= 8)
        assert [r.offset for r in records[:8]] == list(range(42, 50))
        assert await consumer.position(tp) == 50
        await consumer.seek_to_beginning(tp)
        assert await consumer.position(tp) == 0
        with pytest.raises(IllegalStateError):
            await consumer.commit()  # no group_id


async def test_poll_before_subscribe_is_a_typed_error(any_broker):
    async with Consumer(bootstrap_servers=any_broker.bootstrap_servers) as consumer:
        with pytest.raises(IllegalStateError):
            await consumer.poll(timeout=0.1)
