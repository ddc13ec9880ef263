"""metrics()'s records_consumed and bytes_consumed, as the fetcher counts them: records when
handed out, a partition's fetched bytes once all of its records are handed out."""

from __future__ import annotations

import pytest

from aiokafka_lite.protocol.messages import FETCH
from aiokafka_lite.structs import TopicPartition

from .test_fetcher import T0, FakeCluster, ScriptedFetches, assigned, batch, make_fetcher, partition, settle

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("record_decoder")]

T1 = TopicPartition("t", 1)


async def test_records_count_at_hand_out_and_bytes_once_the_data_is_handed_out() -> None:
    cluster = FakeCluster({T0: 1, T1: 1})
    script = ScriptedFetches()
    data0, data1 = batch(0, 5) + batch(5, 5), batch(0, 3)
    script.add(T0, partition(0, data0, hw=10, lso=10))
    script.add(T1, partition(1, data1, hw=3, lso=3))
    cluster.handlers[FETCH.key] = script
    fetcher = make_fetcher(cluster, assigned(T0, T1))
    try:
        assert fetcher.consumed() == {"records_consumed": 0, "bytes_consumed": 0}
        fetcher.send_fetches()
        await settle(fetcher)
        assert fetcher.consumed() == {"records_consumed": 0, "bytes_consumed": 0}  # fetched, not handed out
        first = fetcher.fetched_records(4)
        assert sum(len(r) for r in first.values()) == 4
        assert fetcher.consumed()["records_consumed"] == 4
        rest = fetcher.fetched_records(100)
        assert sum(len(r) for r in rest.values()) == 9
        assert fetcher.consumed() == {"records_consumed": 13, "bytes_consumed": len(data0) + len(data1)}
        assert fetcher.fetched_records(100) == {}
        assert fetcher.consumed()["records_consumed"] == 13
    finally:
        await fetcher.close()
