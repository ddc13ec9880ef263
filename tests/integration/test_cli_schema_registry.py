"""``aiokafka-lite consume --value-format avro --registry URL`` as users run it (a subprocess), on
Apache Kafka with records written by confluent-kafka's AvroSerializer through a real registry
(Apicurio, the ``schema_registry`` fixture); and the one-line failures around it."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import pytest

from aiokafka_lite.schema_registry.wire import frame
from aiokafka_lite.testing.helpers import create_topic, produce

from .test_cli import run_cli
from .test_schema_registry_poll import avro_records

pytestmark = pytest.mark.broker("kafka4")


def test_consume_prints_avro_values_decoded(apache_kafka_broker: Any, schema_registry: Any,
                                            unique_topic: str) -> None:
    records, expected = asyncio.run(asyncio.to_thread(avro_records, schema_registry.url, unique_topic, 4, 1))
    create_topic(apache_kafka_broker, unique_topic, partitions=1)
    produce(apache_kafka_broker, unique_topic, records, enable_idempotence=True)
    bootstrap = apache_kafka_broker.bootstrap_servers
    done = run_cli("consume", unique_topic, "-b", bootstrap, "--from", "earliest", "--max", "4", "--format",
                   "json", "--value-format", "avro", "--key-format", "avro", "--registry", schema_registry.url)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    # The writer's shape: v1 values have no qty.
    assert [line["value"] for line in lines] == [{k: v for k, v in e.items() if k != "qty" or e["id"] % 2}
                                                 for e in expected]
    assert [line["key"] for line in lines] == [{"id": i} for i in range(4)]
    text = run_cli("consume", unique_topic, "-b", bootstrap, "--from", "earliest", "--max", "1",
                   "--value-format", "avro", "--registry", schema_registry.url)
    assert text.returncode == 0, text.stderr
    assert 'value={"id": 0, "note": "n0"}' in text.stdout


def test_a_format_without_a_registry_or_a_registry_down_says_why_in_one_line(
        apache_kafka_broker: Any, schema_registry: Any, unique_topic: str) -> None:
    bootstrap = apache_kafka_broker.bootstrap_servers
    began = time.monotonic()
    usage = run_cli("consume", unique_topic, "-b", bootstrap, "--value-format", "avro")
    assert (usage.returncode, usage.stdout) == (2, "")
    assert usage.stderr == ("aiokafka-lite: --value-format avro needs --registry URL (the schema registry's "
                            "Confluent API)\n")
    unused = run_cli("consume", unique_topic, "-b", bootstrap, "--registry", schema_registry.url)
    assert unused.returncode == 2
    assert "--registry is used only with" in unused.stderr
    assert time.monotonic() - began < 20  # no connection tried
    records, _ = asyncio.run(asyncio.to_thread(avro_records, schema_registry.url, unique_topic, 1, 1))
    create_topic(apache_kafka_broker, unique_topic, partitions=1)
    produce(apache_kafka_broker, unique_topic, records)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    began = time.monotonic()
    failed = run_cli("consume", unique_topic, "-b", bootstrap, "--from", "earliest", "--max", "1",
                     "--value-format", "avro", "--registry", down)
    took = time.monotonic() - began
    assert failed.returncode == 1
    assert failed.stdout == ""
    error_lines = [line for line in failed.stderr.splitlines() if line.startswith("aiokafka-lite:")]
    assert len(error_lines) == 1, failed.stderr
    assert error_lines[0].startswith("aiokafka-lite: SchemaRegistryUnavailableError: ")
    assert down.removeprefix("http://") in error_lines[0]
    assert took < 30
    # A value the registry has no schema for: the records before it are printed, then one line.
    produce(apache_kafka_broker, unique_topic, [{"value": frame(987654321, b"\x02")}])
    poisoned = run_cli("consume", unique_topic, "-b", bootstrap, "--from", "earliest", "--max", "2",
                       "--value-format", "avro", "--registry", schema_registry.url)
    assert poisoned.returncode == 1
    assert len(poisoned.stdout.splitlines()) == 1
    [line] = poisoned.stderr.splitlines()
    assert line.startswith(f"aiokafka-lite: RecordDeserializationError: cannot deserialize the value of the "
                           f"record at offset 1 of {unique_topic}-0 (SchemaNotFoundError: looking up schema id "
                           f"987654321: schema not found in the schema registry {schema_registry.url} ")
    assert line.endswith("; seek to offset 2 to skip it")
