"""aiokafka-lite: ``await consumer.poll_arrow()`` in a loop; each batch's values are touched column-wise
(pyarrow's ``binary_length`` summed), the Arrow way of reading every record."""

from __future__ import annotations

import asyncio

import pyarrow as pa
import pyarrow.compute as pc

from aiokafka_lite import TopicPartition
from benchmarks.clients._harness import Result, Spec, Stopwatch, run
from benchmarks.clients.lite import extra, make_consumer


async def _consume(spec: Spec, watch: Stopwatch) -> Result:
    consumer = make_consumer(spec)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for topic, p in spec.assignment()])
        count = payload = 0
        while count < spec.records:
            batch = pa.record_batch(await consumer.poll_arrow(timeout=1.0))
            watch.first(batch.num_rows)
            if batch.num_rows:
                payload += pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0
            count += batch.num_rows
        watch.stop()
    finally:
        await consumer.close()
    return count, payload


def consume(spec: Spec, watch: Stopwatch) -> Result:
    return asyncio.run(_consume(spec, watch))


if __name__ == "__main__":
    run(consume, extra)
