"""aiokafka-lite with Avro values (issue 42's benchmark, ``benchmarks.avro``): ``await consumer.poll()``
with ``value_deserializer=AvroDeserializer(SchemaRegistryClient(url))``, manual assignment.

poll() hands out decoded values: the first poll() meets an id that is not prepared and awaits its
lookup itself. Every value's ``id`` field is summed and checked against the sum the parent expects,
so no record counts that was not decoded. ``spec.options["avro"]``: ``registry`` (the registry's
Confluent-compatible base URL) and ``id_sum``; the other options are Consumer settings.

The registry requests are counted twice, in this process: the deserializer's calls of the client's
``get_schema()`` (cache hits included) and the HTTP requests the client sent (its transport).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.schema_registry import AvroDeserializer, SchemaRegistryClient
from benchmarks.clients._harness import Result, Spec, Stopwatch, run
from benchmarks.clients.lite import extra as lite_extra

_counts: dict[str, Counter[str]] = {"get_schema_calls": Counter(), "http_requests": Counter()}


def count_requests(client: SchemaRegistryClient) -> None:
    """Count ``get_schema()`` calls by id and the HTTP requests sent by method and path (benchmark-only
    wrapping of the client's transport, a private attribute)."""
    get_schema = client.get_schema
    transport = client._transport
    send = transport.request

    async def counted_get_schema(schema_id: int, **kwargs: Any) -> Any:
        _counts["get_schema_calls"][str(schema_id)] += 1
        return await get_schema(schema_id, **kwargs)

    async def counted_send(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        _counts["http_requests"][f"{method} {path}"] += 1
        return await send(method, path, *args, **kwargs)

    client.get_schema = counted_get_schema  # type: ignore[method-assign]
    transport.request = counted_send  # type: ignore[method-assign]


# One poll: (records, the sum of their values' ids).
Poll = Callable[[Consumer], Awaitable[tuple[int, int]]]


async def read_all(spec: Spec, watch: Stopwatch, poll: Poll, *, reader_schema: bool = False) -> Result:
    """Read ``spec.records`` with ``poll``, then check the ids' sum (also avro_lite_arrow's loop)."""
    settings = dict(spec.options)
    avro = settings.pop("avro")
    registry = SchemaRegistryClient(avro["registry"])
    count_requests(registry)
    deserializer = AvroDeserializer(registry, reader_schema=avro["reader_schema"] if reader_schema else None)
    consumer = Consumer(bootstrap_servers=spec.bootstrap, group_id=None, enable_auto_commit=False,
                        auto_offset_reset="earliest", max_poll_records=spec.batch,
                        fetch_max_bytes=spec.fetch_max_bytes, max_partition_fetch_bytes=spec.max_partition_fetch_bytes,
                        value_deserializer=deserializer, **settings)
    count = ids = 0
    try:
        await consumer.start()
        consumer.assign([TopicPartition(topic, p) for topic, p in spec.assignment()])
        while count < spec.records:
            got, got_ids = await poll(consumer)
            watch.first(got)
            ids += got_ids
            count += got
        watch.stop()
    finally:
        try:
            await consumer.close()
        finally:
            await registry.aclose()
    if ids != avro["id_sum"]:
        raise SystemExit(f"the decoded ids sum to {ids}, not {avro['id_sum']}: not every record was decoded once")
    return count, 0  # payload bytes: the values handed out are decoded, not bytes


async def poll_records(consumer: Consumer) -> tuple[int, int]:
    batch = await consumer.poll(timeout=1.0)
    return len(batch), sum(record.value["id"] for record in batch)


def consume(spec: Spec, watch: Stopwatch) -> Result:
    return asyncio.run(read_all(spec, watch, poll_records))


def extra(spec: Spec) -> dict[str, Any]:
    return {**lite_extra(spec), "ids_checked": True,
            "registry": {name: dict(counter) for name, counter in _counts.items()}}


if __name__ == "__main__":
    run(consume, extra)
