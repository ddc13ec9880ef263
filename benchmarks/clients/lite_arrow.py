"""aiokafka-lite: ``await consumer.poll_arrow()`` in a loop; each batch's values are touched column-wise
(pyarrow's ``binary_length`` summed), the Arrow way of reading every record."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc

from aiokafka_lite import Consumer
from benchmarks.clients._harness import Result, Spec, Stopwatch, run
from benchmarks.clients.lite import extra, poll_loop


def _value_bytes(batch: pa.RecordBatch) -> int:
    if not batch.num_rows:
        return 0
    return pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0


async def _poll_arrow(consumer: Consumer) -> tuple[int, Callable[[], int]]:
    batch = pa.record_batch(await consumer.poll_arrow(timeout=1.0))
    return batch.num_rows, partial(_value_bytes, batch)


def consume(spec: Spec, watch: Stopwatch) -> Result:
    return asyncio.run(poll_loop(spec, watch, _poll_arrow))


if __name__ == "__main__":
    run(consume, extra)
