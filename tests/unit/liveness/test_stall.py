"""The event-loop stall monitor: thresholds, counts, the warning, and a real blocked loop."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from aiokafka_lite.liveness.stall import NOISE, StallMonitor


def test_noise_is_ignored_and_short_stalls_are_measured_without_warning(caplog):
    monitor = StallMonitor(session_timeout=10.0, warning_ratio=0.5, heartbeat_mode="task")
    monitor.observe(NOISE / 2)
    assert monitor.longest_stall == 0.0
    assert monitor.last_stall is None
    with caplog.at_level(logging.WARNING, logger="aiokafka_lite.consumer"):
        monitor.observe(2.0)
    assert monitor.longest_stall == 2.0
    assert monitor.stalls == 0
    assert not caplog.records


@pytest.mark.parametrize(("mode", "risk"), [("task", "session_timeout_ms=10000"),
                                            ("thread", "heartbeat thread kept")])
def test_a_stall_past_the_threshold_warns_with_risk_and_remedies(caplog, mode, risk):
    monitor = StallMonitor(session_timeout=10.0, warning_ratio=0.5, heartbeat_mode=mode)
    with caplog.at_level(logging.WARNING, logger="aiokafka_lite.consumer"):
        monitor.observe(5.0)
        monitor.observe(7.5)
    assert monitor.stalls == 2
    assert monitor.longest_stall == 7.5
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "blocked for 7.5 s" in messages[1]
    assert risk in messages[1]
    assert "run_blocking" in messages[1]
    assert "heartbeat_mode='thread'" in messages[1]


@pytest.mark.asyncio
async def test_the_monitor_task_measures_a_real_block_and_stops_cleanly():
    monitor = StallMonitor(session_timeout=1.0, warning_ratio=0.5, heartbeat_mode="task")
    monitor.start()
    await asyncio.sleep(0.1)
    time.sleep(1.2)  # noqa: ASYNC251 -- block the loop on purpose
    await asyncio.sleep(0.1)
    await monitor.stop()
    assert monitor.stalls == 1
    assert 0.5 <= monitor.longest_stall <= 1.5
    await monitor.stop()  # idempotent
