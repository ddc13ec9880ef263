"""The consumer inside anyio task groups and cancel scopes (asyncio backend), and on uvloop."""

from __future__ import annotations

import asyncio
import time

import anyio
import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import poll_until


def _settings(broker, group):
    return dict(bootstrap_servers=broker.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=1000)


@pytest.mark.asyncio
async def test_consumer_in_an_anyio_task_group_and_cancel_scopes(apache_kafka_broker, unique_topic, unique_group):
    create_topic(apache_kafka_broker, unique_topic, partitions=2)
    produce(apache_kafka_broker, unique_topic, [(None, f"v{i}") for i in range(200)])
    consumer = Consumer(unique_topic, **_settings(apache_kafka_broker, unique_group))
    got: list = []
    async with consumer:
        all_in = anyio.Event()
        async with anyio.create_task_group() as tg:
            async def drain() -> None:
                while True:
                    got.extend(await consumer.poll(timeout=0.2))
                    if len(got) >= 200:
                        all_in.set()

            tg.start_soon(drain)
            with anyio.fail_after(60):
                await all_in.wait()
            tg.cancel_scope.cancel()  # cancels the polling task mid-poll
        assert len(got) == len({(r.partition, r.offset) for r in got}) == 200
        # A poll cancelled by an anyio deadline leaves the consumer usable and the poll clock stamped.
        with anyio.move_on_after(0.05):
            await consumer.poll(timeout=5.0)
        assert consumer.metrics()["seconds_since_last_poll"] < 1.0
        produce(apache_kafka_broker, unique_topic, [(None, b"later")] * 10)
        more = await poll_until(consumer, lambda records: len(records) >= 10, timeout=30)
        assert {r.value for r in more} == {b"later"}
        await consumer.commit()
        assert consumer.metrics()["group_state"] == "STABLE"


def test_consume_and_watchdog_on_uvloop(apache_kafka_broker, unique_topic, unique_group):
    """Outside pytest-asyncio: the whole life cycle on a uvloop loop, including a poll lapse."""
    import uvloop

    create_topic(apache_kafka_broker, unique_topic, partitions=2)
    produce(apache_kafka_broker, unique_topic, [(None, f"v{i}") for i in range(100)])

    async def main() -> tuple[int, dict]:
        assert "uvloop" in type(asyncio.get_running_loop()).__module__
        async with Consumer(unique_topic, max_poll_interval_ms=2000,
                            **_settings(apache_kafka_broker, unique_group)) as consumer:
            records = await poll_until(consumer, lambda got: len(got) >= 100, timeout=60)
            started = time.monotonic()
            while consumer.metrics()["poll_interval_lapses"] == 0:
                assert time.monotonic() - started < 10
                await asyncio.sleep(0.1)
            await poll_until(consumer, lambda _: consumer.metrics()["group_state"] == "STABLE"
                             and bool(consumer.assignment()), timeout=30)
            return len(records), consumer.metrics()

    count, metrics = uvloop.run(main())
    assert count == 100
    assert metrics["last_leave_delay_seconds"] < 0.1
