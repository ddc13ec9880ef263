"""OpenTelemetry for a Consumer, by OTel's messaging semantic conventions for Kafka (docs/opentelemetry.md).

    telemetry = instrument(consumer)              # tracer and meter providers: the global ones
    async for record in consumer:
        with telemetry.process(record):           # a "process {topic}" span, current in the block
            await handle(record)                  # its spans are children of the record's span

Every poll() that returns records (or fails) makes a "poll [topic]" span (kind CLIENT) linked to
each record's creation context, a `messaging.client.operation.duration` measure and
`messaging.client.consumed.messages` counts; every commit a "commit [topic]" span (CLIENT) and a
duration measure; `process()` makes the span whose parent is the
producer's context (the record's W3C `traceparent` header, read by the global propagator) and a
`messaging.process.duration` measure. Needs only opentelemetry-api (extra `otel`); with no SDK
configured every call is the API's no-op. The core never imports this module: it watches polls
and commits through `Consumer.observers` (consumer/observers.py)."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

try:
    from opentelemetry import metrics, propagate, trace
    from opentelemetry.context import Context
    from opentelemetry.propagators.textmap import Getter
    from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised by a test that hides the package
    raise ImportError("aiokafka_lite.otel needs opentelemetry-api: "
                      "pip install '.[otel]' in the aiokafka-lite clone") from exc

from .errors import ConsumerClosedError, InvalidArgumentError
from .structs import ConsumerRecord, ConsumerRecords, OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from .consumer.consumer import Consumer

__all__ = ["ConsumerTelemetry", "instrument"]

P = ParamSpec("P")
T = TypeVar("T")

# The attribute names of the semantic conventions (messaging, 1.27 and later), written here so
# that only opentelemetry-api is needed at run time (the names module is another package).
SYSTEM = "messaging.system"
OPERATION_NAME = "messaging.operation.name"
OPERATION_TYPE = "messaging.operation.type"
DESTINATION = "messaging.destination.name"
PARTITION = "messaging.destination.partition.id"
GROUP = "messaging.consumer.group.name"
CLIENT_ID = "messaging.client.id"
BATCH_COUNT = "messaging.batch.message_count"
MESSAGE_ID = "messaging.message.id"
OFFSET = "messaging.kafka.offset"
KEY = "messaging.kafka.message.key"
TOMBSTONE = "messaging.kafka.message.tombstone"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"
SCHEMA_URL = "https://opentelemetry.io/schemas/1.27.0"

# Links of one poll span at most: the SDK's default span limit, which would drop the others after
# they cost a header parse each (about 18 us per record).
MAX_POLL_LINKS = 128

# The buckets the conventions advise for messaging durations, in seconds.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)

Headers = Sequence[tuple[str, "bytes | None"]]


class _HeaderGetter(Getter[Headers]):
    """Reads a propagator's fields from a record's headers (the last of a repeated name wins)."""

    def get(self, carrier: Headers, key: str) -> list[str] | None:
        found = [value.decode("latin-1") for name, value in carrier if name == key and value is not None]
        return found[-1:] or None

    def keys(self, carrier: Headers) -> list[str]:
        return [name for name, _ in carrier]


_HEADERS = _HeaderGetter()


def creation_context(headers: Headers, fields: Collection[str] | None = None) -> Context | None:
    """The producer's context in a record's headers (the global propagator reads them: W3C
    `traceparent`/`tracestate` and `baggage` by default), or None when they carry no valid span.
    `fields`: the propagator's header names, when the caller has them already."""
    if not headers:
        return None
    if fields is None:
        fields = propagate.get_global_textmap().fields
    if not any(name in fields for name, _ in headers):
        return None  # the common case on an untraced topic: no propagator work at all
    extracted = propagate.extract(headers, getter=_HEADERS)
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None


def text_key(key: Any) -> str | None:
    """A record key as the span attribute may carry it: a str, or bytes that are UTF-8 text.
    Anything else (binary keys, numbers a deserializer made) has no canonical text: omitted."""
    if isinstance(key, str):
        return key
    if isinstance(key, bytes | bytearray | memoryview):
        try:
            return bytes(key).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def error_type(error: BaseException) -> str:
    kind = type(error)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def instrument(consumer: Consumer, *, tracer_provider: trace.TracerProvider | None = None,
               meter_provider: metrics.MeterProvider | None = None, message_keys: bool = True) -> ConsumerTelemetry:
    """Trace and measure `consumer` from now on; the providers default to the global ones.
    `message_keys=False` leaves record keys out of span attributes (they may be personal data)."""
    if any(isinstance(observer, ConsumerTelemetry) for observer in consumer.observers):
        raise InvalidArgumentError("the consumer is already instrumented: call uninstrument() on its telemetry first")
    telemetry = ConsumerTelemetry(consumer, tracer_provider=tracer_provider, meter_provider=meter_provider,
                                  message_keys=message_keys)
    consumer.observers.add(telemetry)
    return telemetry


class ConsumerTelemetry:
    """The spans and metrics of one consumer; made by `instrument()`."""

    def __init__(self, consumer: Consumer, *, tracer_provider: trace.TracerProvider | None,
                 meter_provider: metrics.MeterProvider | None, message_keys: bool) -> None:
        from . import __version__

        self._consumer = consumer
        self._message_keys = message_keys
        self._tracer = trace.get_tracer("aiokafka_lite", __version__, tracer_provider, schema_url=SCHEMA_URL)
        meter = metrics.get_meter("aiokafka_lite", __version__, meter_provider, schema_url=SCHEMA_URL)
        self._consumed = meter.create_counter(
            "messaging.client.consumed.messages", unit="{message}",
            description="Number of messages that were delivered to the application.")
        self._operation_duration = meter.create_histogram(
            "messaging.client.operation.duration", unit="s",
            description="Duration of messaging operation initiated by a producer or consumer client.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self._process_duration = meter.create_histogram(
            "messaging.process.duration", unit="s", description="Duration of processing operation.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        config = consumer.config
        host, port = config.bootstrap_servers[0]  # pull-based: the cluster's entry point, not one broker
        self._base: dict[str, str | int] = {SYSTEM: "kafka", SERVER_ADDRESS: host, SERVER_PORT: port}
        if config.group_id is not None:
            self._base[GROUP] = config.group_id
        self._span_base = {**self._base, CLIENT_ID: config.client_id}

    def uninstrument(self) -> None:
        """Stop observing the consumer (spans already open end as usual)."""
        self._consumer.observers.discard(self)

    # ------------------------------------------------------------ poll (an observer of the consumer)

    def poll_ended(self, started_ns: int, ended_ns: int, records: ConsumerRecords | None,
                   error: BaseException | None) -> None:
        if isinstance(error, ConsumerClosedError) or (error is None and not records):
            return  # an empty poll (or one that close() ended) is no receive: neither span nor measure
        sequences: Mapping[TopicPartition, Sequence[ConsumerRecord]] = {} if records is None else records.sequences()
        partitions = [tp for tp, batch in sequences.items() if batch]
        topics = {tp.topic for tp in partitions}
        where: dict[str, str | int] = {}
        if len(topics) == 1:
            where[DESTINATION] = next(iter(topics))
        if len(partitions) == 1:
            where[PARTITION] = str(partitions[0].partition)
        operation = {**self._base, OPERATION_NAME: "poll", OPERATION_TYPE: "receive", **where}
        if error is not None:
            operation[ERROR_TYPE] = error_type(error)
        self._operation_duration.record((ended_ns - started_ns) / 1e9, operation)
        for tp in partitions:
            self._consumed.add(len(sequences[tp]), {**self._base, OPERATION_NAME: "poll",
                                                    DESTINATION: tp.topic, PARTITION: str(tp.partition)})
        self._poll_span(started_ns, ended_ns, records, error, where)

    def _poll_span(self, started_ns: int, ended_ns: int, records: ConsumerRecords | None,
                   error: BaseException | None, where: dict[str, str | int]) -> None:
        name = f"poll {where[DESTINATION]}" if DESTINATION in where else "poll"
        attributes = {**self._span_base, OPERATION_NAME: "poll", OPERATION_TYPE: "receive", **where}
        if records is not None:
            attributes[BATCH_COUNT] = len(records)
        span = self._tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes, start_time=started_ns)
        if span.is_recording():
            fields, links = propagate.get_global_textmap().fields, 0
            for record in records or ():
                created = creation_context(record.headers, fields)
                if created is not None:
                    span.add_link(trace.get_current_span(created).get_span_context())
                    links += 1
                    if links == MAX_POLL_LINKS:
                        break
            if error is not None:
                span.set_attribute(ERROR_TYPE, error_type(error))
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, str(error)))
        span.end(end_time=ended_ns)

    # ------------------------------------------------------------ commit (an observer of the consumer)

    def commit_ended(self, started_ns: int, ended_ns: int, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     error: BaseException | None) -> None:
        topics = {tp.topic for tp in offsets}
        where: dict[str, str | int] = {}
        if len(topics) == 1:
            where[DESTINATION] = next(iter(topics))
        if len(offsets) == 1:
            where[PARTITION] = str(next(iter(offsets)).partition)
        operation = {**self._base, OPERATION_NAME: "commit", OPERATION_TYPE: "settle", **where}
        if error is not None:
            operation[ERROR_TYPE] = error_type(error)
        self._operation_duration.record((ended_ns - started_ns) / 1e9, operation)
        name = f"commit {where[DESTINATION]}" if DESTINATION in where else "commit"
        span = self._tracer.start_span(name, kind=SpanKind.CLIENT, start_time=started_ns,
                                       attributes={**self._span_base, **operation})
        if error is not None and span.is_recording():
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, str(error)))
        span.end(end_time=ended_ns)

    # ------------------------------------------------------------ process (the application's handler)

    @contextmanager
    def process(self, record: ConsumerRecord) -> Iterator[Span]:
        """A "process {topic}" span (kind CONSUMER) around the handling of one record, current in
        the block, so spans made inside it are its children. Its parent is the producer's span
        when the record carries one (and it links to it, as the conventions ask), else the
        current span. An exception leaving the block is recorded on it, then goes on."""
        created = creation_context(record.headers)
        links = [] if created is None else [Link(trace.get_current_span(created).get_span_context())]
        measure = {**self._base, OPERATION_NAME: "process", DESTINATION: record.topic,
                   PARTITION: str(record.partition)}
        began = time.perf_counter()
        try:
            with self._tracer.start_as_current_span(
                    f"process {record.topic}", context=created, kind=SpanKind.CONSUMER,
                    attributes=self._record_attributes(record), links=links) as span:
                yield span
        except BaseException as exc:
            measure[ERROR_TYPE] = error_type(exc)
            raise
        finally:
            self._process_duration.record(time.perf_counter() - began, measure)

    def handler(self, fn: Callable[Concatenate[ConsumerRecord, P], Awaitable[T]]
                ) -> Callable[Concatenate[ConsumerRecord, P], Awaitable[T]]:
        """A decorator: `fn(record, ...)` runs inside `process(record)`."""
        @functools.wraps(fn)
        async def traced(record: ConsumerRecord, /, *args: P.args, **kwargs: P.kwargs) -> T:
            with self.process(record):
                return await fn(record, *args, **kwargs)
        return traced

    def _record_attributes(self, record: ConsumerRecord) -> dict[str, str | int | bool]:
        attributes: dict[str, str | int | bool] = {
            **self._span_base, OPERATION_NAME: "process", OPERATION_TYPE: "process",
            DESTINATION: record.topic, PARTITION: str(record.partition), OFFSET: record.offset,
            MESSAGE_ID: f"{record.topic}.{record.partition}.{record.offset}"}
        if self._message_keys:
            key = text_key(record.key)
            if key is not None:
                attributes[KEY] = key
        if record.value is None:
            attributes[TOMBSTONE] = True
        return attributes
