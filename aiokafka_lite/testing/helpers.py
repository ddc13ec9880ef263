"""Set up test data with a reference client (confluent-kafka / librdkafka), independent of ours.

    create_topic(broker.bootstrap_servers, "orders", partitions=3)
    produce(broker.bootstrap_servers, "orders", [(b"k", b"v"), {"value": b"x", "partition": 2}])
    produce_transactional(bootstrap, "orders", records, commit=False)   # an aborted transaction
    set_group_config(bootstrap, "workers", {"share.auto.offset.reset": "earliest"})
    produce_avro(bootstrap, "orders", registry.url, ORDER_SCHEMA, [{"id": 1}])  # Confluent's wire format

``confluent_kafka`` is imported when a helper is called, not when this module is imported.
"""

from __future__ import annotations

import json
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from itertools import pairwise
from typing import Any

from aiokafka_lite.testing.mock_cluster import MockCluster, live_cluster
from aiokafka_lite.testing.schema_registry import confluent_client_config

Record = tuple[bytes | str | None, bytes | str | None] | Mapping[str, Any]


class ProduceError(RuntimeError):
    """At least one record was not acknowledged by the broker."""


def _confluent() -> Any:
    try:
        import confluent_kafka
        import confluent_kafka.admin
    except ImportError as exc:
        raise RuntimeError(
            "these helpers need confluent-kafka: pip install '.[testing]' in the aiokafka-lite clone") from exc
    return confluent_kafka


def _bootstrap_of(target: str | Any) -> str:
    return target if isinstance(target, str) else str(target.bootstrap_servers)


def create_topic(target: str | Any, name: str, partitions: int = 1, config: Mapping[str, str] | None = None,
                 timeout: float = 30.0, replication_factor: int = 1) -> None:
    """Create ``name`` and wait until its metadata shows every partition with a leader.

    ``target`` is a bootstrap string or any broker object from this package. A librdkafka mock
    cluster has no CreateTopics API, so for it the mock's own call is used.
    """
    bootstrap = _bootstrap_of(target)
    mock = target if isinstance(target, MockCluster) else live_cluster(bootstrap)
    if mock is not None:
        mock.create_topic(name, partitions, replication_factor)
        return
    admin = _confluent().admin
    client = admin.AdminClient({"bootstrap.servers": bootstrap})
    new_topic = admin.NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                               config=dict(config or {}))
    futures = client.create_topics([new_topic], operation_timeout=timeout, request_timeout=timeout)
    futures[name].result(timeout=timeout)
    _wait_for_leaders(client, name, partitions, timeout)


def set_group_config(target: str | Any, group: str, config: Mapping[str, str], timeout: float = 30.0) -> None:
    """Set a group's dynamic configs (KIP-848/KIP-932 group configs, e.g. ``share.auto.offset.reset``),
    the group existing yet or not; other settings of the group are left as they are."""
    admin = _confluent().admin
    client = admin.AdminClient({"bootstrap.servers": _bootstrap_of(target)})
    entries = [admin.ConfigEntry(name, value, incremental_operation=admin.AlterConfigOpType.SET)
               for name, value in config.items()]
    resource = admin.ConfigResource(admin.ResourceType.GROUP, group, incremental_configs=entries)
    futures = client.incremental_alter_configs([resource], request_timeout=timeout)
    for future in futures.values():
        future.result(timeout=timeout)


def _wait_for_leaders(client: Any, name: str, partitions: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        topic = client.list_topics(name, timeout=max(deadline - time.monotonic(), 0.1)).topics.get(name)
        if (topic is not None and topic.error is None and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values())):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"topic {name!r} has no leader for every partition after {timeout} s")
        time.sleep(0.05)


def _as_bytes(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _produce_args(topic: str, record: Record) -> dict[str, Any]:
    if not isinstance(record, Mapping):
        key, value = record
        return {"topic": topic, "key": _as_bytes(key), "value": _as_bytes(value)}
    unknown = set(record) - {"key", "value", "headers", "partition", "timestamp"}
    if unknown:
        raise ValueError(f"unknown record fields {sorted(unknown)}")
    args: dict[str, Any] = {"topic": topic, "key": _as_bytes(record.get("key")),
                            "value": _as_bytes(record.get("value"))}
    for field in ("headers", "partition", "timestamp"):
        if record.get(field) is not None:
            args[field] = record[field]
    return args


class _Deliveries:
    """Delivery reports of one produce() call: failures, and where each record landed."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.landed: dict[int, list[tuple[int, int]]] = {}  # partition -> [(send index, offset)]

    def callback(self, index: int) -> Callable[[Any, Any], None]:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                self.failures.append(f"{msg.topic()}[{msg.partition()}]: {err}")
            else:
                self.landed.setdefault(msg.partition(), []).append((index, msg.offset()))
        return on_delivery

    def out_of_order(self) -> str | None:
        """Where a partition's log order differs from the send order (tests rely on them being equal)."""
        for partition, landed in self.landed.items():
            offsets = [offset for _, offset in sorted(landed)]
            for earlier, later in pairwise(offsets):
                if later <= earlier:
                    return f"partition {partition}: a record sent later landed at offset {later}, before {earlier}"
        return None

    def check(self, count: int, in_order: bool = True) -> None:
        if self.failures:
            raise ProduceError(f"{len(self.failures)} of {count} records failed: {self.failures[:5]}")
        if not in_order:
            return
        misplaced = self.out_of_order()
        if misplaced is not None:
            raise ProduceError(f"records were written out of send order ({misplaced}): the producer retried "
                               f"without idempotence")


def _send_all(producer: Any, topic: str, records: Iterable[Record], deliveries: _Deliveries) -> int:
    count = 0
    for record in records:
        while True:
            try:
                producer.produce(on_delivery=deliveries.callback(count), **_produce_args(topic, record))
                break
            except BufferError:  # local queue full: let deliveries drain, then retry this record
                producer.poll(0.1)
        count += 1
        producer.poll(0)
    return count


def _flush(producer: Any, timeout: float) -> None:
    remaining = producer.flush(timeout)
    if remaining:
        raise ProduceError(f"{remaining} records still unacknowledged after {timeout} s")


def produce(target: str | Any, topic: str, records: Iterable[Record], compression: str = "none",
            timeout: float = 30.0, **producer_conf: Any) -> int:
    """Produce ``records`` ((key, value) pairs or dicts with key/value/headers/partition/timestamp),
    wait for every acknowledgement and return how many were sent; raise ProduceError on any failure.

    Extra librdkafka settings go in ``producer_conf`` with dots as underscores (``linger_ms=5``).
    Without idempotence a retried batch may land after later ones, or twice: it happens to the
    first records sent to a topic created a moment before. When order or exact counts matter, pass
    ``enable_idempotence=True`` (about 0.5 s more per call: librdkafka first gets a producer id);
    ProduceError then also reports any partition whose records did not land in the order given.

    Records with neither key nor partition go where librdkafka's sticky partitioner puts them: one
    partition per ``sticky.partitioning.linger.ms`` (10 ms), so a burst can leave partitions empty.
    Name the partition (``{"value": ..., "partition": i % partitions}``) when each must get records.
    """
    conf = {"bootstrap.servers": _bootstrap_of(target), "compression.type": compression,
            "linger.ms": 5, **{k.replace("_", "."): v for k, v in producer_conf.items()}}
    producer = _confluent().Producer(conf)
    deliveries = _Deliveries()
    count = _send_all(producer, topic, records, deliveries)
    _flush(producer, timeout)
    deliveries.check(count, in_order=str(conf.get("enable.idempotence")).lower() == "true")
    return count


def produce_transactional(target: str | Any, topic: str, records: Iterable[Record], *, commit: bool = True,
                          compression: str = "none", transactional_id: str | None = None,
                          timeout: float = 30.0, **producer_conf: Any) -> int:
    """Produce ``records`` in one transaction, then commit it (or abort it with ``commit=False``).

    Handy for read_committed tests: an aborted transaction leaves records plus an abort marker.
    """
    conf = {"bootstrap.servers": _bootstrap_of(target), "compression.type": compression,
            "transactional.id": transactional_id or f"aiokafka-lite-test-{uuid.uuid4().hex[:12]}",
            **{k.replace("_", "."): v for k, v in producer_conf.items()}}
    producer = _confluent().Producer(conf)
    producer.init_transactions(timeout)
    producer.begin_transaction()
    deliveries = _Deliveries()
    count = _send_all(producer, topic, records, deliveries)
    _flush(producer, timeout)
    try:
        deliveries.check(count)
    except ProduceError:
        producer.abort_transaction(timeout)
        raise
    if commit:
        producer.commit_transaction(timeout)
    else:
        producer.abort_transaction(timeout)
    return count


def produce_avro(target: str | Any, topic: str, registry_url: str, schema: str | Mapping[str, Any],
                 values: Iterable[Mapping[str, Any] | None], *, keys: Iterable[bytes | str | None] | None = None,
                 timeout: float = 30.0, **producer_conf: Any) -> int:
    """Produce ``values`` as Avro in Confluent's wire format, as a Java or confluent-kafka producer
    with a schema registry would: confluent-kafka's ``AvroSerializer`` registers ``schema`` under the
    subject ``<topic>-value`` at ``registry_url`` (the registry's Confluent API, e.g. the
    ``schema_registry`` fixture's ``.url``) and frames each value with the schema's id. ``keys`` (raw
    bytes or text, as many as the values) are sent as they are; without them keys are null. Returns
    the count; the rest is as ``produce()`` (pass ``enable_idempotence=True`` when order matters).
    """
    try:
        with warnings.catch_warnings():  # authlib, which the registry client imports, warns on import
            warnings.simplefilter("ignore")
            import confluent_kafka.schema_registry as registry
            import confluent_kafka.schema_registry.avro
            from confluent_kafka.serialization import MessageField, SerializationContext
    except ImportError as exc:
        raise RuntimeError("produce_avro needs confluent-kafka's schema registry and Avro support: "
                           "pip install 'confluent-kafka[avro]'") from exc
    values = list(values)
    key_list = list(keys) if keys is not None else [None] * len(values)
    if len(key_list) != len(values):  # checked before anything is registered or sent
        raise ValueError(f"{len(key_list)} keys for {len(values)} values: give one key per value, or none")
    client = registry.SchemaRegistryClient(confluent_client_config(registry_url))
    try:
        text = schema if isinstance(schema, str) else json.dumps(schema)
        serialize = confluent_kafka.schema_registry.avro.AvroSerializer(
            client, text, conf={"auto.register.schemas": True})
        context = SerializationContext(topic, MessageField.VALUE)
        framed = [serialize(value, context) for value in values]
    finally:
        client.close()
    return produce(target, topic, list(zip(key_list, framed, strict=True)), timeout=timeout, **producer_conf)
