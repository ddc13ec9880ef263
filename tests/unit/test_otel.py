"""aiokafka_lite.otel without a broker: the spans and metrics it makes of polls and of process(),
read back from the SDK's in-memory exporters; the core without opentelemetry installed.
tests/integration/test_otel.py does the same against a real broker."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from opentelemetry import propagate, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from aiokafka_lite import Consumer, ConsumerRecord, ConsumerRecords, OffsetAndMetadata, TopicPartition
from aiokafka_lite.consumer.observers import ConsumerObservers
from aiokafka_lite.errors import ConsumerClosedError, InvalidArgumentError
from aiokafka_lite.otel import ConsumerTelemetry, instrument

NOWHERE = "127.0.0.1:1"  # nothing listens there; these tests never connect


class Sdk:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("test")

    def finished(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans.get_finished_spans() if span.name == name]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        return [point for resource in (data.resource_metrics if data else []) for scope in resource.scope_metrics
                for m in scope.metrics if m.name == metric for point in m.data.data_points]

    def traceparent(self, span: trace.Span) -> list[tuple[str, bytes | None]]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        return [(name, value.encode()) for name, value in carrier.items()]


@pytest.fixture
def sdk() -> Iterator[Sdk]:
    made = Sdk()
    yield made
    made.tracer_provider.shutdown()
    made.meter_provider.shutdown()


@pytest.fixture
def consumer() -> Consumer:
    return Consumer(bootstrap_servers=NOWHERE, group_id="billing", client_id="worker-1")


def telemetry_of(consumer: Consumer, sdk: Sdk, **options: Any) -> ConsumerTelemetry:
    return instrument(consumer, tracer_provider=sdk.tracer_provider, meter_provider=sdk.meter_provider, **options)


def ids(context: trace.SpanContext | None) -> tuple[int, int, int] | None:
    """A span context as the propagator carries it (the extracted one is marked remote)."""
    return None if context is None else (context.trace_id, context.span_id, context.trace_flags)


def rec(offset: int = 7, key: Any = b"order-1", value: Any = b"v", headers: Any = (), topic: str = "orders",
        partition: int = 2) -> ConsumerRecord:
    return ConsumerRecord(topic, partition, offset, 0, 0, key, value, list(headers))


def test_process_span_is_a_child_of_the_producers_span_and_parents_the_handlers(consumer: Consumer,
                                                                                 sdk: Sdk) -> None:
    telemetry = telemetry_of(consumer, sdk)
    producer = sdk.tracer.start_span("orders send", kind=SpanKind.PRODUCER)
    producer.end()
    with telemetry.process(rec(headers=sdk.traceparent(producer))) as span:
        assert trace.get_current_span() is span
        with sdk.tracer.start_as_current_span("handler"):
            pass
    (process,) = sdk.finished("process orders")
    (handler,) = sdk.finished("handler")
    assert process.kind is SpanKind.CONSUMER
    assert ids(process.parent) == ids(producer.get_span_context())
    assert process.parent is not None
    assert process.parent.is_remote
    assert [ids(link.context) for link in process.links] == [ids(producer.get_span_context())]
    assert handler.parent is not None
    assert handler.parent.span_id == process.context.span_id
    assert dict(process.attributes or {}) == {
        "messaging.system": "kafka", "messaging.operation.name": "process", "messaging.operation.type": "process",
        "messaging.destination.name": "orders", "messaging.destination.partition.id": "2",
        "messaging.kafka.offset": 7, "messaging.kafka.message.key": "order-1",
        "messaging.message.id": "orders.2.7", "messaging.consumer.group.name": "billing",
        "messaging.client.id": "worker-1", "server.address": "127.0.0.1", "server.port": 1}
    (duration,) = sdk.points("messaging.process.duration")
    assert duration.count == 1
    assert dict(duration.attributes) == {
        "messaging.system": "kafka", "messaging.operation.name": "process", "messaging.destination.name": "orders",
        "messaging.destination.partition.id": "2", "messaging.consumer.group.name": "billing",
        "server.address": "127.0.0.1", "server.port": 1}


def test_a_record_without_a_producer_context_is_processed_under_the_current_span(consumer: Consumer,
                                                                                 sdk: Sdk) -> None:
    telemetry = telemetry_of(consumer, sdk)
    broken = [("traceparent", b"00-not-a-trace-context"), ("other", None)]
    with sdk.tracer.start_as_current_span("loop") as loop:
        for headers in ((), broken):
            with telemetry.process(rec(headers=headers)):
                pass
        assert trace.get_current_span() is loop  # nothing left attached
    spans = sdk.finished("process orders")
    assert len(spans) == 2
    assert all(span.parent == loop.get_span_context() and not span.links for span in spans)


@pytest.mark.parametrize(("key", "shown"), [
    ("text", "text"), (b"caf\xc3\xa9", "café"), (bytearray(b"k"), "k"), (b"\xff\x00", None), (42, None), (None, None),
])
def test_only_text_keys_become_the_key_attribute(consumer: Consumer, sdk: Sdk, key: Any, shown: str | None) -> None:
    with telemetry_of(consumer, sdk).process(rec(key=key)):
        pass
    (span,) = sdk.finished("process orders")
    assert (span.attributes or {}).get("messaging.kafka.message.key") == shown


def test_keys_can_be_left_out_and_tombstones_are_marked(consumer: Consumer, sdk: Sdk) -> None:
    with telemetry_of(consumer, sdk, message_keys=False).process(rec(key="secret", value=None)):
        pass
    (span,) = sdk.finished("process orders")
    assert "messaging.kafka.message.key" not in (span.attributes or {})
    assert (span.attributes or {})["messaging.kafka.message.tombstone"] is True


def test_an_error_in_the_handler_is_recorded_and_raised(consumer: Consumer, sdk: Sdk) -> None:
    telemetry = telemetry_of(consumer, sdk)

    @telemetry.handler
    async def handle(record: ConsumerRecord, factor: int) -> int:
        if record.offset == 8:
            raise ValueError("bad order")
        return record.offset * factor

    assert asyncio.run(handle(rec(offset=7), 2)) == 14
    with pytest.raises(ValueError, match="bad order"):
        asyncio.run(handle(rec(offset=8), 2))
    ok, failed = sdk.finished("process orders")
    assert ok.status.status_code is StatusCode.UNSET
    assert failed.status.status_code is StatusCode.ERROR
    assert [event.name for event in failed.events] == ["exception"]
    errors = {point.attributes.get("error.type"): point.count for point in sdk.points("messaging.process.duration")}
    assert errors == {None: 1, "ValueError": 1}


def batch(*records: ConsumerRecord) -> ConsumerRecords:
    by_partition: dict[TopicPartition, list[ConsumerRecord]] = {}
    for record in records:
        by_partition.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
    return ConsumerRecords(by_partition)


def test_a_poll_with_records_makes_a_span_linked_to_their_producers_and_counts_them(consumer: Consumer,
                                                                                    sdk: Sdk) -> None:
    telemetry = telemetry_of(consumer, sdk)
    first, second = sdk.tracer.start_span("a"), sdk.tracer.start_span("b")
    records = batch(rec(offset=0, headers=sdk.traceparent(first)), rec(offset=1),
                    rec(offset=2, headers=sdk.traceparent(second)), rec(offset=0, partition=0))
    telemetry.poll_ended(1_000_000_000, 1_250_000_000, records, None)
    (span,) = sdk.finished("poll orders")
    assert span.kind is SpanKind.CLIENT
    assert (span.start_time, span.end_time) == (1_000_000_000, 1_250_000_000)
    assert [ids(link.context) for link in span.links] == [ids(first.get_span_context()), ids(second.get_span_context())]
    assert dict(span.attributes or {}) == {
        "messaging.system": "kafka", "messaging.operation.name": "poll", "messaging.operation.type": "receive",
        "messaging.destination.name": "orders", "messaging.batch.message_count": 4,
        "messaging.consumer.group.name": "billing", "messaging.client.id": "worker-1",
        "server.address": "127.0.0.1", "server.port": 1}
    counts = {point.attributes["messaging.destination.partition.id"]: point.value
              for point in sdk.points("messaging.client.consumed.messages")}
    assert counts == {"2": 3, "0": 1}
    (duration,) = sdk.points("messaging.client.operation.duration")
    assert (duration.count, duration.sum) == (1, pytest.approx(0.25))


def test_a_poll_of_several_topics_is_named_by_its_operation_only(consumer: Consumer, sdk: Sdk) -> None:
    telemetry_of(consumer, sdk).poll_ended(0, 1, batch(rec(topic="orders"), rec(topic="refunds")), None)
    (span,) = sdk.finished("poll")
    assert "messaging.destination.name" not in (span.attributes or {})


def test_empty_polls_and_polls_close_ended_make_nothing_and_errors_are_recorded(consumer: Consumer,
                                                                                sdk: Sdk) -> None:
    telemetry = telemetry_of(consumer, sdk)
    telemetry.poll_ended(0, 1, ConsumerRecords(), None)
    telemetry.poll_ended(0, 1, None, ConsumerClosedError("closed"))
    assert not sdk.spans.get_finished_spans()
    telemetry.poll_ended(0, 1, None, InvalidArgumentError("boom"))
    (span,) = sdk.finished("poll")
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "aiokafka_lite.errors.InvalidArgumentError"
    (duration,) = sdk.points("messaging.client.operation.duration")
    assert duration.attributes["error.type"] == "aiokafka_lite.errors.InvalidArgumentError"
    assert not sdk.points("messaging.client.consumed.messages")


def test_instrumenting_twice_is_refused_and_uninstrument_stops_observing(consumer: Consumer, sdk: Sdk) -> None:
    telemetry = telemetry_of(consumer, sdk)
    assert list(consumer.observers) == [telemetry]
    with pytest.raises(InvalidArgumentError, match="already instrumented"):
        telemetry_of(consumer, sdk)
    telemetry.uninstrument()
    assert not consumer.observers
    assert telemetry_of(consumer, sdk) in list(consumer.observers)


class Failing:
    def poll_ended(self, *args: object) -> None:
        raise RuntimeError("observer bug")

    def commit_ended(self, *args: object) -> None:
        raise RuntimeError("observer bug")


class Seen:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, BaseException | None]] = []

    def poll_ended(self, started_ns: int, ended_ns: int, records: ConsumerRecords | None,
                   error: BaseException | None) -> None:
        assert 0 < started_ns <= ended_ns
        self.calls.append((records, error))

    def commit_ended(self, started_ns: int, ended_ns: int, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     error: BaseException | None) -> None:
        assert 0 < started_ns <= ended_ns
        self.calls.append((offsets, error))


def test_observers_see_outcomes_not_cancellations_and_a_failing_one_is_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    observers, seen = ConsumerObservers(), Seen()
    assert not observers
    assert observers.poll() is ConsumerObservers().poll()  # nothing observes: one shared, stateless scope
    observers.add(Failing())
    observers.add(seen)
    records = batch(rec())
    caplog.set_level(logging.DEBUG, "aiokafka_lite.consumer")
    for _ in range(2):
        with observers.poll() as scope:
            assert scope.got(records) is records
    with pytest.raises(ValueError, match="poll failed"), observers.poll():
        raise ValueError("poll failed")
    with pytest.raises(KeyboardInterrupt), observers.poll():
        raise KeyboardInterrupt
    offsets = {TopicPartition("orders", 2): OffsetAndMetadata(8)}
    assert observers.commit(offsets) is not ConsumerObservers().commit(offsets)
    with observers.commit(offsets):
        pass
    with pytest.raises(asyncio.CancelledError), observers.commit(offsets):
        raise asyncio.CancelledError
    assert [r for r, _ in seen.calls] == [records, records, None, offsets]
    assert isinstance(seen.calls[2][1], ValueError)
    failures = [r.levelname for r in caplog.records if "consumer observer" in r.getMessage()]
    assert failures == ["WARNING", "DEBUG", "DEBUG", "DEBUG"]


def test_a_commit_makes_a_settle_span_and_measure(consumer: Consumer, sdk: Sdk) -> None:
    telemetry = telemetry_of(consumer, sdk)
    telemetry.commit_ended(2_000, 5_000, {TopicPartition("orders", 2): OffsetAndMetadata(8)}, None)
    telemetry.commit_ended(6_000, 7_000, {TopicPartition("orders", 0): OffsetAndMetadata(1),
                                          TopicPartition("refunds", 0): OffsetAndMetadata(1)},
                           ConsumerClosedError("closed before the commit completed"))
    one, several = sdk.finished("commit orders") + sdk.finished("commit")
    assert (one.kind, one.start_time, one.end_time) == (SpanKind.CLIENT, 2_000, 5_000)
    assert dict(one.attributes or {}) == {
        "messaging.system": "kafka", "messaging.operation.name": "commit", "messaging.operation.type": "settle",
        "messaging.destination.name": "orders", "messaging.destination.partition.id": "2",
        "messaging.consumer.group.name": "billing", "messaging.client.id": "worker-1",
        "server.address": "127.0.0.1", "server.port": 1}
    assert several.status.status_code is StatusCode.ERROR
    assert (several.attributes or {})["error.type"] == "aiokafka_lite.errors.ConsumerClosedError"
    durations = {(p.attributes["messaging.operation.name"], p.attributes.get("error.type")): p.count
                 for p in sdk.points("messaging.client.operation.duration")}
    assert durations == {("commit", None): 1, ("commit", "aiokafka_lite.errors.ConsumerClosedError"): 1}


def test_the_core_works_without_opentelemetry_and_the_module_says_what_to_install() -> None:
    script = textwrap.dedent("""
        import asyncio, sys
        sys.modules["opentelemetry"] = None  # as if it were not installed
        from aiokafka_lite import Consumer, TopicPartition

        async def main():
            consumer = Consumer(bootstrap_servers="127.0.0.1:1", group_id="g")  # nothing listens: polls time out
            consumer.assign([TopicPartition("t", 0)])
            print("polled", len(await consumer.poll(0.2)))
            await consumer.close()
        asyncio.run(main())
        try:
            import aiokafka_lite.otel
        except ImportError as exc:
            print("otel:", exc)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert ("otel: aiokafka_lite.otel needs opentelemetry-api: pip install '.[otel]' in the aiokafka-lite clone"
            in done.stdout)
    assert "polled 0" in done.stdout


def test_a_poll_span_links_at_most_128_producers(consumer: Consumer, sdk: Sdk) -> None:
    producer = sdk.tracer.start_span("send")
    telemetry_of(consumer, sdk).poll_ended(0, 1, batch(*(rec(offset=i, headers=sdk.traceparent(producer))
                                                         for i in range(130))), None)
    (span,) = sdk.finished("poll orders")
    assert len(span.links) == 128
    assert (span.attributes or {})["messaging.batch.message_count"] == 130
