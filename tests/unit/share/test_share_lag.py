"""The ShareConsumer's share lag (share/lag.py, KIP-1226) against a scripted coordinator (fake.py):
asked at most every share_lag_refresh_ms while partitions are assigned, in the Consumer's ``lag``
shape; a v0 broker said once and no more asked; a failure said once at INFO, then at DEBUG; the
task gone after close(). The broker's figures are checked in tests/integration/test_share_prometheus.py."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import Any

import pytest

from aiokafka_lite import ShareConsumer
from aiokafka_lite.errors import ConfigError, KafkaConnectionError
from aiokafka_lite.share.lag import ShareLag
from aiokafka_lite.structs import TopicPartition

from .fake import TP, Coordinator, Parts

pytestmark = pytest.mark.asyncio

TP1 = TopicPartition("jobs", 1)
LOGGER = "aiokafka_lite.share"


class Assigned:
    def __init__(self, *tps: TopicPartition) -> None:
        self.tps = set(tps)

    def __call__(self) -> set[TopicPartition]:
        return set(self.tps)


def lag_task() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "aiokafka-lite share lag" and not t.done()]


async def started(refresh_ms: int, coordinator: Coordinator, assigned: Assigned) -> ShareLag:
    lag = ShareLag("workers", refresh_ms, request_timeout=1.0)
    lag.start(coordinator, assigned)  # type: ignore[arg-type]
    await asyncio.sleep(0)
    return lag


async def until(condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.005)


def said(caplog: pytest.LogCaptureFixture, level: int, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == LOGGER and r.levelno == level and text in r.getMessage()]


async def test_the_lag_is_asked_at_most_every_interval_while_partitions_are_assigned() -> None:
    coordinator, assigned = Coordinator(), Assigned(TP)
    coordinator.lag = {TP: 7, TP1: 2}  # the group's other partition is not this member's
    lag = await started(100, coordinator, assigned)
    try:
        await until(lambda: len(coordinator.asked) >= 3, "three requests")
        asked = list(coordinator.asked)
        assert all(b - a >= 0.099 for a, b in itertools.pairwise(asked)), f"at most every 100 ms: {asked}"
        assert lag.snapshot() == {"jobs-0": 7}
        assert (lag.metrics()["refreshes"], lag.metrics()["failures"]) == (len(asked), 0)
        assigned.tps = set()
        lag.assignment_changed()
        await asyncio.sleep(0.25)
        assert len(coordinator.asked) == len(asked), "nothing asked without partitions"
        assert lag.snapshot() == {}
        before = len(coordinator.asked)
        assigned.tps = {TP, TP1}
        lag.assignment_changed()
        await until(lambda: len(coordinator.asked) == before + 1, "asked at once when partitions come", 1.0)
        assert lag.snapshot() == {"jobs-0": 7, "jobs-1": 2}
    finally:
        await lag.stop()


async def test_nothing_is_asked_before_partitions_come_then_at_once() -> None:
    coordinator, assigned = Coordinator(), Assigned()
    lag = await started(10_000, coordinator, assigned)
    try:
        await asyncio.sleep(0.05)
        assert (coordinator.asked, lag.snapshot()) == ([], {})
        assigned.tps = {TP}
        lag.assignment_changed()
        await until(lambda: len(coordinator.asked) == 1, "asked at once, not after share_lag_refresh_ms", 2.0)
        assert lag.snapshot() == {"jobs-0": 0}
    finally:
        await lag.stop()


async def test_a_partition_no_longer_assigned_leaves_the_snapshot_and_an_unknown_one_is_none() -> None:
    coordinator, assigned = Coordinator(), Assigned(TP, TP1)
    coordinator.lag = {TP: 4}  # no share-partition state for partition 1 yet
    lag = await started(10_000, coordinator, assigned)
    try:
        assert lag.snapshot() == {"jobs-0": 4, "jobs-1": None}
        assigned.tps = {TP1}
        lag.assignment_changed()
        assigned.tps = {TP, TP1}  # back before the next answer: what was heard of it is forgotten
        assert lag.snapshot() == {"jobs-0": None, "jobs-1": None}
    finally:
        await lag.stop()


async def test_a_partitions_error_leaves_its_lag_unknown_and_the_others_reported(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    coordinator, assigned = Coordinator(), Assigned(TP, TP1)
    coordinator.lag, coordinator.partition_errors = {TP: 6}, {TP1: 3}  # UNKNOWN_TOPIC_OR_PARTITION
    lag = await started(10_000, coordinator, assigned)
    try:
        await until(lambda: lag.metrics()["refreshes"] == 1, "an answer")
        assert lag.snapshot() == {"jobs-0": 6, "jobs-1": None}
        assert lag.metrics()["failures"] == 0
        assert not said(caplog, logging.INFO, "DescribeShareGroupOffsets")
    finally:
        await lag.stop()


@pytest.mark.parametrize("version", [0, None])
async def test_a_broker_without_the_lag_is_said_once_and_not_asked_again(
        version: int | None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    coordinator, assigned = Coordinator(), Assigned(TP)
    coordinator.version = version
    lag = await started(20, coordinator, assigned)
    try:
        await asyncio.sleep(0.15)
        lag.assignment_changed()
        await asyncio.sleep(0.05)
        assert coordinator.asked == [], "a broker without v1 is not asked"
        assert not lag_task(), "the refresher stopped"
        (line,) = said(caplog, logging.INFO, "no share lag")
        assert ("DescribeShareGroupOffsets v0 only" if version == 0 else "does not support") in line
        assert lag.snapshot() == {"jobs-0": None}
        assert lag.metrics()["unavailable"] is not None
    finally:
        await lag.stop()


async def test_a_failure_is_said_once_at_info_then_counted_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    coordinator, assigned = Coordinator(), Assigned(TP)
    coordinator.lag = {TP: 5}
    lag = await started(30, coordinator, assigned)
    try:
        coordinator.error = KafkaConnectionError("the coordinator went away")
        await until(lambda: lag.metrics()["failures"] >= 3, "three failures")
        failures = lag.metrics()["failures"]
        assert failures >= 3
        assert len(said(caplog, logging.INFO, "went away")) == 1
        assert len(said(caplog, logging.DEBUG, "went away")) == failures - 1
        assert lag.snapshot() == {"jobs-0": 5}, "the last figure heard stays"
        assert lag_task(), "a failure does not stop the refresher"
        coordinator.error, coordinator.lag = None, {TP: 1}
        await until(lambda: lag.snapshot() == {"jobs-0": 1}, "the new figure after the recovery")
    finally:
        await lag.stop()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_stop_cancels_a_request_in_flight_and_leaves_no_task() -> None:
    coordinator, assigned = Coordinator(), Assigned(TP)
    coordinator.hang = True
    lag = await started(10, coordinator, assigned)
    await until(lambda: bool(coordinator.asked), "the request sent")
    (task,) = lag_task()
    await lag.stop()
    assert task.cancelled(), "the cancellation went through, not swallowed"
    assert not lag_task()
    await lag.stop()  # idempotent


async def test_zero_never_asks() -> None:
    coordinator = Coordinator()
    lag = await started(0, coordinator, Assigned(TP))
    await asyncio.sleep(0.05)
    assert (coordinator.asked, lag_task(), lag.snapshot()) == ([], [], {"jobs-0": None})
    await lag.stop()


async def test_the_setting_is_checked_as_the_others_are() -> None:
    assert ShareConsumer(group_id="g").config.share_lag_refresh_ms == 30000
    assert ShareConsumer(group_id="g", share_lag_refresh_ms=0).config.share_lag_refresh_ms == 0
    s = ShareConsumer.from_properties({"group.id": "g", "share.lag.refresh.ms": "500"})
    assert s.config.share_lag_refresh_ms == 500
    for bad in (-1, True, 1.5, "often"):
        with pytest.raises(ConfigError, match="share_lag_refresh_ms"):
            ShareConsumer(group_id="g", share_lag_refresh_ms=bad)
    with pytest.raises(ConfigError, match=r"share\.lag\.refresh\.ms=-5: expected an int, 0 <= value"):
        ShareConsumer.from_properties({"group.id": "g", "share.lag.refresh.ms": "-5"})  # named as given


async def test_a_share_consumer_reports_the_lag_in_metrics_and_leaves_no_task(parts: Parts) -> None:
    s = ShareConsumer("jobs", bootstrap_servers="127.0.0.1:1", group_id="workers", share_lag_refresh_ms=50)
    async with s:
        await s.poll(0.05)  # started, subscribed: the fake member is assigned jobs-0
        parts.cluster.lag = {TP: 3}
        parts.member.on_change()
        await until(lambda: s.metrics()["lag"] == {"jobs-0": 3}, "the lag in metrics()")
        assert s.metrics()["lag_refresh"]["refreshes"] >= 1
        assert lag_task()
    assert not lag_task(), "close() cancelled and awaited the refresher"
