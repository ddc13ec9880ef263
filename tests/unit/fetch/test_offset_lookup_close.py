"""OffsetLookup at the consumer's close (found by the property test, seed 8): a lookup whose
connection fails with a non-retriable error raises that error, not a TaskGroup's ExceptionGroup;
close() cancels and awaits the ListOffsets in flight, so none outlives the consumer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiokafka_lite.errors import ConsumerClosedError
from aiokafka_lite.fetch.offset_lookup import OffsetLookup
from aiokafka_lite.protocol.messages import LIST_OFFSETS

from .test_fetcher import T0, T1, FakeCluster

pytestmark = pytest.mark.asyncio


def _asking() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if "_ask_broker" in repr(t.get_coro())]


async def test_a_closed_cluster_is_the_callers_error_not_an_exception_group() -> None:
    cluster = FakeCluster({T0: 1, T1: 2})
    cluster.connect_error = ConsumerClosedError("the cluster client is closed")
    with pytest.raises(ConsumerClosedError):
        await OffsetLookup(cluster, retry_backoff=0.01).end_offsets([T0, T1], 1.0)


async def test_close_ends_the_list_offsets_in_flight() -> None:
    cluster = FakeCluster({T0: 1, T1: 2})
    asked = asyncio.Event()

    async def never(node_id: int, body: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    cluster.handlers[LIST_OFFSETS.key] = never
    lookup = OffsetLookup(cluster, retry_backoff=0.01)
    call = asyncio.create_task(lookup.end_offsets([T0, T1], None))
    await asyncio.wait_for(asked.wait(), 5)
    assert len(_asking()) == 2
    await lookup.close()
    assert _asking() == []  # none left when close() returns
    with pytest.raises(ConsumerClosedError):
        await asyncio.wait_for(call, 5)
