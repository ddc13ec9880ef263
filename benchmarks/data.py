"""The data sets: topics of 6 partitions, produced once per benchmark run with a reference producer."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from aiokafka_lite.testing.helpers import create_topic, produce

PARTITIONS = 6


@dataclass(frozen=True)
class Dataset:
    name: str  # the label in tables and charts
    topic: str
    records: int
    value_size: int
    compression: str = "none"


def datasets(records: int) -> list[Dataset]:
    """100 B x N, 1 KB x N/5 and 100 B x N lz4-compressed (the issue's three cases); fresh topic names."""
    tag = uuid.uuid4().hex[:6]
    return [
        Dataset("100 B", f"bench-100b-{tag}", records, 100),
        Dataset("1 KB", f"bench-1kb-{tag}", max(records // 5, 1), 1000),
        Dataset("100 B lz4", f"bench-100b-lz4-{tag}", records, 100, "lz4"),
    ]


def _values(count: int, size: int) -> Iterator[tuple[None, bytes]]:
    """Half text with a counter, half random hex: compresses about as well as real JSON-ish data."""
    noise = os.urandom(size).hex().encode()
    for i in range(count):
        head = b'{"seq":%09d,"k":"' % i
        start = (i * 7) % size
        body = (noise[start:] + noise)[:size - len(head) - 2]
        yield None, head + body + b'"}'


def produce_dataset(bootstrap: str, dataset: Dataset) -> float:
    """Create the topic and fill it round-robin over its partitions; returns the seconds it took."""
    began = time.monotonic()
    create_topic(bootstrap, dataset.topic, partitions=PARTITIONS)
    records = ({"key": key, "value": value, "partition": i % PARTITIONS}
               for i, (key, value) in enumerate(_values(dataset.records, dataset.value_size)))
    produce(bootstrap, dataset.topic, records, compression=dataset.compression, timeout=120.0,
            linger_ms=20, batch_size=1_000_000)
    return time.monotonic() - began
