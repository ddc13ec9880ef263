"""KIP-320 in the fetcher: the epochs a Fetch carries, and what a diverging epoch in the answer does.

Scripted bytes through the real Fetch v12 schema; the broker side (an unclean leader election on a
real cluster) is tests/integration/test_kafka_cluster_truncation.py.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from aiokafka_lite.errors import ERROR_CODE_BY_NAME, LogTruncationError
from aiokafka_lite.fetch.fetcher import Fetcher
from aiokafka_lite.fetch.log_truncation import check_divergence
from aiokafka_lite.protocol.messages import FETCH, OFFSET_FOR_LEADER_EPOCH
from aiokafka_lite.protocol.records.build import build_record_batch
from aiokafka_lite.subscription import ResetStrategy, SubscriptionState

from .test_fetcher import T0, FakeCluster, ScriptedFetches, assigned, make_fetcher, offsets_of, partition, settle

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("record_decoder")]
E_FENCED = ERROR_CODE_BY_NAME["FENCED_LEADER_EPOCH"]


def batch_at_epoch(base_offset: int, count: int, epoch: int) -> bytes:
    return build_record_batch([(None, b"v%d" % (base_offset + i)) for i in range(count)],
                               base_offset=base_offset, partition_leader_epoch=epoch)


def diverging(epoch: int, end_offset: int) -> dict[str, Any]:
    return {**partition(0, b""), "diverging_epoch": {"epoch": epoch, "end_offset": end_offset}}


def broker_answering(*parts: dict[str, Any]) -> FakeCluster:
    """A Fetch v12 broker answering T0 with ``parts``, one per fetch."""
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    for part in parts:
        script.add(T0, part)
    cluster.handlers[FETCH.key] = script
    return cluster


def read_up_to_100(cluster: FakeCluster, reset: ResetStrategy = ResetStrategy.EARLIEST
                   ) -> tuple[SubscriptionState, Fetcher]:
    """A consumer that has read T0 up to offset 100, its last record in leader epoch 5."""
    sub = assigned(T0, position=100, reset=reset)
    sub.seek(T0, 100, 5)
    return sub, make_fetcher(cluster, sub)


def sent(cluster: FakeCluster) -> list[tuple[int, int, int]]:
    """(fetch offset, current leader epoch, last fetched epoch) of every T0 entry sent."""
    return [(p["fetch_offset"], p["current_leader_epoch"], p["last_fetched_epoch"])
            for _node, _v, body, _t in cluster.fetches() for t in body["topics"] for p in t["partitions"]]


async def test_fetches_carry_the_metadata_leader_epoch_and_the_last_consumed_records_epoch() -> None:
    cluster = broker_answering(partition(0, batch_at_epoch(0, 3, 5) + batch_at_epoch(3, 2, 6)))
    cluster.leader_epochs[T0] = 7
    sub = assigned(T0)
    fetcher = make_fetcher(cluster, sub)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        # The first fetch knows no consumed epoch; the one fetched ahead continues after the
        # buffered data's last batch, in that batch's epoch.
        assert sent(cluster)[:2] == [(0, 7, -1), (5, 7, 6)]
        assert offsets_of(fetcher.fetched_records(100)[T0]) == [0, 1, 2, 3, 4]
        assert sub.state(T0).leader_epoch == 6
    finally:
        await fetcher.close()


async def test_a_diverging_epoch_below_the_position_resets_to_the_divergence_point(
        caplog: pytest.LogCaptureFixture) -> None:
    cluster = broker_answering(diverging(4, 80), partition(0, batch_at_epoch(80, 3, 6)))
    sub, fetcher = read_up_to_100(cluster)
    try:
        with caplog.at_level(logging.WARNING, "aiokafka_lite"):
            fetcher.send_fetches()
            await settle(fetcher)
            assert fetcher.fetched_records(100) == {}
        [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert "t-0" in warning.getMessage()
        assert "consumed up to offset 100" in warning.getMessage()
        assert "diverges from offset 80" in warning.getMessage()
        state = sub.state(T0)
        assert (state.position, state.leader_epoch, state.reset_to) == (80, 4, None)
        fetcher.send_fetches()
        await settle(fetcher)
        assert sent(cluster)[0] == (100, -1, 5)
        assert (80, -1, 4) in sent(cluster)  # refetched from the divergence point, in its epoch
        assert offsets_of(fetcher.fetched_records(100)[T0]) == [80, 81, 82]
    finally:
        await fetcher.close()


async def test_a_diverging_epoch_with_reset_none_raises_log_truncation_error_every_time() -> None:
    cluster = broker_answering(diverging(4, 80), diverging(4, 80))
    sub, fetcher = read_up_to_100(cluster, ResetStrategy.NONE)
    try:
        for _ in range(2):
            fetcher.send_fetches()
            await settle(fetcher)
            with pytest.raises(LogTruncationError, match="diverges from offset 80") as raised:
                fetcher.fetched_records(100)
            error = raised.value
            assert (error.topic, error.partition, error.fetch_offset) == ("t", 0, 100)
            assert (error.divergent_offset, error.divergent_epoch) == (80, 4)
            assert sub.state(T0).position == 100  # unchanged until the user seeks
    finally:
        await fetcher.close()


@pytest.mark.parametrize("reset", [ResetStrategy.EARLIEST, ResetStrategy.NONE])
async def test_no_epoch_on_the_leader_applies_the_reset_strategy(reset: ResetStrategy,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    # OffsetsForLeaderEpoch answers (-1, -1) when the leader has no epoch up to ours (a Fetch
    # answers OFFSET_OUT_OF_RANGE instead, handled as any out-of-range position).
    sub = assigned(T0, position=100, reset=reset)
    sub.seek(T0, 100, 5)
    if reset is ResetStrategy.NONE:
        with pytest.raises(LogTruncationError, match="holds no record") as raised:
            check_divergence(sub, T0, 100, -1, -1)
        assert (raised.value.fetch_offset, raised.value.divergent_offset) == (100, None)
        assert sub.state(T0).position == 100
        return
    with caplog.at_level(logging.WARNING, "aiokafka_lite"):
        assert check_divergence(sub, T0, 100, -1, -1)
    assert sub.state(T0).reset_to is ResetStrategy.EARLIEST
    assert any("holds no record of the consumed leader epoch" in r.getMessage() for r in caplog.records)


async def test_an_epoch_that_ends_past_the_position_is_no_truncation(caplog: pytest.LogCaptureFixture) -> None:
    cluster = broker_answering(diverging(3, 150), partition(0, batch_at_epoch(100, 2, 3)))
    _sub, fetcher = read_up_to_100(cluster)
    try:
        with caplog.at_level(logging.WARNING, "aiokafka_lite"):
            fetcher.send_fetches()
            await settle(fetcher)
            assert fetcher.fetched_records(100) == {}
            fetcher.send_fetches()
            await settle(fetcher)
            assert offsets_of(fetcher.fetched_records(100)[T0]) == [100, 101]
        assert not caplog.records
        assert (100, -1, 3) in sent(cluster)
    finally:
        await fetcher.close()


# ------------------------------------------------------------- brokers without Fetch v12

class EpochEnds:
    """Answers OffsetForLeaderEpoch with the scripted (error, epoch, end offset) per partition."""

    def __init__(self, *answers: tuple[int, int, int]) -> None:
        self.answers = list(answers)
        self.asked: list[dict[str, Any]] = []

    async def __call__(self, node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(body)
        code, epoch, end = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return {"throttle_time_ms": 0, "topics": [
            {"topic": t["topic"], "partitions": [
                {"error_code": code, "partition": p["partition"], "leader_epoch": epoch, "end_offset": end}
                for p in t["partitions"]]} for t in body["topics"]]}


def old_broker(script: ScriptedFetches, epoch_ends: EpochEnds) -> FakeCluster:
    cluster = FakeCluster({T0: 1})
    cluster.leader_epochs[T0] = 7
    cluster.broker_max[FETCH.key] = 11  # no last_fetched_epoch: the fetcher has to ask first
    cluster.handlers[FETCH.key] = script
    cluster.handlers[OFFSET_FOR_LEADER_EPOCH.key] = epoch_ends
    return cluster


async def test_without_fetch_v12_a_position_is_checked_with_offset_for_leader_epoch_first(
        caplog: pytest.LogCaptureFixture) -> None:
    script = ScriptedFetches()
    script.add(T0, partition(0, batch_at_epoch(80, 3, 7)))
    ends = EpochEnds((0, 4, 80))
    cluster = old_broker(script, ends)
    _sub, fetcher = read_up_to_100(cluster)
    try:
        with caplog.at_level(logging.WARNING, "aiokafka_lite"):
            fetcher.send_fetches()
            await settle(fetcher)
            assert offsets_of(fetcher.fetched_records(100)[T0]) == [80, 81, 82]
        [asked] = ends.asked
        assert asked["replica_id"] == -1
        assert asked["topics"] == [{"topic": "t", "partitions": [
            {"partition": 0, "current_leader_epoch": 7, "leader_epoch": 5}]}]
        [warning] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert "consumed up to offset 100" in warning
        assert "diverges from offset 80" in warning
        _node, version, body, _timeout = cluster.fetches()[0]
        # The first fetch came after the check, from the divergence point.
        assert (version, body["topics"][0]["partitions"][0]["fetch_offset"]) == (11, 80)
        # Same leader epoch, same consumed epoch: no second check.
        fetcher.send_fetches()
        await settle(fetcher)
        assert len(ends.asked) == 1
    finally:
        await fetcher.close()


async def test_without_fetch_v12_truncation_with_reset_none_raises_and_fetches_nothing() -> None:
    script = ScriptedFetches()
    ends = EpochEnds((0, 4, 80))
    cluster = old_broker(script, ends)
    sub, fetcher = read_up_to_100(cluster, ResetStrategy.NONE)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        with pytest.raises(LogTruncationError) as raised:
            fetcher.fetched_records(100)
        assert (raised.value.fetch_offset, raised.value.divergent_offset, raised.value.divergent_epoch) == (100, 80, 4)
        assert cluster.fetches() == []  # nothing read past a truncation
        assert sub.state(T0).position == 100
    finally:
        await fetcher.close()


async def test_a_new_leader_epoch_is_checked_again_and_fenced_answers_refresh_metadata() -> None:
    script = ScriptedFetches()
    ends = EpochEnds((E_FENCED, -1, -1), (0, 5, 120))
    cluster = old_broker(script, ends)
    sub, fetcher = read_up_to_100(cluster)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        assert fetcher.metadata_refresh_needed
        await asyncio.sleep(0.05)  # the partition's retry backoff
        fetcher.send_fetches()
        await settle(fetcher)
        assert len(ends.asked) == 2
        assert sub.state(T0).position == 100  # epoch 5 ends past our position: nothing lost
        assert cluster.fetches()  # and fetching goes on
        cluster.leader_epochs[T0] = 8  # a leader change
        script.release.set()
        await asyncio.sleep(0.2)
        assert len(ends.asked) == 3
    finally:
        await fetcher.close()


async def test_with_fetch_v12_no_offset_for_leader_epoch_is_sent() -> None:
    script = ScriptedFetches()
    script.add(T0, partition(0, batch_at_epoch(100, 2, 5)))
    ends = EpochEnds((0, 5, 200))
    cluster = old_broker(script, ends)
    del cluster.broker_max[FETCH.key]
    _sub, fetcher = read_up_to_100(cluster)
    try:
        fetcher.send_fetches()
        await settle(fetcher)
        await settle(fetcher)
        assert offsets_of(fetcher.fetched_records(100)[T0]) == [100, 101]
        assert ends.asked == []
        assert sent(cluster)[0] == (100, 7, 5)
    finally:
        await fetcher.close()
