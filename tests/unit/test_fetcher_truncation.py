"""KIP-320 in the fetcher: the epochs a Fetch carries, and what a diverging epoch in the answer does.

Scripted bytes through the real Fetch v12 schema; the broker side (an unclean leader election on a
real cluster) is tests/integration/test_kafka_cluster_truncation.py.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from aiokafka_lite.consumer.log_truncation import check_divergence
from aiokafka_lite.consumer.subscription import ResetStrategy
from aiokafka_lite.errors import LogTruncationError
from aiokafka_lite.protocol.messages import FETCH
from aiokafka_lite.protocol.records_build import build_record_batch

from .test_fetcher import T0, FakeCluster, ScriptedFetches, assigned, make_fetcher, offsets_of, partition, settle

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("record_decoder")]


def batch_at_epoch(base_offset: int, count: int, epoch: int) -> bytes:
    return build_record_batch([(None, b"v%d" % (base_offset + i)) for i in range(count)],
                               base_offset=base_offset, partition_leader_epoch=epoch)


def diverging(epoch: int, end_offset: int) -> dict[str, Any]:
    return {**partition(0, b""), "diverging_epoch": {"epoch": epoch, "end_offset": end_offset}}


def sent(cluster: FakeCluster) -> list[tuple[int, int, int]]:
    """(fetch offset, current leader epoch, last fetched epoch) of every T0 entry sent."""
    return [(p["fetch_offset"], p["current_leader_epoch"], p["last_fetched_epoch"])
            for _node, _v, body, _t in cluster.fetches() for t in body["topics"] for p in t["partitions"]]


async def test_fetches_carry_the_metadata_leader_epoch_and_the_last_consumed_records_epoch() -> None:
    cluster = FakeCluster({T0: 1})
    cluster.leader_epochs[T0] = 7
    script = ScriptedFetches()
    script.add(T0, partition(0, batch_at_epoch(0, 3, 5) + batch_at_epoch(3, 2, 6)))
    cluster.handlers[FETCH.key] = script
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
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, diverging(4, 80))
    script.add(T0, partition(0, batch_at_epoch(80, 3, 6)))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0, position=100, reset=ResetStrategy.EARLIEST)
    sub.seek(T0, 100, 5)
    fetcher = make_fetcher(cluster, sub)
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
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, diverging(4, 80))
    script.add(T0, diverging(4, 80))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0, position=100, reset=ResetStrategy.NONE)
    sub.seek(T0, 100, 5)
    fetcher = make_fetcher(cluster, sub)
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
    cluster = FakeCluster({T0: 1})
    script = ScriptedFetches()
    script.add(T0, diverging(3, 150))
    script.add(T0, partition(0, batch_at_epoch(100, 2, 3)))
    cluster.handlers[FETCH.key] = script
    sub = assigned(T0, position=100, reset=ResetStrategy.EARLIEST)
    sub.seek(T0, 100, 5)
    fetcher = make_fetcher(cluster, sub)
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
