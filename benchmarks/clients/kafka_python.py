"""kafka-python: ``consumer.poll()`` in a loop (its blocking API; no event loop)."""

from __future__ import annotations

from typing import Any

import kafka

from benchmarks.clients._harness import Result, Spec, Stopwatch, run


def consume(spec: Spec, watch: Stopwatch) -> Result:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=spec.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
        fetch_max_bytes=spec.fetch_max_bytes, max_partition_fetch_bytes=spec.max_partition_fetch_bytes,
        max_poll_records=spec.batch)
    try:
        consumer.assign([kafka.TopicPartition(topic, p) for topic, p in spec.assignment()])
        count = payload = 0
        while count < spec.records:
            batches = consumer.poll(timeout_ms=1000)
            watch.first(sum(map(len, batches.values())))
            for messages in batches.values():
                for message in messages:
                    payload += len(message.value)
                count += len(messages)
        watch.stop()
    finally:
        consumer.close()
    return count, payload


def _extra(spec: Spec) -> dict[str, Any]:
    return {"version": kafka.__version__}


if __name__ == "__main__":
    run(consume, _extra)
