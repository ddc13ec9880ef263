"""confluent-kafka (librdkafka): ``consume(num_messages=...)`` in a loop, as its docs advise for speed.

librdkafka's defaults unless the row sets options: the "tuned" rows set ``fetch.queue.backoff.ms``.
librdkafka stops fetching a partition for that long (default 1 s) once its local queue holds
``queued.min.messages`` (default 100k), so a reader that drains fast can sit out whole seconds.
"""

from __future__ import annotations

import uuid
from typing import Any

import confluent_kafka

from benchmarks.clients._harness import Result, Spec, Stopwatch, run


def config(spec: Spec) -> dict[str, Any]:
    """The consumer settings every confluent-kafka row shares, plus the row's own options."""
    return {
        "bootstrap.servers": spec.bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",  # required even with manual assignment; never joined
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.max.bytes": spec.fetch_max_bytes,
        "max.partition.fetch.bytes": spec.max_partition_fetch_bytes,
        **spec.options,
    }


def assignment(spec: Spec) -> list[confluent_kafka.TopicPartition]:
    return [confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for topic, p in spec.assignment()]


def touch(messages: list[Any]) -> int:
    """The payload bytes of a batch (every record's value read once); raises on an error message."""
    payload = 0
    for message in messages:
        if message.error():
            raise RuntimeError(message.error())
        payload += len(message.value() or b"")
    return payload


def consume(spec: Spec, watch: Stopwatch) -> Result:
    consumer = confluent_kafka.Consumer(config(spec))
    try:
        consumer.assign(assignment(spec))
        count = payload = 0
        while count < spec.records:
            messages = consumer.consume(num_messages=spec.batch, timeout=1.0)
            watch.first(len(messages))
            payload += touch(messages)
            count += len(messages)
        watch.stop()
    finally:
        consumer.close()
    return count, payload


def extra(spec: Spec) -> dict[str, Any]:
    return {"version": confluent_kafka.version()[0], "librdkafka": confluent_kafka.libversion()[0],
            "options": spec.options}


if __name__ == "__main__":
    run(consume, extra)
