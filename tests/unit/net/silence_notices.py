"""The early notice a silent peer gets (issue 41, "say why, early"): reading it from the log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.errors import KafkaError


def notices(caplog: pytest.LogCaptureFixture, level: int, notice: str) -> list[str]:
    """Our log records at ``level`` that contain ``notice``."""
    return [r.getMessage() for r in caplog.records
            if r.levelno == level and r.name.startswith("aiokafka_lite") and notice in r.getMessage()]


async def said_within(caplog: pytest.LogCaptureFixture, seconds: float, notice: str) -> float:
    """How long until a WARNING containing ``notice`` was logged; fails after ``seconds``."""
    began = time.monotonic()
    while not notices(caplog, logging.WARNING, notice):
        if time.monotonic() - began > seconds:
            raise AssertionError(f"no WARNING saying {notice!r} within {seconds} s: "
                                 f"{[r.getMessage() for r in caplog.records]}")
        await asyncio.sleep(0.05)
    return time.monotonic() - began


async def until_said(caplog: pytest.LogCaptureFixture, times: int, notice: str, seconds: float) -> None:
    """Until ``notice`` was logged ``times`` times, at any level: that many attempts went unanswered
    long enough to be told, however long each attempt took to get there (fails after ``seconds``)."""
    began = time.monotonic()
    while sum(len(notices(caplog, level, notice)) for level in (logging.DEBUG, logging.WARNING)) < times:
        if time.monotonic() - began > seconds:
            raise AssertionError(f"{notice!r} not said {times} times within {seconds} s: "
                                 f"{[r.getMessage() for r in caplog.records]}")
        await asyncio.sleep(0.05)


async def said_once_over_three_tries(caplog: pytest.LogCaptureFixture, consumer: Consumer, notice: str) -> None:
    """Start ``consumer`` against a silent peer until ``notice`` was told for three tries, close it, and
    check it was said once at WARNING, the other tries at DEBUG, and nothing else at WARNING or above."""
    starting = asyncio.create_task(consumer.start(timeout=60.0))
    try:
        await until_said(caplog, 3, notice, seconds=30.0)
    finally:
        await consumer.close()
        with contextlib.suppress(KafkaError):
            await starting
    assert len(notices(caplog, logging.WARNING, notice)) == 1, [r.getMessage() for r in caplog.records]
    assert len(notices(caplog, logging.DEBUG, notice)) >= 2, [r.getMessage() for r in caplog.records]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == \
        notices(caplog, logging.WARNING, notice)
