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

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.schema_registry import AvroDeserializer, SchemaRegistryClient
from benchmarks.clients._harness import Result, Spec, Stopwatch, run
from benchmarks.clients.avro_lite import count_requests
from benchmarks.clients.avro_lite import extra as avro_extra


async def read_all(spec: Spec, watch: Stopwatch) -> Result:
    settings = dict(spec.options)
    avro = settings.pop("avro")
    registry = SchemaRegistryClient(avro["registry"])
    count_requests(registry)
    deserializer = AvroDeserializer(registry, reader_schema=avro["reader_schema"])
    consumer = Consumer(bootstrap_servers=spec.bootstrap, group_id=None, enable_auto_commit=False,
                        auto_offset_reset="earliest", max_poll_records=spec.batch,
                        fetch_max_bytes=spec.fetch_max_bytes, max_partition_fetch_bytes=spec.max_partition_fetch_bytes,
                        value_deserializer=deserializer, **settings)
    count = ids = 0
    try:
        await consumer.start()
        consumer.assign([TopicPartition(topic, p) for topic, p in spec.assignment()])
        while count < spec.records:
            batch = (await consumer.poll_arrow(timeout=1.0)).to_pyarrow()
            watch.first(batch.num_rows)
            if batch.num_rows:
                ids += pc.sum(pc.struct_field(batch.column("value"), "id")).as_py()
            count += batch.num_rows
        watch.stop()
    finally:
        try:
            await consumer.close()
        finally:
            await registry.aclose()
    if ids != avro["id_sum"]:
        raise SystemExit(f"the decoded ids sum to {ids}, not {avro['id_sum']}: not every record was decoded once")
    return count, 0


def consume(spec: Spec, watch: Stopwatch) -> Result:
    return asyncio.run(read_all(spec, watch))


def extra(spec: Spec) -> dict[str, Any]:
    return avro_extra(spec)


if __name__ == "__main__":
    run(consume, extra)
