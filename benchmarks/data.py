"""The data sets, produced once per benchmark run with a reference producer (librdkafka).

Throughput: five topics of 6 partitions (``SET_NAMES``; ``datasets(records, names)`` picks some).
Scale: the same 100 B records spread over 200 topics of 6 partitions (1,200 partitions), consumed
with all 1,200 assigned by hand.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from aiokafka_lite.testing.helpers import create_topic, produce

PARTITIONS = 6
SCALE_TOPICS = 200
SET_NAMES = ("100 B", "1 KB", "10 KB", "100 B lz4", "100 B zstd")  # datasets()' names, in its order
SIX_PARTITIONS = SET_NAMES[0]  # the scale part's 6-partition reference, when the throughput part made it


@dataclass(frozen=True)
class Dataset:
    name: str  # the label in tables and charts
    topics: tuple[str, ...]
    records: int  # over all topics
    value_size: int
    compression: str = "none"
    partitions: int = PARTITIONS  # per topic
    # Records per poll()/consume()/getmany() call, for every client. 10,000 x 1 KB is 10 MB a call;
    # 10,000 x 10 KB would be 100 MB, held at once by a client that fills its batch (confluent-kafka:
    # 350 MB peak RSS), and more than a whole --quick 10 KB set (see benchmarks/README.md).
    batch: int = 10_000

    @property
    def total_partitions(self) -> int:
        return len(self.topics) * self.partitions

    def describe(self) -> str:
        where = self.topics[0] if len(self.topics) == 1 else f"{len(self.topics)} topics {self.topics[0]}..."
        return f"{self.records:,} x {self.value_size} B ({self.compression}) to {where}"


def datasets(records: int, names: Iterable[str] | None = None) -> list[Dataset]:
    """The throughput data sets (all, or those in ``names``, always in ``SET_NAMES``' order), with
    fresh topic names: 100 B x N, 1 KB x N/5, 10 KB x N/25 (twice the 1 KB set's bytes: it is read
    long enough to time; 1,000 records a call, the 1 KB set's 10 MB), and 100 B x N compressed with
    lz4 and with zstd."""
    tag = uuid.uuid4().hex[:6]
    sets = [
        Dataset("100 B", (f"bench-100b-{tag}",), records, 100),
        Dataset("1 KB", (f"bench-1kb-{tag}",), max(records // 5, 1), 1000),
        Dataset("10 KB", (f"bench-10kb-{tag}",), max(records // 25, 1), 10_000, batch=1000),
        Dataset("100 B lz4", (f"bench-100b-lz4-{tag}",), records, 100, "lz4"),
        Dataset("100 B zstd", (f"bench-100b-zstd-{tag}",), records, 100, "zstd"),
    ]
    if names is None:
        return sets
    wanted = set(names)
    if unknown := wanted - set(SET_NAMES):
        raise ValueError(f"no data set named {', '.join(sorted(unknown))}; the names are {', '.join(SET_NAMES)}")
    return [dataset for dataset in sets if dataset.name in wanted]


def scale_datasets(records: int, six: Dataset | None = None) -> list[Dataset]:
    """The 6-partition 100 B case (``six`` if the throughput part produced it already) and the same
    records over 200 topics x 6 partitions: the scale case is measured against the first in one run."""
    tag = uuid.uuid4().hex[:6]
    six = six or Dataset(SIX_PARTITIONS, (f"bench-100b-{tag}",), records, 100)
    topics = tuple(f"bench-scale-{tag}-{i:03d}" for i in range(SCALE_TOPICS))
    wide = Dataset(f"100 B, {len(topics) * PARTITIONS:,} partitions", topics, records, 100)
    return [six, wide]


def _values(count: int, size: int) -> Iterator[tuple[None, bytes]]:
    """Half text with a counter, half random hex: compresses about as well as real JSON-ish data."""
    noise = os.urandom(size).hex().encode()
    for i in range(count):
        head = b'{"seq":%09d,"k":"' % i
        start = (i * 7) % size
        body = (noise[start:] + noise)[:size - len(head) - 2]
        yield None, head + body + b'"}'


def produce_dataset(bootstrap: str, dataset: Dataset) -> float:
    """Create the topics and fill them round-robin over their partitions; returns the seconds it took.

    Each topic gets an equal share of the records, round-robin over its partitions (one producer per
    topic: the helper produces to one topic)."""
    began = time.monotonic()
    count = len(dataset.topics)
    for topic in dataset.topics:
        create_topic(bootstrap, topic, partitions=dataset.partitions)
    for t, topic in enumerate(dataset.topics):
        share = dataset.records // count + (1 if t < dataset.records % count else 0)
        records = ({"key": key, "value": value, "partition": i % dataset.partitions}
                   for i, (key, value) in enumerate(_values(share, dataset.value_size)))
        # Idempotent: a retried batch must neither repeat records nor reorder them (produce() checks).
        produce(bootstrap, topic, records, compression=dataset.compression, timeout=120.0,
                linger_ms=20, batch_size=1_000_000, enable_idempotence=True)
    return time.monotonic() - began
