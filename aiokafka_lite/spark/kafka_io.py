"""The source's I/O: offset look-ups on the driver, reading one offset range on an executor.

Spark calls a data source from plain (synchronous) Python, so each side drives its own event loop
with ``asyncio.Runner``: the loop lives as long as the consumer, and a generator can hand Arrow
batches to Spark between two ``poll_arrow()`` calls without a thread.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

from .._net.broker_identity import config_is_tansu
from ..config import ConsumerConfig
from ..consumer.consumer import Consumer
from ..errors import KafkaError, KafkaTimeoutError, OffsetOutOfRangeError
from ..structs import TopicPartition
from ..testing.tansu import DEVIATIONS
from .options import EARLIEST, LATEST, OffsetSpec, SourceOptions
from .value_format import AVRO, open_avro_deserializer

CLOSE_TIMEOUT = 10.0
log = logging.getLogger("aiokafka_lite.spark")


class DriverLookups:
    """A group-less consumer for metadata and ListOffsets, kept open across calls (one loop)."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._runner = asyncio.Runner()
        self._consumer: Consumer | None = None
        self._broker_checked = False
        self._pattern_warned = False

    def __enter__(self) -> DriverLookups:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, coro: Any) -> Any:
        if self._consumer is None:
            self._consumer = Consumer.from_properties(self._options.consumer_settings())
            self._runner.run(self._consumer.start())
        return self._runner.run(coro)

    def _live(self) -> Consumer:
        self._run(asyncio.sleep(0))  # starts the consumer on first use
        assert self._consumer is not None
        return self._consumer

    def partitions(self) -> list[TopicPartition]:
        """The partitions the subscription covers now.

        As in Spark's Kafka source, a subscribed or assigned topic (or an assigned partition) that
        does not exist is an error, while a pattern that matches no topic reads nothing: that is
        logged once (per read, or per streaming query), since it is most often a typo.
        """
        subscription = self._options.subscription
        if subscription.pattern is not None:
            return self._matching(subscription.pattern)
        named = subscription.topics or tuple(sorted({tp.topic for tp in subscription.partitions}))
        existing: dict[str, list[TopicPartition]] = self._run(_existing_partitions(self._live(), named))
        self._check_found("topic", named, [topic for topic in named if existing[topic]])
        if not subscription.partitions:
            return sorted(tp for topic in named for tp in existing[topic])
        known = {tp for tps in existing.values() for tp in tps}
        self._check_found("partition", [f"{tp.topic}-{tp.partition}" for tp in sorted(subscription.partitions)],
                          [f"{tp.topic}-{tp.partition}" for tp in sorted(known)])
        return list(subscription.partitions)

    def _matching(self, pattern: str) -> list[TopicPartition]:
        found: list[TopicPartition] = self._run(_matching_partitions(self._live(), pattern))
        if not found and not self._pattern_warned:
            self._pattern_warned = True
            log.warning("subscribePattern %r matches no topic on %s: the read returns no rows",
                        pattern, self._options.bootstrap_servers)
        return found

    def _check_found(self, kind: str, wanted: Sequence[str], found: Sequence[str]) -> None:
        present = set(found)
        missing = [name for name in wanted if name not in present]
        if missing:
            names = ", ".join(repr(name) for name in missing)
            what = f"{kind} {names} does" if len(missing) == 1 else f"{kind}s {names} do"
            raise UnknownTopicError(f"{what} not exist on {self._options.bootstrap_servers} "
                                    f"({self._options.subscription.describe()})")

    def resolve(self, tps: list[TopicPartition], spec: OffsetSpec) -> dict[TopicPartition, int]:
        """Concrete offsets for ``spec``: the sentinels -2/-1 become the log start / high watermark,
        timestamps the first offset at or after them (ListOffsets by time)."""
        wanted = spec.for_partitions(tps)
        if spec.by_timestamp:
            return self._by_timestamp(spec, wanted)
        earliest = [tp for tp, offset in wanted.items() if offset == EARLIEST]
        latest = [tp for tp, offset in wanted.items() if offset == LATEST]
        if earliest:
            wanted.update(self.beginning(earliest))
        if latest:
            wanted.update(self.end(latest))
        return wanted

    def _by_timestamp(self, spec: OffsetSpec, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        found = self._run(self._live().offsets_for_times(timestamps))
        unmatched = sorted(tp for tp, hit in found.items() if hit is None)
        if unmatched and spec.on_no_match == "error":
            names = ", ".join(f"{tp.topic}-{tp.partition} (timestamp {timestamps[tp]})" for tp in unmatched)
            raise NoOffsetForTimestampError(
                f"option {spec.option}: no record at or after the timestamp in {names}; set "
                "startingOffsetsByTimestampStrategy=latest to start there at the latest offset instead")
        offsets = {tp: hit.offset for tp, hit in found.items() if hit is not None}
        offsets.update(self.end(unmatched))
        return offsets

    def beginning(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        found: dict[TopicPartition, int] = self._run(self._live().beginning_offsets(tps))
        return found

    def end(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if not tps:
            return {}
        self._warn_if_end_offsets_are_wrong()
        found: dict[TopicPartition, int] = self._run(self._live().end_offsets(tps))
        return found

    def _warn_if_end_offsets_are_wrong(self) -> None:
        """Once per lookups object: reads up to "latest" silently miss records on Tansu; say so."""
        if self._broker_checked:
            return
        self._broker_checked = True
        config = ConsumerConfig.from_properties(self._options.consumer_settings())
        if self._run(config_is_tansu(config)):
            deviation = DEVIATIONS["list_offsets_latest"]
            log.warning("the broker at %s is Tansu: reads up to its latest offsets can miss records, "
                        "because its %s (aiokafka_lite.testing.tansu.DEVIATIONS[%r])",
                        self._options.bootstrap_servers, deviation.differs, deviation.name)

    def close(self) -> None:
        try:
            if self._consumer is not None:
                self._runner.run(self._consumer.close(timeout=CLOSE_TIMEOUT))
        finally:
            self._consumer = None
            self._runner.close()


async def _matching_partitions(consumer: Consumer, pattern: str) -> list[TopicPartition]:
    compiled = re.compile(pattern)
    topics = await consumer.list_topics()
    # Java's Pattern.matches(), which Spark's subscribePattern uses, matches the whole name.
    return sorted(tp for name, tps in topics.items() if compiled.fullmatch(name) for tp in tps)


async def _existing_partitions(consumer: Consumer, topics: tuple[str, ...]) -> dict[str, list[TopicPartition]]:
    return {topic: await consumer.partitions_for(topic) for topic in topics}


def read_range(options: SourceOptions, tp: TopicPartition, start: int, end: int) -> Iterator[Any]:
    """The records of ``tp`` with ``start <= offset < end`` (``start`` may be EARLIEST), as the
    ``pyarrow.RecordBatch`` of each ``poll_arrow()`` (columns of ``aiokafka_lite.arrow``).

    Offsets are not dense (transaction markers, compaction), so the read ends when the consumer's
    position reaches ``end``, not after ``end - start`` records. No progress for
    ``kafkaConsumer.pollTimeoutMs`` is an error rather than a silent short read.

    With ``valueFormat=avro`` the consumer's value deserializer is an ``AvroDeserializer`` with the
    reader schema, so the value column is its decoded data; its registry client is made and closed
    on the same loop as the consumer.
    """
    with asyncio.Runner() as runner:
        client, deserializer = (runner.run(open_avro_deserializer(options.value_format))
                                if options.value_format.name == AVRO else (None, None))
        try:
            yield from _read_range(runner, options, deserializer, tp, start, end)
        finally:
            if client is not None:  # after the consumer's close: a poll may have left a lookup running
                runner.run(client.aclose())


def _read_range(runner: asyncio.Runner, options: SourceOptions, value_deserializer: Any, tp: TopicPartition,
                start: int, end: int) -> Iterator[Any]:
    settings: dict[str, Any] = dict(options.consumer_settings())
    if value_deserializer is not None:
        settings["value_deserializer"] = value_deserializer  # a field name: from_properties takes those too
    consumer = Consumer.from_properties(settings)
    runner.run(consumer.start())
    try:
        consumer.assign([tp])
        if start == EARLIEST:
            runner.run(consumer.seek_to_beginning(tp))
        else:
            consumer.seek(tp, start)
        yield from _batches_until(runner, consumer, tp, end, options.poll_timeout)
    except OffsetOutOfRangeError as exc:  # only with failOnDataLoss: else the consumer resets
        raise DataLossError(
            f"records of {tp.topic}-{tp.partition} from offset {start} are no longer in Kafka (deleted by "
            "retention or DeleteRecords, or the topic was recreated): some data may have been lost; "
            "set failOnDataLoss=false to continue from the log start") from exc
    finally:
        runner.run(consumer.close(timeout=CLOSE_TIMEOUT))


def _batches_until(runner: asyncio.Runner, consumer: Consumer, tp: TopicPartition, end: int,
                   poll_timeout: float) -> Iterator[Any]:
    last_progress = time.monotonic()
    while runner.run(consumer.position(tp)) < end:
        batch = before(runner.run(consumer.poll_arrow(timeout=1.0)).to_pyarrow(), end)
        if batch.num_rows:
            last_progress = time.monotonic()
            yield batch
        elif time.monotonic() - last_progress > poll_timeout:
            position = runner.run(consumer.position(tp))
            raise KafkaTimeoutError(
                f"no records from {tp.topic}-{tp.partition} for {poll_timeout:.0f} s at offset {position}, "
                f"expected records up to {end} (kafkaConsumer.pollTimeoutMs)")


def before(batch: Any, end: int) -> Any:
    """The rows of ``batch`` (one partition's, offsets ascending) with ``offset < end``: a slice."""
    offsets = batch.column("offset")
    rows = len(offsets)
    if rows == 0 or offsets[rows - 1].as_py() < end:
        return batch
    return batch.slice(0, bisect.bisect_left(range(rows), end, key=lambda i: offsets[i].as_py()))


class UnknownTopicError(KafkaError):
    """A subscribed or assigned topic, or an assigned partition, does not exist."""


class NoOffsetForTimestampError(KafkaError):
    """A partition has no record at or after a starting timestamp (startingOffsetsByTimestampStrategy=error)."""


class DataLossError(KafkaError):
    """Offsets went backwards (topic deleted and recreated, or unclean leader election)."""
