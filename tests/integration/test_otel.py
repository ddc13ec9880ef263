"""aiokafka_lite.otel against Apache Kafka 4.3.1: records produced with a W3C `traceparent` (made
from an SDK span) are consumed with `async for` and handled in `telemetry.process(record)`, then
committed; the SDK's in-memory exporters show the poll, process and commit spans, their parents
and links, and the metrics. Then the same with the API's no-op providers: nothing breaks, the producer's context
still reaches the handler."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import metrics, propagate, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from aiokafka_lite import Consumer, ConsumerRecord, TopicPartition
from aiokafka_lite.otel import instrument
from aiokafka_lite.testing.helpers import create_topic, produce

pytestmark = pytest.mark.asyncio


def ids(context: trace.SpanContext | None) -> tuple[int, int] | None:
    return None if context is None else (context.trace_id, context.span_id)


def traceparent(span: trace.Span) -> list[tuple[str, bytes]]:
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span))
    return [(name, value.encode()) for name, value in carrier.items()]


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    return [point for resource in (data.resource_metrics if data else []) for scope in resource.scope_metrics
            for metric in scope.metrics if metric.name == name for point in metric.data.data_points]


async def consume(consumer: Consumer, count: int, handle: Any) -> list[ConsumerRecord]:
    seen: list[ConsumerRecord] = []
    async with asyncio.timeout(30):
        async for record in consumer:
            await handle(record)
            seen.append(record)
            if len(seen) == count:
                break
    return seen


async def test_spans_follow_the_producers_context_and_handlers_are_children_of_their_record(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str,
        spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    tracer = provider.get_tracer("test")
    first = tracer.start_span(f"{unique_topic} send", kind=SpanKind.PRODUCER)
    second = tracer.start_span(f"{unique_topic} send", kind=SpanKind.PRODUCER)
    first.end()
    second.end()
    create_topic(apache_kafka_broker, unique_topic, partitions=2)
    produce(apache_kafka_broker, unique_topic, [
        {"key": "order-1", "value": "v", "partition": 0, "headers": traceparent(first)},
        {"key": b"\xff\x00", "value": "v", "partition": 1, "headers": traceparent(second)},
        {"key": "order-3", "value": None, "partition": 0},  # no traceparent, a tombstone
    ], enable_idempotence=True)
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    exporter.clear()
    async with Consumer(bootstrap_servers=apache_kafka_broker.bootstrap_servers, group_id=unique_group,
                        client_id="otel-it", auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.assign([TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)])
        telemetry = instrument(consumer, tracer_provider=provider, meter_provider=meters)

        async def handle(record: ConsumerRecord) -> None:
            with telemetry.process(record), tracer.start_as_current_span(f"handle {record.offset}"):
                await asyncio.sleep(0)

        with tracer.start_as_current_span("worker") as worker:
            await consume(consumer, 3, handle)
            assert trace.get_current_span() is worker  # nothing a record attached outlives its block
            await consumer.commit()
    meters.shutdown()
    finished = exporter.get_finished_spans()
    process = {(attrs["messaging.destination.partition.id"], attrs["messaging.kafka.offset"]): s
               for s in finished if s.name == f"process {unique_topic}" for attrs in [s.attributes or {}]}
    assert set(process) == {("0", 0), ("1", 0), ("0", 1)}
    worker_ids = ids(worker.get_span_context())
    for where, producer in ((("0", 0), first), (("1", 0), second)):
        assert ids(process[where].parent) == ids(producer.get_span_context())
        assert [ids(link.context) for link in process[where].links] == [ids(producer.get_span_context())]
    assert ids(process["0", 1].parent) == worker_ids  # no producer context: under the current span
    assert not process["0", 1].links
    assert (process["0", 1].attributes or {})["messaging.kafka.message.tombstone"] is True
    assert (process["0", 0].attributes or {})["messaging.kafka.message.key"] == "order-1"
    assert "messaging.kafka.message.key" not in (process["1", 0].attributes or {})  # binary: left out
    for span in process.values():
        assert span.kind is SpanKind.CONSUMER
        attributes = span.attributes or {}
        assert attributes["messaging.consumer.group.name"] == unique_group
        assert attributes["messaging.client.id"] == "otel-it"
        assert f"{attributes['server.address']}:{attributes['server.port']}" == apache_kafka_broker.bootstrap_servers
    handlers = [s for s in finished if s.name.startswith("handle ")]
    assert sorted(ids(s.parent) for s in handlers) == sorted(ids(s.context) for s in process.values())
    polls = [s for s in finished if s.name.startswith("poll")]
    assert polls
    assert all(s.name == f"poll {unique_topic}" and s.kind is SpanKind.CLIENT for s in polls)
    assert all(ids(s.parent) == worker_ids for s in polls)
    assert sum(int((s.attributes or {})["messaging.batch.message_count"]) for s in polls) == 3
    linked = {ids(link.context) for s in polls for link in s.links}
    assert linked == {ids(first.get_span_context()), ids(second.get_span_context())}
    consumed = {p.attributes["messaging.destination.partition.id"]: p.value
                for p in points(reader, "messaging.client.consumed.messages")}
    assert consumed == {"0": 2, "1": 1}
    (commit,) = [s for s in finished if s.name == f"commit {unique_topic}"]
    assert ids(commit.parent) == worker_ids
    assert (commit.attributes or {})["messaging.operation.type"] == "settle"
    durations: dict[str, int] = {}
    for p in points(reader, "messaging.client.operation.duration"):
        name = p.attributes["messaging.operation.name"]
        durations[name] = durations.get(name, 0) + p.count
    assert durations == {"poll": len(polls), "commit": 1}
    assert sum(p.count for p in points(reader, "messaging.process.duration")) == 3


async def test_without_an_sdk_nothing_breaks_and_the_context_still_reaches_the_handler(
        apache_kafka_broker: Any, unique_topic: str) -> None:
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    create_topic(apache_kafka_broker, unique_topic)
    produce(apache_kafka_broker, unique_topic, [
        {"key": f"k{i}", "value": "v", "headers": [("traceparent", f"00-{trace_id}-{span_id}-01")]} for i in range(3)
    ], enable_idempotence=True)
    async with Consumer(bootstrap_servers=apache_kafka_broker.bootstrap_servers, auto_offset_reset="earliest") \
            as consumer:
        consumer.assign([TopicPartition(unique_topic, 0)])
        telemetry = instrument(consumer, tracer_provider=trace.NoOpTracerProvider(),
                               meter_provider=metrics.NoOpMeterProvider())
        current: list[trace.SpanContext] = []

        @telemetry.handler
        async def handle(record: ConsumerRecord) -> None:
            current.append(trace.get_current_span().get_span_context())
            if record.offset == 1:
                raise LookupError("the handler's own error")

        async def handle_and_keep_going(record: ConsumerRecord) -> None:
            try:
                await handle(record)
            except LookupError:
                assert record.offset == 1

        seen = await consume(consumer, 3, handle_and_keep_going)
    assert [r.offset for r in seen] == [0, 1, 2]
    assert [(f"{c.trace_id:032x}", f"{c.span_id:016x}", c.is_remote) for c in current] == \
        [(trace_id, span_id, True)] * 3
