"""The test brokers serve real Kafka, and leave nothing behind when stopped.

Data goes in and out through confluent-kafka (librdkafka), a client independent of ours.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.testing import (
    ApacheKafkaBroker,
    ApiKey,
    BrokerUnavailable,
    MockCluster,
    ProduceError,
    TansuBroker,
    create_topic,
    produce,
    produce_transactional,
)
from aiokafka_lite.testing._kafka_jars import CACHE_ENV, is_cached, kafka_jars, missing_jars
from aiokafka_lite.testing._probe import _request, api_versions, kafka_ready, metadata_brokers
from aiokafka_lite.testing._process import port_accepts, processes_in_group
from aiokafka_lite.testing.apache_kafka import DEFAULT_VERSION, LAST_3X_VERSION
from aiokafka_lite.testing.plugin import kafka_broker_choice

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

RECORDS = 100


def consume_values(bootstrap: str, topic: str, expected: int, *, group: str | None = None,
                   timeout: float = 30.0, conf: dict[str, Any] | None = None) -> list[bytes]:
    """Read ``expected`` record values from the start of ``topic`` with a confluent-kafka consumer."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": group or f"reader-{topic}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        # Short sessions keep joins quick on Tansu: DEVIATIONS["join_delay"] (testing/tansu.py).
        "session.timeout.ms": 2000, "heartbeat.interval.ms": 500, **(conf or {})})
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is not None:
                raise AssertionError(f"consumer error: {message.error()}")
            values.append(message.value())
    finally:
        consumer.close()
    return values


def _records(count: int) -> list[tuple[bytes, bytes]]:
    return [(f"key-{i % 7}".encode(), f"value-{i}".encode()) for i in range(count)]


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def assert_gone(port: int, pid: int | None) -> None:
    assert not port_accepts(port), f"port {port} still accepts connections after stop()"
    if pid is not None:
        assert processes_in_group(pid) == [], "a broker process survived stop()"
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# -- every broker: real produce/consume ---------------------------------------------------------


def test_produce_and_consume_100_records(any_broker: Any, unique_topic: str, unique_group: str) -> None:
    any_broker.create_topic(unique_topic, partitions=3)
    sent = produce(any_broker.bootstrap_servers, unique_topic, _records(RECORDS))
    values = consume_values(any_broker.bootstrap_servers, unique_topic, RECORDS, group=unique_group)
    assert sent == RECORDS
    assert sorted(values) == sorted(value for _, value in _records(RECORDS))


def test_brokers_listen_on_localhost_only(any_broker: Any) -> None:
    host, port = _host_port(any_broker.bootstrap_servers)
    assert host == "127.0.0.1"
    advertised = metadata_brokers(host, port)
    assert advertised
    assert {broker_host for _, broker_host, _ in advertised} == {"127.0.0.1"}


def test_transactions_commit_and_abort(any_broker: Any, unique_topic: str) -> None:
    any_broker.require("transactions")
    any_broker.create_topic(unique_topic)
    produce_transactional(any_broker.bootstrap_servers, unique_topic, [(b"k", b"aborted")], commit=False)
    produce_transactional(any_broker.bootstrap_servers, unique_topic, [(b"k", b"committed")])
    values = consume_values(any_broker.bootstrap_servers, unique_topic, 1,
                            conf={"isolation.level": "read_committed"})
    assert values == [b"committed"]


# -- lifecycle: stop leaves nothing, restart keeps data -----------------------------------------


def test_tansu_stop_closes_port_and_process() -> None:
    broker = TansuBroker().start()
    port, pid = broker.port, broker.pid
    assert kafka_ready("127.0.0.1", port)
    broker.stop()
    assert_gone(port, pid)
    broker.stop()  # idempotent


_ORPHANING_SCRIPT = """
import os, signal, sys
from aiokafka_lite.testing import TansuBroker
broker = TansuBroker().start()
print(broker.port, broker.pid, broker.log_path.parent, flush=True)
os.kill(os.getpid(), signal.SIGKILL)   # die without any teardown
"""


def test_broker_dies_with_a_killed_test_process() -> None:
    # A SIGKILLed pytest cannot run fixture teardown; the watchdog must take the broker down.
    result = subprocess.run([sys.executable, "-c", _ORPHANING_SCRIPT], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == -9, result.stderr
    port_text, pid_text, workdir_text = result.stdout.split()
    port, pid, workdir = int(port_text), int(pid_text), Path(workdir_text)
    deadline = time.monotonic() + 10
    while (port_accepts(port) or processes_in_group(pid) or workdir.exists()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not port_accepts(port)
    assert processes_in_group(pid) == []
    assert not workdir.exists()


@pytest.fixture(params=["kafka4", "kafka39"])
def apache_kafka(request: pytest.FixtureRequest) -> ApacheKafkaBroker:
    fixture = {"kafka4": "apache_kafka_broker", "kafka39": "kafka39_broker"}[request.param]
    broker: ApacheKafkaBroker = request.getfixturevalue(fixture)
    return broker


def test_apache_kafka_shutdown_leaves_nothing_and_restart_keeps_data(
        apache_kafka: ApacheKafkaBroker, unique_topic: str) -> None:
    # The session broker itself is restarted (a fresh JVM costs seconds); it is ready again on
    # the same port when start() returns, so later tests do not notice.
    create_topic(apache_kafka.bootstrap_servers, unique_topic, partitions=2)
    produce(apache_kafka.bootstrap_servers, unique_topic, _records(20))
    port, first_pid = apache_kafka.port, apache_kafka.pid
    apache_kafka.shutdown()
    assert_gone(port, first_pid)
    apache_kafka.start()
    assert apache_kafka.port == port
    assert apache_kafka.pid != first_pid
    values = consume_values(apache_kafka.bootstrap_servers, unique_topic, 20)
    assert sorted(values) == sorted(value for _, value in _records(20))
    assert "KafkaConfig values" in apache_kafka.log_path.read_text()  # logs go to its file


def test_apache_kafka_survives_kill_and_restart(apache_kafka: ApacheKafkaBroker, unique_topic: str) -> None:
    create_topic(apache_kafka.bootstrap_servers, unique_topic)
    produce(apache_kafka.bootstrap_servers, unique_topic, _records(5), acks="all")
    first_pid = apache_kafka.pid
    apache_kafka.restart(kill=True)
    assert processes_in_group(first_pid or -1) == []
    values = consume_values(apache_kafka.bootstrap_servers, unique_topic, 5)
    assert sorted(values) == sorted(value for _, value in _records(5))


def test_mock_cluster_close_closes_every_port() -> None:
    cluster = MockCluster(num_brokers=2).start()
    ports = [_host_port(address)[1] for address in cluster.bootstrap_servers.split(",")]
    assert all(port_accepts(port) for port in ports)
    cluster.close()
    assert not any(port_accepts(port) for port in ports)
    cluster.close()  # idempotent


# -- mock cluster fault injection -----------------------------------------------------------------


def _list_topics(bootstrap: str, timeout: float) -> Any:
    admin = confluent_admin.AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(timeout=timeout)


def test_mock_broker_down_makes_metadata_fail_and_up_restores(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("t", partitions=3, replication_factor=3)
    assert "t" in _list_topics(mock_cluster.bootstrap_servers, 10).topics
    mock_cluster.broker_set_down(-1)
    with pytest.raises(confluent_kafka.KafkaException):
        _list_topics(mock_cluster.bootstrap_servers, 1.5)
    mock_cluster.broker_set_up(-1)
    assert "t" in _list_topics(mock_cluster.bootstrap_servers, 10).topics


def test_mock_pushed_errors_fail_the_next_requests(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("t")
    topic_authorization_failed = 29  # not retriable: the producer reports it at once
    mock_cluster.push_request_errors(ApiKey.PRODUCE, [topic_authorization_failed])
    with pytest.raises(ProduceError, match=r"(?i)authorization"):
        produce(mock_cluster, "t", [(b"k", b"v")], timeout=10)
    assert produce(mock_cluster, "t", [(b"k", b"v")], timeout=10) == 1  # the stack held one error
    mock_cluster.push_request_errors(ApiKey.PRODUCE, [topic_authorization_failed])
    mock_cluster.clear_request_errors(ApiKey.PRODUCE)
    assert produce(mock_cluster, "t", [(b"k", b"v")], timeout=10) == 1


def test_mock_rtt_delays_responses(mock_cluster: MockCluster) -> None:
    host, port = _host_port(mock_cluster.bootstrap_servers)
    mock_cluster.broker_set_rtt(-1, 400)
    began = time.monotonic()
    api_versions(host, port, timeout=5)
    assert time.monotonic() - began >= 0.35
    mock_cluster.broker_set_rtt(-1, 0)
    began = time.monotonic()
    api_versions(host, port, timeout=5)
    assert time.monotonic() - began < 0.35


def test_mock_broker_error_rtts_apply_to_one_broker_in_order(mock_cluster: MockCluster) -> None:
    unsupported_version = 35
    mock_cluster.broker_push_request_error_rtts(1, ApiKey.API_VERSIONS, [(unsupported_version, 300)])
    host, port = _host_port(mock_cluster.bootstrap_servers)  # broker 1 comes first
    began = time.monotonic()
    with pytest.raises(ConnectionError, match="error code 35"):
        api_versions(host, port, timeout=5)
    assert time.monotonic() - began >= 0.25
    assert api_versions(host, port, timeout=5)  # the stack held one error


def _find_group_coordinator(host: str, port: int, group: str) -> int:
    """FindCoordinator v0 by hand: the node id of the group's coordinator."""
    body = struct.pack(">h", len(group)) + group.encode()
    with socket.create_connection((host, port), timeout=5) as sock:
        response = _request(sock, 10, 0, 7, body)
    error_code, node_id = struct.unpack_from(">hi", response)
    assert error_code == 0
    return int(node_id)


def test_mock_coordinator_and_leader_can_be_moved(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("t", partitions=2, replication_factor=3)
    mock_cluster.partition_set_leader("t", 1, 3)
    partitions = _list_topics(mock_cluster.bootstrap_servers, 10).topics["t"].partitions
    assert partitions[1].leader == 3
    host, port = _host_port(mock_cluster.bootstrap_servers)
    for broker_id in (2, 3):
        mock_cluster.coordinator_set("group", "g", broker_id)
        assert _find_group_coordinator(host, port, "g") == broker_id


# -- prerequisites: missing tools skip with a reason; the jar cache is written once ----------------


def test_missing_java_is_reported_as_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(BrokerUnavailable, match="java"):
        ApacheKafkaBroker().start()


def _fake_mvn(bin_dir: Path, log: Path, *, succeed: bool) -> None:
    bin_dir.mkdir()
    script = bin_dir / "mvn"
    body = ('out=$(printf "%s\\n" "$@" | sed -n "s/^-DoutputDirectory=//p")\n'
            'ver=$(printf "%s\\n" "$@" | sed -n "s/^-Dkafka.version=//p")\n'
            f'echo run >> {log}\n'
            + ('mkdir -p "$out" && for a in kafka_2.13 kafka-server kafka-tools; do '
               'touch "$out/$a-$ver.jar"; done\n' if succeed
               else 'echo "no network" >&2; exit 1\n'))
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_jar_cache_downloads_once_and_marks_completion(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "mvn-runs"
    _fake_mvn(tmp_path / "bin", log, succeed=True)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    first = kafka_jars("9.9.9")
    second = kafka_jars("9.9.9")
    assert first == second == tmp_path / "cache" / "kafka-9.9.9"
    assert (first / "kafka_2.13-9.9.9.jar").exists()
    assert (first / ".complete").exists()
    assert log.read_text().count("run") == 1


def test_jar_cache_without_a_required_jar_is_resolved_again(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # A cache completed before kafka-tools joined the pom: marker present, kafka-tools jar absent.
    log = tmp_path / "mvn-runs"
    _fake_mvn(tmp_path / "bin", log, succeed=True)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    old = tmp_path / "cache" / "kafka-9.9.7"
    old.mkdir(parents=True)
    for name in ("kafka_2.13-9.9.7.jar", "kafka-server-9.9.7.jar", "obsolete-1.0.jar", ".complete"):
        (old / name).touch()
    assert missing_jars(old, "9.9.7") == ["kafka-tools"]
    assert not is_cached("9.9.7")
    assert kafka_jars("9.9.7") == old
    assert (old / "kafka-tools-9.9.7.jar").exists()
    assert not (old / "obsolete-1.0.jar").exists()  # replaced whole, not patched: no stale versions
    assert is_cached("9.9.7")
    assert log.read_text().count("run") == 1
    assert sorted(p.name for p in old.parent.iterdir()) == ["kafka-9.9.7", "kafka-9.9.7.lock"]


def test_failed_download_leaves_no_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_mvn(tmp_path / "bin", tmp_path / "mvn-runs", succeed=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(BrokerUnavailable, match="no network"):
        kafka_jars("9.9.8")
    assert not (tmp_path / "cache" / "kafka-9.9.8").exists()


# -- plugin --------------------------------------------------------------------------------------


def test_kafka_broker_fixture_follows_the_option_or_the_default(
        kafka_broker: Any, request: pytest.FixtureRequest) -> None:
    expected = {"tansu": "tansu", "kafka": f"kafka-{DEFAULT_VERSION}", "kafka39": f"kafka-{LAST_3X_VERSION}",
                "mock": "mock"}
    assert kafka_broker.name == expected[kafka_broker_choice(request.config).name]
    assert kafka_ready(*_host_port(kafka_broker.bootstrap_servers))


def test_quiet_runs_report_the_kafka_broker_choice_in_the_summary(tmp_path: Path) -> None:
    (tmp_path / "test_uses_it.py").write_text("def test_uses_it(kafka_broker):\n"
                                              "    assert kafka_broker.name == 'mock'\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--kafka-broker=mock"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "aiokafka-lite: kafka_broker was mock (--kafka-broker)" in done.stdout


def test_unique_names_differ_per_test_and_are_legal_topic_names(unique_topic: str, unique_group: str) -> None:
    assert unique_topic != unique_group
    assert len(unique_topic) <= 249
    assert all(ch.isalnum() or ch in "._-" for ch in unique_topic)
