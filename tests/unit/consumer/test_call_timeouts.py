"""Every public awaitable refuses a bad timeout at once (InvalidArgumentError), before any I/O,
even on a consumer that was never started; inf (or above MAX_TIMEOUT) means no limit."""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.consumer import lifecycle as startup_module
from aiokafka_lite.errors import InvalidArgumentError
from aiokafka_lite.liveness.deadlines import DEFAULT, MAX_TIMEOUT, check_timeout, resolve_timeout

# Nothing listens on port 1: a call that connected by mistake would fail slowly, not pass.
NOWHERE = "127.0.0.1:1"
TP = TopicPartition("t", 0)
BAD_TIMEOUTS = [math.nan, -1, -0.5, -math.inf, "1", True, b"1", [1.0]]

Call = Callable[[Consumer, Any], Awaitable[Any]]
CALLS: dict[str, Call] = {
    "poll": lambda c, t: c.poll(timeout=t),
    "poll_arrow": lambda c, t: c.poll_arrow(timeout=t),
    "commit": lambda c, t: c.commit({TP: 1}, timeout=t),
    "position": lambda c, t: c.position(TP, timeout=t),
    "committed": lambda c, t: c.committed([TP], timeout=t),
    "seek_to_beginning": lambda c, t: c.seek_to_beginning(TP, timeout=t),
    "seek_to_end": lambda c, t: c.seek_to_end(TP, timeout=t),
    "beginning_offsets": lambda c, t: c.beginning_offsets([TP], timeout=t),
    "end_offsets": lambda c, t: c.end_offsets([TP], timeout=t),
    "offsets_for_times": lambda c, t: c.offsets_for_times({TP: 0}, timeout=t),
    "partitions_for": lambda c, t: c.partitions_for("t", timeout=t),
    "list_topics": lambda c, t: c.list_topics(timeout=t),
    "start": lambda c, t: c.start(timeout=t),
    "close": lambda c, t: c.close(timeout=t),
}


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Records every attempt to build the cluster (the first step of connecting)."""
    attempts: list[object] = []
    real = startup_module.make_cluster

    def recording(config: Any) -> Any:
        attempts.append(config)
        return real(config)
    monkeypatch.setattr(startup_module, "make_cluster", recording)
    return attempts


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=repr)
@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.asyncio
async def test_bad_timeout_raises_at_once_without_connecting(name: str, timeout: Any,
                                                             connects: list[object]) -> None:
    consumer = Consumer(bootstrap_servers=NOWHERE, group_id="g", request_timeout_ms=1000,
                        default_api_timeout_ms=2000)
    consumer.assign([TP])
    started = time.monotonic()
    with pytest.raises(InvalidArgumentError, match="timeout") as info:
        await CALLS[name](consumer, timeout)
    assert time.monotonic() - started < 1.0
    assert repr(timeout) in str(info.value)
    assert connects == []
    assert not consumer.metrics()["started"]
    await consumer.close(timeout=0)  # close() still works (after a refused close() too)
    assert consumer.metrics()["closed"]
    assert connects == []


@pytest.mark.parametrize("timeout", [math.nan, -1])
@pytest.mark.asyncio
async def test_close_with_a_bad_timeout_closes_nothing(timeout: float) -> None:
    consumer = Consumer(bootstrap_servers=NOWHERE)
    consumer.assign([TP])
    with pytest.raises(InvalidArgumentError, match="timeout"):
        await consumer.close(timeout=timeout)
    assert not consumer.metrics()["closed"]  # as Java's close(Duration): refused before anything
    assert consumer.assignment() == {TP}
    await consumer.close()
    assert consumer.metrics()["closed"]


@pytest.mark.parametrize("timeout", [math.inf, 1e300, MAX_TIMEOUT * 2, 10**400],
                         ids=["inf", "1e300", "above-max", "10**400"])
def test_infinite_or_huge_timeout_means_no_limit(timeout: float) -> None:
    assert check_timeout(timeout) is None
    assert check_timeout(timeout, none_ok=False) is None


@pytest.mark.parametrize(("timeout", "seconds"), [(0, 0.0), (-0.0, 0.0), (1, 1.0), (2.5, 2.5),
                                                  (1e9, 1e9), (MAX_TIMEOUT, MAX_TIMEOUT)])
def test_finite_timeouts_are_seconds(timeout: float, seconds: float) -> None:
    assert check_timeout(timeout) == seconds


def test_none_is_refused_where_not_allowed() -> None:
    assert check_timeout(None) is None
    with pytest.raises(InvalidArgumentError, match="poll timeout must be a number of seconds >= 0, got None"):
        check_timeout(None, none_ok=False, what="poll timeout")


def test_resolve_timeout_default_and_nan() -> None:
    config = Consumer(bootstrap_servers=NOWHERE, default_api_timeout_ms=1500).config
    assert resolve_timeout(DEFAULT, config) == 1.5
    assert resolve_timeout(math.inf, config) is None
    with pytest.raises(InvalidArgumentError, match="nan"):
        resolve_timeout(math.nan, config)


@pytest.mark.asyncio
async def test_poll_with_a_huge_or_infinite_timeout_is_bounded_by_the_caller(connects: list[object]) -> None:
    """No overflow: poll(1e300) and poll(inf) wait (here for a broker that never answers) until
    the caller gives up; the consumer still closes cleanly."""
    import asyncio

    for timeout in (1e300, math.inf):
        consumer = Consumer(bootstrap_servers=NOWHERE, reconnect_backoff_ms=10)
        consumer.assign([TP])
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await consumer.poll(timeout=timeout)
        await consumer.close(timeout=1.0)
    assert len(connects) == 2  # these did try to connect: the good timeouts were accepted
