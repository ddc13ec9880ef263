"""What the OpenTelemetry instrumentations of aiokafka and confluent-kafka record, observed on a broker.

    python scripts/otel_reference_spans.py [--bootstrap H:P]

Starts a Tansu broker (unless ``--bootstrap``), produces two records through an instrumented
confluent-kafka Producer (so they carry its ``traceparent``), reads them with an instrumented
aiokafka consumer (``getone()``, then ``getmany()``) and an instrumented confluent-kafka Consumer
(``poll()``), then with aiokafka-lite's own instrumentation, and prints every span: name, kind,
parent, links and attributes. docs/opentelemetry.md's side-by-side table is written from this
output; run it again when either instrumentation changes. Needs opentelemetry-sdk,
opentelemetry-instrumentation-aiokafka and -confluent-kafka.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aiokafka_lite.testing.helpers import create_topic


def show(title: str, spans: tuple[ReadableSpan, ...]) -> None:
    print(f"== {title}")
    for span in spans:
        parent = f"{span.parent.span_id:016x}" if span.parent else "-"
        print(f"  {span.name!r} kind={span.kind.name} id={span.context.span_id:016x} parent={parent} "
              f"links={[f'{link.context.span_id:016x}' for link in span.links]}")
        for key, value in sorted((span.attributes or {}).items()):
            print(f"      {key} = {value!r}")


def produce_traced(provider: TracerProvider, bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer
    from opentelemetry.instrumentation.confluent_kafka import ConfluentKafkaInstrumentor

    producer = ConfluentKafkaInstrumentor().instrument_producer(
        Producer({"bootstrap.servers": bootstrap}), tracer_provider=provider)
    for i in range(2):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
    producer.flush(10)


async def consume_aiokafka(provider: TracerProvider, bootstrap: str, topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from opentelemetry.instrumentation.aiokafka import AIOKafkaInstrumentor

    AIOKafkaInstrumentor().instrument(tracer_provider=provider)
    try:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id="reference-group",
                                    client_id="reference-client", auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.getone()
            await consumer.getmany(timeout_ms=5000)
        finally:
            await consumer.stop()
    finally:
        AIOKafkaInstrumentor().uninstrument()


def consume_confluent(provider: TracerProvider, bootstrap: str, topic: str) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from opentelemetry.instrumentation.confluent_kafka import ConfluentKafkaInstrumentor

    consumer = ConfluentKafkaInstrumentor().instrument_consumer(
        Consumer({"bootstrap.servers": bootstrap, "group.id": "reference-group", "client.id": "reference-client",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False}), tracer_provider=provider)
    consumer.original_consumer().assign([TopicPartition(topic, 0, 0)])  # the proxy has no assign()
    got = 0
    for _ in range(50):
        if consumer.poll(0.2) is not None:
            got += 1
            if got == 2:
                break
    consumer.poll(0.2)  # ends the last record's "process" span, which stays open until the next poll
    consumer.close()


async def consume_ours(provider: TracerProvider, bootstrap: str, topic: str) -> None:
    from aiokafka_lite import Consumer, TopicPartition
    from aiokafka_lite.otel import instrument

    async with Consumer(bootstrap_servers=bootstrap, group_id="reference-group", client_id="reference-client",
                        auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        telemetry = instrument(consumer, tracer_provider=provider)
        consumer.assign([TopicPartition(topic, 0)])
        for record in await consumer.poll(5.0):
            with telemetry.process(record):
                pass


@contextlib.contextmanager
def broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap is not None:
        yield bootstrap
        return
    from aiokafka_lite.testing.tansu import TansuBroker

    with TansuBroker() as tansu:
        yield tansu.bootstrap_servers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--bootstrap", help="an existing broker instead of a fresh Tansu")
    args = parser.parse_args(argv)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # the instrumentations' propagation reads the global context
    with broker(args.bootstrap) as bootstrap:
        topic = f"reference-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic)
        steps: list[tuple[str, Any]] = [
            ("confluent-kafka Producer.produce (instrumented)", lambda: produce_traced(provider, bootstrap, topic)),
            ("aiokafka getone() then getmany() (instrumented)",
             lambda: asyncio.run(consume_aiokafka(provider, bootstrap, topic))),
            ("confluent-kafka Consumer.poll() (instrumented)", lambda: consume_confluent(provider, bootstrap, topic)),
            ("aiokafka-lite poll() + process()", lambda: asyncio.run(consume_ours(provider, bootstrap, topic))),
        ]
        for title, step in steps:
            exporter.clear()
            step()
            show(title, exporter.get_finished_spans())


if __name__ == "__main__":
    main()
