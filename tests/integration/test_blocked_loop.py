"""Issue 7 on Apache Kafka: a member whose handler blocks the event loop with time.sleep(16).

With session_timeout_ms=6000, heartbeat_mode="thread" keeps the membership (a second member sees
no rebalance), heartbeat_mode="task" loses it (and the stall monitor logs a WARNING). With
max_poll_interval_ms=10000 the blocked member still leaves at its poll deadline in thread mode.
The second member runs in its own thread with its own event loop, so the block does not stop it.

The same scenarios run with group_protocol="consumer" (KIP-848): there the broker owns the session
timeout (10 s in the fixture) and the heartbeat interval (0.5 s), so neither is passed.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import poll_until

pytestmark = pytest.mark.asyncio

PARTITIONS = 4
BLOCK = 16.0  # past max_poll_interval_ms=10000 and the 5 s window the hand-over after it is given


class Observer(threading.Thread):
    """Member B in its own thread and loop: records every change of its partition count."""

    def __init__(self, topic: str, settings: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.settings = settings
        self.changes: list[tuple[float, int]] = []  # (time.monotonic(), partitions owned)
        self.stop_flag = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self.error = exc

    async def _main(self) -> None:
        async with Consumer(self.topic, **self.settings) as consumer:
            owned = -1
            while not self.stop_flag.is_set():
                await consumer.poll(timeout=0.2)
                if len(consumer.assignment()) != owned:
                    owned = len(consumer.assignment())
                    self.changes.append((time.monotonic(), owned))


PROTOCOLS = pytest.mark.parametrize("protocol", ["classic", "consumer"])
# metrics() keys (the same for both protocols): state, poll lapses, leave delay; and heartbeats a
# second (classic: heartbeat_interval_ms=1000 here; consumer: the test broker's 500 ms)
METRIC = {
    "classic": ("group_state", "STABLE", "poll_interval_lapses", "last_leave_delay_seconds", 1.0),
    "consumer": ("group_state", "STABLE", "poll_interval_lapses", "last_leave_delay_seconds", 2.0),
}


# The stall monitor's threshold is stall_warning_ratio x session_timeout_ms, the client setting;
# with the consumer protocol the broker owns the session timeout (10 s here) and the client keeps
# Kafka's default 45 s, so a 16 s block stays under the 22.5 s threshold: no stall is counted.
STALLS_SEEN = {"classic": True, "consumer": False}


def _settings(broker: Any, group: str, protocol: str = "classic", **extra: Any) -> dict[str, Any]:
    timing: dict[str, Any] = dict(session_timeout_ms=6000, heartbeat_interval_ms=1000)
    if protocol == "consumer":  # the broker owns the session timeout and the heartbeat interval
        timing = dict(group_protocol="consumer")
    return dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                enable_auto_commit=False, **timing, **extra)


async def _run_blocked_member(broker: Any, topic: str, group: str, mode: str, max_poll_ms: int,
                              off_loop: bool = False, protocol: str = "classic"
                              ) -> tuple[dict[str, Any], list[tuple[float, int]], float]:
    """Returns A's metrics after the block, B's partition-count changes since the group settled,
    and when the block began."""
    create_topic(broker, topic, partitions=PARTITIONS)
    produce(broker, topic, [(None, b"x")] * 100)
    observer = Observer(topic, _settings(broker, group, protocol, max_poll_interval_ms=120000))
    a = Consumer(topic, heartbeat_mode=mode, **_settings(broker, group, protocol, max_poll_interval_ms=max_poll_ms))
    observer.start()
    try:
        async with a:
            await poll_until(a, lambda _: len(a.assignment()) == PARTITIONS // 2
                             and bool(observer.changes) and observer.changes[-1][1] == PARTITIONS // 2,
                             timeout=60)
            settled = len(observer.changes)
            blocked_at = time.monotonic()
            if off_loop:
                await a.run_blocking(time.sleep, BLOCK)
            else:
                time.sleep(BLOCK)  # noqa: ASYNC251 -- the point: a handler that blocks the event loop
            await a.poll(timeout=0.5)
            metrics = a.metrics()
            # Unblocked, the consumer goes on: it still owns partitions, or rejoins and gets some back.
            await poll_until(a, lambda _: len(a.assignment()) > 0, timeout=60)
            return metrics, observer.changes[settled:], blocked_at
    finally:
        observer.stop_flag.set()
        await asyncio.to_thread(observer.join, 30)
        if observer.error:
            raise observer.error


@PROTOCOLS
async def test_thread_mode_keeps_partitions_through_a_blocked_loop(apache_kafka_broker, unique_topic, unique_group,
                                                                   protocol):
    metrics, changes, _ = await _run_blocked_member(apache_kafka_broker, unique_topic, unique_group,
                                                    "thread", max_poll_ms=60000, protocol=protocol)
    state, stable, _, _, per_second = METRIC[protocol]
    assert changes == [], f"the other member saw a rebalance: {changes}"
    assert metrics[state] == stable
    assert metrics["heartbeats_sent"] >= BLOCK * per_second - 2  # at the interval while the loop was blocked
    if STALLS_SEEN[protocol]:
        assert metrics["loop_stalls"] == 1
        assert metrics["longest_loop_stall_seconds"] >= BLOCK - 1


@PROTOCOLS
async def test_task_mode_loses_partitions_and_warns(apache_kafka_broker, unique_topic, unique_group, caplog,
                                                    protocol):
    caplog.set_level(logging.WARNING, logger="aiokafka_lite.consumer")
    metrics, changes, blocked_at = await _run_blocked_member(apache_kafka_broker, unique_topic, unique_group,
                                                             "task", max_poll_ms=60000, protocol=protocol)
    assert any(owned == PARTITIONS for _, owned in changes), f"no rebalance seen: {changes}"
    took_over = next(t for t, owned in changes if owned == PARTITIONS) - blocked_at
    assert took_over < BLOCK, took_over  # the session expired while A was blocked
    if STALLS_SEEN[protocol]:
        assert metrics["loop_stalls"] == 1
        assert any("event loop was blocked" in r.getMessage() for r in caplog.records)


@PROTOCOLS
async def test_thread_mode_still_leaves_at_the_poll_deadline(apache_kafka_broker, unique_topic, unique_group,
                                                             protocol, caplog):
    caplog.set_level(logging.WARNING, logger="aiokafka_lite.consumer")
    metrics, changes, blocked_at = await _run_blocked_member(apache_kafka_broker, unique_topic, unique_group,
                                                             "thread", max_poll_ms=10000, protocol=protocol)
    _, _, lapses, leave_delay, _ = METRIC[protocol]
    assert any(owned == PARTITIONS for _, owned in changes), f"no hand-over seen: {changes}"
    took_over = next(t for t, owned in changes if owned == PARTITIONS) - blocked_at
    assert 10.0 <= took_over < 10.0 + 5.0, took_over
    assert metrics[lapses] == 1
    assert metrics[leave_delay] < 0.1
    assert any("exceeds max_poll_interval_ms=10000" in r.getMessage() for r in caplog.records)


async def test_run_blocking_keeps_heartbeats_flowing_in_task_mode(apache_kafka_broker, unique_topic,
                                                                 unique_group):
    metrics, changes, _ = await _run_blocked_member(apache_kafka_broker, unique_topic, unique_group,
                                                    "task", max_poll_ms=60000, off_loop=True)
    assert changes == [], f"the other member saw a rebalance: {changes}"
    assert metrics["group_state"] == "STABLE"
    assert metrics["loop_stalls"] == 0
