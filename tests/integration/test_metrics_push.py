"""Client metrics push (KIP-714) against Apache Kafka (the fixtures' 4.4.0), as its telemetry plugin sees it.

A broker of this module's own runs ``telemetry_plugin/RecordingTelemetryReporter.java`` (compiled here
against the broker's jars) as its ``metric.reporters``; the plugin writes one JSON line per push it
receives, with the metric names it decodes from the OTLP payload. A client-metrics subscription
(``kafka-configs --entity-type client-metrics``) asks clients whose id starts with ``telemetry-``
for a few metric prefixes every second.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import shutil
import statistics
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.testing._kafka_jars import kafka_jars
from aiokafka_lite.testing._process import BrokerUnavailable, wait_until
from aiokafka_lite.testing.apache_kafka import DEFAULT_VERSION, ApacheKafkaBroker
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.java_clients import VerifiableConsumer, run_kafka_tool
from aiokafka_lite.testing.plugin import started_or_skipped

from ._consumers import poll_until, until

VERSION = DEFAULT_VERSION
# Kafka 4.4 moved ConfigCommand from the core jar (kafka.admin, Scala) to the tools jar.
CONFIG_COMMAND = "kafka.admin.ConfigCommand" if VERSION == "4.3.1" else "org.apache.kafka.tools.ConfigCommand"
PLUGIN = Path(__file__).parent / "telemetry_plugin" / "RecordingTelemetryReporter.java"
INTERVAL_MS = 1000
PREFIXES = ("org.apache.kafka.consumer.coordinator.commit.", "org.apache.kafka.consumer.fetch.manager.records.")


class TelemetryBroker:
    def __init__(self, broker: ApacheKafkaBroker, pushes: Path) -> None:
        self.broker = broker
        self.pushes_file = pushes

    def pushes(self, client_id: str) -> list[dict[str, Any]]:
        if not self.pushes_file.exists():
            return []
        lines = [json.loads(line) for line in self.pushes_file.read_text().splitlines() if line.strip()]
        return [push for push in lines if push["client_id"] == client_id]


@pytest.fixture(scope="module")
def telemetry_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TelemetryBroker]:
    javac = shutil.which("javac")
    if javac is None:
        pytest.skip("javac (a JDK 17+) is needed to compile the broker's telemetry plugin")
    work = tmp_path_factory.mktemp("telemetry")
    classes, pushes = work / "classes", work / "pushes.jsonl"
    try:
        jars = kafka_jars(VERSION)
    except BrokerUnavailable as exc:
        pytest.skip(f"Kafka {VERSION} jars unavailable: {exc}")
    subprocess.run([javac, "-d", str(classes), "-cp", f"{jars}/*", str(PLUGIN)], check=True, timeout=120)
    broker = ApacheKafkaBroker(VERSION, extra_properties={"metric.reporters": "RecordingTelemetryReporter"},
                               jvm_options=[f"-Daiokafka.telemetry.out={pushes}"], extra_classpath=[str(classes)])
    with started_or_skipped(broker):
        result = run_kafka_tool(CONFIG_COMMAND, [
            "--bootstrap-server", broker.bootstrap_servers, "--alter", "--entity-type", "client-metrics",
            "--entity-name", "aiokafka-lite-test", "--add-config",
            f"metrics=[{','.join(PREFIXES)}],interval.ms={INTERVAL_MS},match=[client_id=telemetry-.*]"])
        assert result.returncode == 0, result.stdout + result.stderr
        # The broker applies the subscription when its metadata publisher sees the record.
        wait_until(lambda: "Updating client metrics aiokafka-lite-test" in broker.log_path.read_text(),
                   timeout=30, what="the broker to apply the client-metrics subscription")
        yield TelemetryBroker(broker, pushes)


@pytest.mark.asyncio
async def test_pushes_the_requested_metrics_at_the_interval_and_a_terminating_push_on_close(
        telemetry_broker: TelemetryBroker, unique_topic: str, unique_group: str,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="aiokafka_lite")
    broker = telemetry_broker.broker
    create_topic(broker, unique_topic, partitions=2)
    produce(broker, unique_topic, [{"value": f"v{i}", "partition": i % 2} for i in range(20)])
    client_id = "telemetry-on"
    async with Consumer(unique_topic, bootstrap_servers=broker.bootstrap_servers, group_id=unique_group,
                        client_id=client_id, auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        await poll_until(consumer, lambda got: len(got) >= 20)
        await consumer.commit()

        async def keep_polling() -> None:
            while True:
                await consumer.poll(timeout=0.1)

        poller = asyncio.create_task(keep_polling())
        try:
            await until(lambda: len(telemetry_broker.pushes(client_id)) >= 4, timeout=30,
                        what="four pushes from our consumer")
        finally:
            poller.cancel()
            await asyncio.wait({poller})
    await until(lambda: any(p["terminating"] for p in telemetry_broker.pushes(client_id)), timeout=10,
                what="the terminating push")
    pushes = telemetry_broker.pushes(client_id)
    assert [p["terminating"] for p in pushes] == [False] * (len(pushes) - 1) + [True]
    assert len({p["client_instance_id"] for p in pushes}) == 1
    assert all(p["decode_error"] is None and p["push_interval_ms"] == INTERVAL_MS for p in pushes)
    # At the interval asked, within a tolerance for a loaded machine (the first push is jittered).
    regular = [p["time_ms"] for p in pushes if not p["terminating"]]
    gaps = [(b - a) / 1000 for a, b in itertools.pairwise(regular)]
    assert 0.8 <= statistics.median(gaps) <= 1.6, gaps
    # The requested metrics only, and the ones this consumer measures among them.
    names = {name for p in pushes for name in p["metrics"]}
    assert all(name.startswith(PREFIXES) for name in names), names
    assert {"org.apache.kafka.consumer.coordinator.commit.total",
            "org.apache.kafka.consumer.fetch.manager.records.consumed.total",
            "org.apache.kafka.consumer.fetch.manager.records.lag"} <= names, names
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.asyncio
async def test_nothing_is_pushed_with_enable_metrics_push_off(telemetry_broker: TelemetryBroker) -> None:
    servers = telemetry_broker.broker.bootstrap_servers
    async with (Consumer(bootstrap_servers=servers, client_id="telemetry-off", enable_metrics_push=False),
                Consumer(bootstrap_servers=servers, client_id="telemetry-witness")):
        # Both run until the witness, subscribed alike, has pushed twice: the other had that long too.
        await until(lambda: len(telemetry_broker.pushes("telemetry-witness")) >= 2, timeout=30,
                    what="two pushes from the witness")
    assert telemetry_broker.pushes("telemetry-off") == []


def test_the_plugin_sees_the_java_consumers_pushes_alike(telemetry_broker: TelemetryBroker, unique_topic: str,
                                                         unique_group: str) -> None:
    """The control: Kafka's own consumer, subscribed alike, pushes what the plugin records the same way."""
    broker = telemetry_broker.broker
    create_topic(broker, unique_topic)
    with VerifiableConsumer(broker.bootstrap_servers, unique_topic, unique_group,
                            properties={"client.id": "telemetry-java"}) as java:
        wait_until(lambda: len(telemetry_broker.pushes("telemetry-java")) >= 2, timeout=30,
                   what="two pushes from the Java consumer")
        java.stop()
    pushes = telemetry_broker.pushes("telemetry-java")
    assert all(p["decode_error"] is None for p in pushes)
    names = {name for p in pushes for name in p["metrics"]}
    assert "org.apache.kafka.consumer.coordinator.commit.total" in names
    assert all(name.startswith(PREFIXES) for name in names), names
