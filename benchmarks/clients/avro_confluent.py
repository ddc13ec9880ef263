"""confluent-kafka with Avro values (issue 42's benchmark, ``benchmarks.avro``): ``consume(num_messages=...)``
in a loop, each message's value through ``confluent_kafka.schema_registry.avro.AvroDeserializer``
with a ``SerializationContext``, as confluent-kafka's own Avro consumer example decodes.

The consumer's settings are benchmarks/clients/confluent.py's (the row's options: the tuned
``fetch.queue.backoff.ms``). Every value's ``id`` field is summed and checked against the sum the
parent expects. ``spec.options["avro"]``: ``registry`` and ``id_sum``; the rest is librdkafka's.

Registry requests are counted by wrapping the registry client's REST client's ``send_request`` (the
HTTP requests sent; private, benchmark-only). Its ``get_schema()`` calls are not counted: the
deserializer calls it for every message (a cache hit), so a wrapper there would slow its hot path.
"""

from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import replace
from typing import Any

import confluent_kafka

from aiokafka_lite.testing.schema_registry import confluent_client_config
from benchmarks.clients._harness import Result, Spec, Stopwatch, run
from benchmarks.clients.confluent import assignment, config
from benchmarks.clients.confluent import extra as confluent_extra

with warnings.catch_warnings():  # authlib warns of its own httpx module on import
    warnings.simplefilter("ignore")
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

_counts: dict[str, Counter[str]] = {"http_requests": Counter()}


def count_requests(client: Any) -> None:
    rest = client._rest_client
    send = rest.send_request

    def counted_send(url: str, method: str, *args: Any, **kwargs: Any) -> Any:
        _counts["http_requests"][f"{method} {url}"] += 1
        return send(url, method, *args, **kwargs)

    rest.send_request = counted_send


def consume(spec: Spec, watch: Stopwatch) -> Result:
    settings = dict(spec.options)
    avro = settings.pop("avro")
    registry = SchemaRegistryClient(confluent_client_config(avro["registry"]))
    count_requests(registry)
    deserialize = AvroDeserializer(registry)
    consumer = confluent_kafka.Consumer(config(replace(spec, options=settings)))
    count = ids = 0
    try:
        consumer.assign(assignment(spec))
        while count < spec.records:
            messages = consumer.consume(num_messages=spec.batch, timeout=1.0)
            for message in messages:
                if message.error():
                    raise RuntimeError(message.error())
                # message.topic() is typed str | None; a fetched message always has its topic
                value = deserialize(message.value(), SerializationContext(message.topic(), MessageField.VALUE))  # type: ignore[arg-type]
                ids += value["id"]
            # After decoding, as ours: its poll() hands out the first batch decoded (and the first
            # lookup done), so neither window holds the first batch's decoding or the lookup.
            watch.first(len(messages))
            count += len(messages)
        watch.stop()
    finally:
        consumer.close()
    if ids != avro["id_sum"]:
        raise SystemExit(f"the decoded ids sum to {ids}, not {avro['id_sum']}: not every record was decoded once")
    return count, 0


def extra(spec: Spec) -> dict[str, Any]:
    options = {key: value for key, value in spec.options.items() if key != "avro"}
    return {**confluent_extra(replace(spec, options=options)), "ids_checked": True,
            "registry": {name: dict(counter) for name, counter in _counts.items()}}


if __name__ == "__main__":
    run(consume, extra)
