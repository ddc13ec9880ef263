"""kafka-python: ``consumer.poll()`` in a loop (its blocking API; no event loop)."""

from __future__ import annotations

from typing import Any

import kafka
from kafka import codec

from benchmarks.clients._harness import Result, Skipped, Spec, Stopwatch, run

# The codecs kafka-python decodes only with an optional package: its check, and the package that
# makes it pass (gzip is built in). Not every environment has them (the bench extra installs lz4
# only), and without one kafka-python fails at its first compressed batch.
CODECS = {"snappy": (codec.has_snappy, "python-snappy"), "lz4": (codec.has_lz4, "lz4"),
          "zstd": (codec.has_zstd, "zstandard")}


def cannot_decode(compression: str) -> str | None:
    """Why kafka-python cannot read a topic compressed with ``compression`` here, or None if it can."""
    if compression not in CODECS:
        return None
    has, package = CODECS[compression]
    return None if has() else f"kafka-python decodes {compression} only with the {package} package, not installed here"


def consume(spec: Spec, watch: Stopwatch) -> Result:
    if reason := cannot_decode(spec.compression):
        raise Skipped(reason)
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
