"""Dead-letter topics for share groups (KIP-1191): the broker's behaviour, pinned.

Apache Kafka 4.4.0 implements it in the broker (share.version 2, which formatting a 4.4 cluster
finalizes): with the group configs ``errors.deadletterqueue.topic.name`` (and
``errors.deadletterqueue.copy.record.enable``), a record the client rejects and a record archived
at ``share.delivery.count.limit`` are produced onto that topic by the broker itself. The client does
nothing new: it rejects or releases as before. 4.3.1 refuses the group configs. What the broker
wrote is printed (-s).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from aiokafka_lite import Consumer, ShareConsumer
from aiokafka_lite.share import ShareRecord
from aiokafka_lite.testing.helpers import create_topic, produce, set_group_config
from aiokafka_lite.testing.plugin import started_or_skipped

pytestmark = pytest.mark.asyncio

DEADLINE = 60.0
DLQ_ENABLED = {"errors.deadletterqueue.group.enable": "true"}  # the topic's consent to be a DLQ


@pytest.fixture(scope="module")
def kafka44(apache_kafka_broker: Any) -> Iterator[Any]:
    """Apache Kafka 4.4.0: the session's broker (the default), or one of its own when the session runs
    another version (AIOKAFKA_LITE_KAFKA_VERSION)."""
    from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker

    if apache_kafka_broker.version == "4.4.0":
        yield apache_kafka_broker
        return
    with started_or_skipped(ApacheKafkaBroker("4.4.0")) as broker:
        yield broker


def group_configs(dlq: str, copy: bool) -> dict[str, str]:
    return {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "1000",
            "share.delivery.count.limit": "2",  # the lowest the broker allows (group.share.min.delivery.count.limit)
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.copy.record.enable": "true" if copy else "false"}


async def reject_one_and_release_one_to_the_limit(bootstrap: str, topic: str, group: str) -> list[tuple[bytes, int]]:
    """``reject`` is rejected at its first delivery, ``release`` released at each of its 2; ``ok`` accepted."""
    seen: list[tuple[bytes, int]] = []
    decisions = {b"reject": "reject", b"release": "release"}
    async with asyncio.timeout(DEADLINE), ShareConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, share_acknowledgement_mode="explicit",
            request_timeout_ms=10000, retry_backoff_ms=50) as share:
        while seen.count((b"release", 2)) == 0:
            batch = await share.poll(0.5)
            for record in batch:
                seen.append((record.value, record.delivery_count))
                share.acknowledge(record, decisions.get(record.value, "accept"))
            if batch:
                assert set((await share.commit(timeout=10)).values()) <= {None}
        later: list[ShareRecord] = []
        loop = asyncio.get_running_loop()
        until = loop.time() + 2.0  # longer than the 1 s lock: nothing archived comes back
        while loop.time() < until:
            later.extend(await share.poll(0.5))
    assert later == [], [(r.value, r.delivery_count) for r in later]
    return seen


async def read_topic(bootstrap: str, topic: str, count: int) -> list[Any]:
    async with asyncio.timeout(DEADLINE), Consumer(bootstrap_servers=bootstrap, group_id=None,
                                                   auto_offset_reset="earliest",
                                                   allow_auto_create_topics=False) as consumer:
        partitions = await consumer.partitions_for(topic)
        if not partitions:
            return []
        consumer.assign(sorted(partitions))
        ends = await consumer.end_offsets(sorted(partitions))
        records: list[Any] = []
        while len(records) < min(count, sum(ends.values())):
            records.extend(await consumer.poll(0.5))
        return records


ARCHIVED_REGARDLESS = "Failed to write to DLQ, proceeding to ARCHIVED regardless."


def broker_log_count(broker: Any, line: str) -> int:
    return int(broker.log_path.read_text(errors="replace").count(line))


def context_headers(record: Any) -> dict[str, bytes]:
    return dict(record.headers)


@pytest.mark.parametrize("copy", [True, False], ids=["copy", "headers-only"])
async def test_a_rejected_record_and_one_archived_at_the_delivery_limit_land_in_the_dead_letter_topic(
        kafka44: Any, unique_topic: str, unique_group: str, copy: bool) -> None:
    bootstrap, dlq = kafka44.bootstrap_servers, f"dlq.{unique_topic}"
    create_topic(kafka44, unique_topic)
    create_topic(kafka44, dlq, config=DLQ_ENABLED)
    produce(kafka44, unique_topic, [{"key": b"k", "value": b"reject", "headers": [("trace", b"t1")],
                                     "timestamp": 1_700_000_000_000},
                                    {"value": b"release"}, {"value": b"ok"}])
    set_group_config(kafka44, unique_group, group_configs(dlq, copy))
    seen = await reject_one_and_release_one_to_the_limit(bootstrap, unique_topic, unique_group)
    dead = await read_topic(bootstrap, dlq, 2)
    for record in dead:
        print(f"\n{dlq}@{record.offset}: key={record.key!r} value={record.value!r} "
              f"timestamp={record.timestamp} headers={record.headers}")
    assert sorted(seen) == [(b"ok", 1), (b"reject", 1), (b"release", 1), (b"release", 2)]
    assert [context_headers(r) for r in dead] == [
        {"__dlq.errors.topic": unique_topic.encode(), "__dlq.errors.partition": b"0", "__dlq.errors.offset": b"0",
         "__dlq.errors.group": unique_group.encode(), "__dlq.errors.delivery.count": b"1",
         "__dlq.errors.message": b"Offset rejected by client."},
        {"__dlq.errors.topic": unique_topic.encode(), "__dlq.errors.partition": b"0", "__dlq.errors.offset": b"1",
         "__dlq.errors.group": unique_group.encode(), "__dlq.errors.delivery.count": b"2",
         "__dlq.errors.message": b"Offset delivery count exceeded the threshold."},
    ]
    if copy:  # key and value copied; the original's headers and timestamp are not
        assert [(r.key, r.value) for r in dead] == [(b"k", b"reject"), (None, b"release")]
        assert all(r.timestamp > 1_700_000_000_000 for r in dead)
    else:
        assert [(r.key, r.value) for r in dead] == [(None, None), (None, None)]


async def test_without_a_usable_dead_letter_topic_the_records_are_archived_and_nothing_is_written(
        kafka44: Any, unique_topic: str, unique_group: str) -> None:
    """The broker's behaviour (4.4.0): a missing DLQ topic (not created: the broker's
    errors.deadletterqueue.auto.create.topics.enable is false by default), a topic without
    errors.deadletterqueue.group.enable, or a name without the broker's prefix
    (errors.deadletterqueue.topic.name.prefix, "dlq.") is accepted as the group config; the broker
    logs "Failed to write to DLQ, proceeding to ARCHIVED regardless." and archives the records."""
    bootstrap = kafka44.bootstrap_servers
    failures_before = broker_log_count(kafka44, ARCHIVED_REGARDLESS)
    cases = {"missing": (f"dlq.{unique_topic}.missing", None),
             "not-enabled": (f"dlq.{unique_topic}.plain", {}),
             "no-prefix": (f"{unique_topic}.dead", DLQ_ENABLED)}
    for case, (dlq, topic_config) in cases.items():
        topic, group = f"{unique_topic}.{case}", f"{unique_group}.{case}"
        create_topic(kafka44, topic)
        if topic_config is not None:
            create_topic(kafka44, dlq, config=topic_config)
        produce(kafka44, topic, [{"value": b"reject"}, {"value": b"release"}, {"value": b"ok"}])
        set_group_config(kafka44, group, group_configs(dlq, copy=True))
        seen = await reject_one_and_release_one_to_the_limit(bootstrap, topic, group)
        assert sorted(seen) == [(b"ok", 1), (b"reject", 1), (b"release", 1), (b"release", 2)], case
        assert await read_topic(bootstrap, dlq, 2) == [], case
    assert broker_log_count(kafka44, ARCHIVED_REGARDLESS) - failures_before == 2 * len(cases)
    with pytest.raises(Exception, match=r"INVALID_CONFIG.*must not start with '__'"):
        set_group_config(kafka44, unique_group, {"errors.deadletterqueue.topic.name": "__dead"})


async def test_kafka_4_3_refuses_the_dead_letter_group_configs(unique_group: str) -> None:
    """The broker's behaviour before KIP-1191 (4.3.1, started for this test): an unknown group config,
    INVALID_CONFIG; a rejected record is simply archived (test_share_consumer.py on 4.3.1)."""
    from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker

    with started_or_skipped(ApacheKafkaBroker("4.3.1")) as kafka43:
        for name, value in (("errors.deadletterqueue.topic.name", "dlq.jobs"),
                            ("errors.deadletterqueue.copy.record.enable", "true")):
            with pytest.raises(Exception, match=rf"INVALID_CONFIG.*Unknown group config name: {name}"):
                set_group_config(kafka43, unique_group, {name: value})
