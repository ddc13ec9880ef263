"""aiokafka-lite: ``await consumer.poll()`` in a loop, manual assignment, on asyncio or uvloop.

The record decoder is chosen by the environment (``AIOKAFKA_LITE_NO_NATIVE``, set per row by
``throughput.CLIENTS``); the one that actually ran is in the JSON (``decoder``, and ``why_python``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import aiokafka_lite
from aiokafka_lite import Consumer, ConsumerRecords, TopicPartition
from aiokafka_lite.protocol import native
from benchmarks.clients._harness import Result, Spec, Stopwatch, run


def make_consumer(spec: Spec) -> Consumer:
    return Consumer(bootstrap_servers=spec.bootstrap, group_id=None, enable_auto_commit=False,
                    auto_offset_reset="earliest", max_poll_records=spec.batch, fetch_max_bytes=spec.fetch_max_bytes,
                    max_partition_fetch_bytes=spec.max_partition_fetch_bytes, **spec.options)


# One poll: how many records arrived, and a function reading them all (returning their value bytes).
PollStep = Callable[[Consumer], Awaitable[tuple[int, Callable[[], int]]]]


async def poll_loop(spec: Spec, watch: Stopwatch, poll_once: PollStep) -> Result:
    """Assign the benchmark's partitions and poll until every record was read (shared by lite_arrow)."""
    consumer = make_consumer(spec)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for topic, p in spec.assignment()])
        count = payload = 0
        while count < spec.records:
            arrived, read = await poll_once(consumer)
            watch.first(arrived)
            payload += read()
            count += arrived
        watch.stop()
    finally:
        await consumer.close()
    return count, payload


def _value_bytes(batch: ConsumerRecords) -> int:
    payload = 0
    for record in batch:
        payload += len(record.value)
    return payload


async def _poll_records(consumer: Consumer) -> tuple[int, Callable[[], int]]:
    batch = await consumer.poll(timeout=1.0)
    return len(batch), partial(_value_bytes, batch)


def consume(spec: Spec, watch: Stopwatch) -> Result:
    if spec.uvloop:
        import uvloop

        return uvloop.run(poll_loop(spec, watch, _poll_records))
    return asyncio.run(poll_loop(spec, watch, _poll_records))


def extra(spec: Spec) -> dict[str, Any]:
    loop = "uvloop" if "uvloop" in sys.modules else "asyncio"  # the loop that ran
    # Where the extension came from: an editable install may load another checkout's build.
    built = getattr(native.active, "__file__", None)
    foreign = built is not None and os.path.dirname(built) not in aiokafka_lite.__path__
    return {"loop": loop, "decoder": native.decoder(), "why_python": native.why_python(), "native_file": built,
            "native_from_other_checkout": foreign, "package": aiokafka_lite.__path__[0]}


if __name__ == "__main__":
    run(consume, extra)
