"""``aiokafka_lite.testing.helpers.produce_avro`` on Apache Kafka and Apicurio (the
``schema_registry`` fixture): its records are in Confluent's wire format under the subject
``<topic>-value``, our Consumer with an AvroDeserializer reads them back, and keys that do not
pair with the values are refused before anything is sent."""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.schema_registry import AvroDeserializer, SchemaRegistryClient
from aiokafka_lite.testing.helpers import create_topic, produce_avro

from ._consumers import poll_until

ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}]}


@pytest.mark.asyncio
@pytest.mark.broker("kafka4")
async def test_produce_avro_writes_framed_values_that_poll_decodes(
        apache_kafka_broker: Any, schema_registry: Any, unique_topic: str, unique_group: str) -> None:
    create_topic(apache_kafka_broker, unique_topic)
    values: list[dict[str, Any] | None] = [{"id": 0, "note": "first"}, {"id": 1, "note": None}, None]
    sent = produce_avro(apache_kafka_broker, unique_topic, schema_registry.url, ORDER, values,
                        keys=["k0", b"k1", None], enable_idempotence=True)
    assert sent == 3
    async with SchemaRegistryClient(schema_registry.url) as registry:
        registered = await registry.get_version(f"{unique_topic}-value", "latest", timeout=10)
        async with Consumer(unique_topic, bootstrap_servers=apache_kafka_broker.bootstrap_servers,
                            group_id=unique_group, auto_offset_reset="earliest", enable_auto_commit=False,
                            value_deserializer=AvroDeserializer(registry)) as consumer:
            got = await poll_until(consumer, lambda got: len(got) >= 3, timeout=60)
    assert [(r.key, r.value) for r in got] == [(b"k0", values[0]), (b"k1", values[1]), (None, None)]
    # The header a Java producer with a registry writes: magic byte 0, then the subject's schema id.
    async with Consumer(unique_topic, bootstrap_servers=apache_kafka_broker.bootstrap_servers,
                        group_id=f"{unique_group}-raw", auto_offset_reset="earliest",
                        enable_auto_commit=False) as raw_consumer:
        raw = await poll_until(raw_consumer, lambda got: len(got) >= 1, timeout=60)
    assert raw[0].value[:5] == b"\x00" + registered.schema_id.to_bytes(4, "big")


def test_keys_that_do_not_pair_with_the_values_are_refused() -> None:
    # Refused before any connection: neither address below is ever tried.
    with pytest.raises(ValueError, match="2 keys for 1 values"):
        produce_avro("127.0.0.1:9", "orders", "http://127.0.0.1:9", ORDER, [{"id": 0}], keys=["a", "b"])
