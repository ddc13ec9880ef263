"""confluent-kafka (librdkafka): ``consume(num_messages=...)`` in a loop, as its docs advise for speed."""

from __future__ import annotations

import uuid
from typing import Any

import confluent_kafka

from benchmarks.clients._harness import Result, Spec, Stopwatch, run


def consume(spec: Spec, watch: Stopwatch) -> Result:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": spec.bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",  # required even with manual assignment; never joined
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.max.bytes": spec.fetch_max_bytes,
        "max.partition.fetch.bytes": spec.max_partition_fetch_bytes,
        # librdkafka stops fetching a partition for fetch.queue.backoff.ms (default 1 s) once its
        # local queue holds queued.min.messages (default 100k); a reader that drains fast should
        # not sit out a whole second, so keep the pause short.
        "fetch.queue.backoff.ms": 10,
    })
    try:
        consumer.assign([confluent_kafka.TopicPartition(spec.topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in range(spec.partitions)])
        count = payload = 0
        while count < spec.records:
            messages = consumer.consume(num_messages=spec.batch, timeout=1.0)
            watch.first(len(messages))
            for message in messages:
                if message.error():
                    raise RuntimeError(message.error())
                payload += len(message.value() or b"")
                count += 1
        watch.stop()
    finally:
        consumer.close()
    return count, payload


def _extra() -> dict[str, Any]:
    return {"version": confluent_kafka.version()[0], "librdkafka": confluent_kafka.libversion()[0]}


if __name__ == "__main__":
    run(consume, _extra)
