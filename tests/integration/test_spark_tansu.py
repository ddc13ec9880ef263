"""The Spark source's driver says when the broker's "latest" offsets cannot be trusted (Tansu)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from aiokafka_lite.spark.kafka_io import DriverLookups  # after the skips: the package imports pyspark
from aiokafka_lite.spark.options import LATEST, parse_options

RECORDS = 1000


def _latest_and_warnings(broker: Any, topic: str, caplog: pytest.LogCaptureFixture) -> tuple[int, list[str]]:
    create_topic(broker, topic, partitions=3)
    produce(broker, topic, [(f"k{i}", f"v{i}") for i in range(RECORDS)])
    options = parse_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic},
                            streaming=False)
    assert options.ending.default == LATEST
    with caplog.at_level(logging.WARNING, logger="aiokafka_lite.spark"), DriverLookups(options) as lookups:
        tps = lookups.partitions()
        assert sorted(tps) == [TopicPartition(topic, p) for p in range(3)]
        ends = lookups.resolve(tps, options.ending)
        lookups.resolve(tps, options.ending)  # a second look-up: no second warning
    return sum(ends.values()), [r.getMessage() for r in caplog.records if r.name == "aiokafka_lite.spark"]


def test_driver_warns_once_that_tansu_latest_offsets_miss_records(
        tansu_broker: Any, unique_topic: str, caplog: pytest.LogCaptureFixture) -> None:
    latest, warnings = _latest_and_warnings(tansu_broker, unique_topic, caplog)
    assert latest < RECORDS  # the data problem is real: a read up to these offsets is short
    [warning] = warnings
    assert "is Tansu: reads up to its latest offsets can miss records" in warning
    assert "DEVIATIONS['list_offsets_latest']" in warning


def test_driver_is_silent_on_apache_kafka(apache_kafka_broker: Any, unique_topic: str,
                                          caplog: pytest.LogCaptureFixture) -> None:
    latest, warnings = _latest_and_warnings(apache_kafka_broker, unique_topic, caplog)
    assert latest == RECORDS
    assert warnings == []
