"""A ShareConsumer's Prometheus families against the fixtures' Apache Kafka: a consumer registered
as a Consumer is (``register()``) accepts records, releases one, rejects one, keeps one's lock
while a block runs three lock durations and lets another's lapse; a scrape of the registry says
each of those, and the records handed out by delivery count. What it scraped is printed (-s).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

pytest.importorskip("prometheus_client")

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from aiokafka_lite import ShareConsumer
from aiokafka_lite.prometheus import register
from aiokafka_lite.share import ShareRecord

from .test_share_consumer import DEADLINE, prepare, settings

pytestmark = pytest.mark.asyncio

LOCK_MS = 1500  # the group's share.record.lock.duration.ms
SLOW = 3 * LOCK_MS / 1000  # the renewed record's block: three lock durations
FATE = {0: "accept", 1: "accept", 2: "renew", 3: "release", 4: "reject", 5: "lapse"}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(registry: CollectorRegistry) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out[s.name, tuple(sorted(s.labels.items()))] = s.value
    return out


def _value(got: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted({"client_id": "jobs-1", **labels}.items())))
    assert key in got, f"no sample {name}{labels}: {sorted(n for n, _ in got if n.startswith('aiokafka_lite_share'))}"
    return got[key]


async def _first_deliveries(share: ShareConsumer) -> list[ShareRecord]:
    """Offsets 0-5, each decided by its FATE as it comes (5 is held undecided: its lock lapses)."""
    seen: list[ShareRecord] = []
    async with asyncio.timeout(DEADLINE):
        while len(seen) < len(FATE):
            got = await share.poll(1.0)
            seen += got
            for record in got:
                fate = FATE[record.offset]
                if fate in ("accept", "release", "reject"):
                    share.acknowledge(record, fate)
            await share.commit(timeout=10)  # the decisions go now, well within the lock
            for record in got:
                if FATE[record.offset] == "renew":
                    async with share.renewing(record):
                        await asyncio.sleep(SLOW)
                    share.acknowledge(record, "accept")
                    await share.commit(timeout=10)
    return seen


async def _second_deliveries(share: ShareConsumer) -> list[ShareRecord]:
    """In a task of its own (the first task still holds offset 5's first delivery): the released
    record and the lapsed one, back with delivery count 2; both accepted."""
    seen: list[ShareRecord] = []
    async with asyncio.timeout(DEADLINE):
        while {r.offset for r in seen} != {3, 5}:
            got = await share.poll(1.0)
            for record in got:
                share.acknowledge(record, "accept")
            seen += got
    return seen


async def test_a_share_consumers_records_by_fate_in_its_prometheus_families(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, caplog: pytest.LogCaptureFixture) -> None:
    broker = apache_kafka_broker
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    prepare(broker, unique_topic, unique_group, [b"job%d" % i for i in range(len(FATE))], lock_ms=LOCK_MS)
    registry = CollectorRegistry()
    async with ShareConsumer(unique_topic, **settings(broker, unique_group, client_id="jobs-1",
                                                      share_acknowledgement_mode="explicit")) as share:
        register(share, registry=registry)
        first = await _first_deliveries(share)
        second = await asyncio.create_task(_second_deliveries(share))
        assert not [error for error in (await share.commit(timeout=10)).values() if error is not None]
        got, snapshot = _scrape(registry), share.metrics()
    shown = {(n, dict(k).get("type") or dict(k).get("le") or ""): v for (n, k), v in got.items() if "_share_" in n}
    print(f"\nfirst deliveries {[(r.offset, r.delivery_count) for r in first]}, second "
          f"{[(r.offset, r.delivery_count) for r in second]}; scraped {shown}")
    assert sorted((r.offset, r.delivery_count) for r in first) == [(i, 1) for i in range(6)]
    assert sorted((r.offset, r.delivery_count) for r in second) == [(3, 2), (5, 2)]
    who = {"group_id": unique_group}
    assert _value(got, "aiokafka_lite_share_consumer_info", **who, acknowledgement_mode="explicit") == 1
    assert _value(got, "aiokafka_lite_share_acquired_records_total", **who) == 8  # 6, then 3 and 5 again
    assert _value(got, "aiokafka_lite_consumed_records_total", **who) == 8
    assert _value(got, "aiokafka_lite_share_acknowledged_records_total", **who, type="accept") == 5
    assert _value(got, "aiokafka_lite_share_acknowledged_records_total", **who, type="release") == 1
    assert _value(got, "aiokafka_lite_share_acknowledged_records_total", **who, type="reject") == 1
    assert _value(got, "aiokafka_lite_share_lapsed_records_total", **who) == 1  # offset 5, held past its lock
    renewed = _value(got, "aiokafka_lite_share_renewed_records_total", **who)
    assert renewed >= 2, "offset 2's lock was kept through three lock durations"  # at half of each lock
    assert renewed == snapshot["lock_renewals"]["records_renewed"] + snapshot["renewed"]
    assert _value(got, "aiokafka_lite_share_lock_renewal_failures_total", **who) == 0
    assert _value(got, "aiokafka_lite_share_delivery_count_bucket", **who, le="1.0") == 6
    assert _value(got, "aiokafka_lite_share_delivery_count_bucket", **who, le="2.0") == 8
    assert _value(got, "aiokafka_lite_share_delivery_count_bucket", **who, le="+Inf") == 8
    assert _value(got, "aiokafka_lite_share_delivery_count_count", **who) == 8
    assert _value(got, "aiokafka_lite_share_delivery_count_sum", **who) == 10
    assert _value(got, "aiokafka_lite_share_held_records", **who) == 0
    assert _value(got, "aiokafka_lite_share_acknowledgement_errors_total", **who) == 0
    assert _value(got, "aiokafka_lite_group_state", **who, state="STABLE") == 1
    assert _value(got, "aiokafka_lite_heartbeats_total", **who) >= 1
    assert _value(got, "aiokafka_lite_polls_total", **who) == snapshot["polls"]
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING], "a healthy run warns"
