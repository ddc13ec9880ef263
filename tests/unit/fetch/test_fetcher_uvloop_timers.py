"""uvloop's timers run on a millisecond clock: ``call_later(0.0104)`` fires at 10 ms, while
``loop.time()`` is still 0.4 ms short of ``now + 0.0104`` (in a measurement here, 754 of 2,000
random delays fired with the loop clock short of their end; none on asyncio). Code that arms a
timer for a backoff and then checks the clock against the backoff's end must take the timer's
firing as the end. A whole-suite uvloop run caught the fetcher waiting for the next poll() pass.

Each test runs its own uvloop loop (the suite's loop is asyncio unless --event-loop=uvloop)."""

from __future__ import annotations

import asyncio

import pytest

from aiokafka_lite.errors import KafkaConnectionError
from aiokafka_lite.protocol.messages import FETCH

from .test_fetcher import T0, FakeCluster, ScriptedFetches, assigned, batch, make_fetcher, offsets_of, partition, settle

uvloop = pytest.importorskip("uvloop")


def test_uvloop_fires_a_timer_before_its_loop_clock_reaches_the_end() -> None:
    """The condition itself, uvloop's alone: the reason for the fetcher's rule below."""

    async def short_of_the_end() -> float:
        loop = asyncio.get_running_loop()
        end = loop.time() + 0.0104
        fired = loop.create_future()
        loop.call_later(0.0104, lambda: fired.set_result(loop.time()))
        return end - await fired

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert max(runner.run(short_of_the_end()) for _ in range(20)) > 0


def test_a_retry_timer_that_fires_before_the_loop_clock_reaches_the_backoffs_end_still_fetches() -> None:
    async def scenario() -> list[int]:
        cluster = FakeCluster({T0: 1})
        script = ScriptedFetches()
        script.add(T0, partition(0, batch(0, 2)))
        cluster.handlers[FETCH.key] = script
        cluster.connect_error = KafkaConnectionError("node 1 went away")
        # base == max: a static backoff, no jitter (_net/backoff.py)
        fetcher = make_fetcher(cluster, assigned(T0), retry_backoff=0.0104, retry_backoff_max=0.0104)
        try:
            fetcher.send_fetches()
            await fetcher.wait_for_data(2.0)
            cluster.connect_error = None
            await settle(fetcher)
            return offsets_of(fetcher.fetched_records(100).get(T0, []))
        finally:
            await fetcher.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert runner.run(scenario()) == [0, 1]
