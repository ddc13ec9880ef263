"""ConsumerRecords.next_offsets() (KIP-1094) on Apache Kafka 4.3.1: per partition, the offset to commit
to resume after what a poll consumed, with its leader epoch, past transaction markers and aborted
records the application never sees; committing it carries the epoch."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce_transactional

pytestmark = pytest.mark.asyncio


async def _poll_until_position(consumer: Consumer, tp: TopicPartition, end: int, timeout: float = 30.0
                               ) -> tuple[list[int], list[dict]]:
    """Offsets handed out and every non-empty next_offsets() until the poll's position reaches ``end``."""
    offsets: list[int] = []
    moves: list[dict] = []
    async with asyncio.timeout(timeout):
        while not moves or moves[-1][tp].offset < end:
            batch = await consumer.poll(timeout=1.0)
            offsets += [record.offset for record in batch]
            if batch.next_offsets():
                moves.append(batch.next_offsets())
    return offsets, moves


async def test_next_offsets_go_past_markers_and_aborted_records_and_commit_with_their_epoch(
        apache_kafka_broker, unique_topic, unique_group):
    create_topic(apache_kafka_broker, unique_topic, partitions=1)
    tp = TopicPartition(unique_topic, 0)
    produce_transactional(apache_kafka_broker, unique_topic, [(None, f"c{i}") for i in range(5)], commit=True)
    async with Consumer(bootstrap_servers=apache_kafka_broker.bootstrap_servers, group_id=unique_group,
                        isolation_level="read_committed", enable_auto_commit=False) as consumer:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        # Offsets 0-4 and the commit marker at 5: the next offset is 6, past the last record + 1.
        offsets, moves = await _poll_until_position(consumer, tp, 6)
        assert offsets == [0, 1, 2, 3, 4]
        assert moves[-1][tp].offset == 6
        epoch = moves[-1][tp].leader_epoch
        assert epoch is not None

        # An aborted transaction (6-8 and the abort marker at 9): no record, the position still moves.
        produce_transactional(apache_kafka_broker, unique_topic, [(None, f"a{i}") for i in range(3)], commit=False)
        offsets, moves = await _poll_until_position(consumer, tp, 10)
        assert offsets == []
        assert moves[-1][tp].offset == 10

        await consumer.commit(moves[-1])
        committed = (await consumer.committed([tp]))[tp]
        assert committed is not None
        assert (committed.offset, committed.leader_epoch) == (10, epoch)
