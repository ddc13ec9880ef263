"""One consumer reads N records, timed from the first record to the last (the join, the offset
lookup and the first fetch's wait are not in it): what many_partitions, processing --rates and tls
each measure."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


@dataclass
class TimedRead:
    records: int
    started: float  # time.perf_counter() when the read began
    first: float | None  # when the first records arrived (None: none did)
    last: float  # when the last ones did

    @property
    def records_per_s(self) -> float | None:
        return self.records / (self.last - self.first) if self.first is not None and self.last > self.first else None

    @property
    def first_record_s(self) -> float | None:
        return None if self.first is None else self.first - self.started


async def read_timed(consumer: Any, expected: int, *, poll_timeout: float = 1.0,
                     give_up: float | None = None) -> TimedRead:
    """``consumer.poll()`` until ``expected`` records (or ``give_up`` seconds passed)."""
    started = time.perf_counter()
    timed = TimedRead(0, started, None, started)
    while timed.records < expected and (give_up is None or time.perf_counter() - started < give_up):
        records = await consumer.poll(timeout=poll_timeout)
        if records:
            timed.last = time.perf_counter()
            timed.first = timed.last if timed.first is None else timed.first
            timed.records += len(records)
    return timed
