"""aiokafka-lite with Avro values as Arrow columns (issue 42's benchmark, ``benchmarks.avro``):
``await consumer.poll_arrow()`` with ``value_deserializer=AvroDeserializer(client, reader_schema=...)``,
manual assignment.

The value column is the reader schema's struct, decoded by the native extension while poll() hands
the records out (``AIOKAFKA_LITE_NO_NATIVE=1``: fastavro's values built into it by pyarrow). The
column's ``id`` field is summed (pyarrow.compute) and checked against the sum the parent expects.
``spec.options["avro"]``: ``registry``, ``id_sum`` and ``reader_schema``; the rest are Consumer settings.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pyarrow.compute as pc

from aiokafka_lite import Consumer
from benchmarks.clients._harness import Result, Spec, Stopwatch, run
from benchmarks.clients.avro_lite import extra as avro_extra
from benchmarks.clients.avro_lite import read_all


async def poll_columns(consumer: Consumer) -> tuple[int, int]:
    batch = (await consumer.poll_arrow(timeout=1.0)).to_pyarrow()
    if not batch.num_rows:
        return 0, 0
    return batch.num_rows, pc.sum(pc.struct_field(batch.column("value"), "id")).as_py()


def consume(spec: Spec, watch: Stopwatch) -> Result:
    return asyncio.run(read_all(spec, watch, poll_columns, reader_schema=True))


def extra(spec: Spec) -> dict[str, Any]:
    return avro_extra(spec)


if __name__ == "__main__":
    run(consume, extra)
