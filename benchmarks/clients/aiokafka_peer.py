"""aiokafka with its C extension: ``await consumer.getmany()`` in a loop, as its docs advise for speed."""

from __future__ import annotations

import asyncio
from typing import Any

import aiokafka
from aiokafka.record import default_records

from benchmarks.clients._harness import Result, Spec, Stopwatch, run


async def _consume(spec: Spec, watch: Stopwatch) -> Result:
    consumer = aiokafka.AIOKafkaConsumer(
        bootstrap_servers=spec.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
        fetch_max_bytes=spec.fetch_max_bytes, max_partition_fetch_bytes=spec.max_partition_fetch_bytes)
    await consumer.start()
    try:
        consumer.assign([aiokafka.TopicPartition(topic, p) for topic, p in spec.assignment()])
        count = payload = 0
        while count < spec.records:
            batches = await consumer.getmany(timeout_ms=1000, max_records=spec.batch)
            watch.first(sum(map(len, batches.values())))
            for messages in batches.values():
                for message in messages:
                    payload += len(message.value)
                count += len(messages)
        watch.stop()
    finally:
        await consumer.stop()
    return count, payload


def consume(spec: Spec, watch: Stopwatch) -> Result:
    return asyncio.run(_consume(spec, watch))


def _extra(spec: Spec) -> dict[str, Any]:
    c_extension = default_records.DefaultRecordBatch.__module__.startswith("aiokafka.record._crecords")
    return {"version": aiokafka.__version__, "c_extension": c_extension}


if __name__ == "__main__":
    run(consume, _extra)
