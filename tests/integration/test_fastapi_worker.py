"""examples/fastapi_worker end to end: uvicorn on loopback, a real Apache Kafka, httpx requests."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import time
from types import ModuleType

import pytest

from aiokafka_lite import Consumer, OffsetAndMetadata, TopicPartition
from aiokafka_lite.errors import KafkaError
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import Poller
from ._fastapi_app import APP_DIR, get_or_none, running_worker
from ._protocols import GroupProtocol

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

PARTITIONS = 4
RECORDS = 200
SESSION_TIMEOUT_MS = 30000  # so only a leave can explain a fast hand-over (classic)
HANDOVER_BOUND = 5.0  # seconds from SIGTERM until the other member owns every partition


def load_app_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fastapi_worker_app", APP_DIR / "app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_health_report_rules():
    report = load_app_module().health_report
    stable = {"group_state": "STABLE", "seconds_since_last_poll": 0.5}
    assert report(stable, 300.0) == (True, "STABLE, last poll 0.5 s ago")
    healthy, reason = report({**stable, "group_state": "JOINING"}, 300.0)
    assert not healthy
    assert reason == "group state is JOINING, not STABLE"
    healthy, reason = report({**stable, "seconds_since_last_poll": 61.0}, 60.0)
    assert not healthy
    assert "exceeds max_poll_interval_ms=60000" in reason
    assert report({**stable, "seconds_since_last_poll": None}, 60.0)[0] is False
    healthy, reason = report(stable, 60.0, RuntimeError("boom"))
    assert not healthy
    assert "RuntimeError: boom" in reason
    failing = {"group_state": "UNJOINED", "seconds_since_last_poll": 0.1, "group_health": {
        "healthy": False, "problem": "joining group 'g' has failed for 61.0 s", "last_error": "dropped"}}
    assert report(failing, 60.0) == (False, "joining group 'g' has failed for 61.0 s; last error: dropped")
    assert report({**stable, "group_health": {"healthy": True}}, 300.0)[0] is True
    connecting = {"started": False, "group_state": None, "seconds_since_last_poll": None,
                  "bootstrap_failures": "127.0.0.1:9093 refused the connection (5 tries)"}
    assert report(connecting, 60.0) == (False, "connecting: 127.0.0.1:9093 refused the connection (5 tries)")
    assert report({**connecting, "bootstrap_failures": None}, 60.0) == (
        False, "connecting: no bootstrap server has answered yet")


def test_give_up_setting():
    give_up = load_app_module().give_up_seconds
    assert give_up({}) is None
    assert give_up({"WORKER_GIVE_UP_MS": "0"}) is None
    assert give_up({"WORKER_GIVE_UP_MS": "60000"}) == 60.0


def test_properties_from_env_maps_kafka_names():
    props = load_app_module().properties_from_env(
        {"KAFKA_BOOTSTRAP_SERVERS": "h:1", "KAFKA_GROUP_ID": "g", "KAFKA_TOPICS": "t", "HOME": "/root"})
    assert props == {"bootstrap.servers": "h:1", "group.id": "g"}


# Set where Kafka is installed, and in Kafka's container images: not consumer settings.
KAFKA_INSTALL_ENV = {"KAFKA_HOME": "/opt/kafka", "KAFKA_HEAP_OPTS": "-Xmx1G -Xms1G",
                     "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://kafka:9092"}


def test_properties_from_env_leaves_other_kafka_variables_alone():
    module = load_app_module()
    env = {"KAFKA_BOOTSTRAP_SERVERS": "h:1", "KAFKA_SESSION_TIMEOUT_MS": "10000", **KAFKA_INSTALL_ENV,
           "KAFKA_SESION_TIMEOUT_MS": "6000", "KAFKA_TOPICS": "t"}
    assert module.properties_from_env(env) == {"bootstrap.servers": "h:1", "session.timeout.ms": "10000"}
    assert module.ignored_env(env) == {"KAFKA_ADVERTISED_LISTENERS": None, "KAFKA_HEAP_OPTS": None,
                                       "KAFKA_HOME": None, "KAFKA_SESION_TIMEOUT_MS": "KAFKA_SESSION_TIMEOUT_MS"}


async def eventually(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what} not reached within {timeout} s (last: {last})")


def worker_env(protocol: GroupProtocol, **settings: str) -> dict[str, str]:
    """``KAFKA_*`` variables for the app: ``settings`` under ``protocol`` (the broker-owned
    session/heartbeat settings dropped under KIP-848)."""
    return {**os.environ, **{f"KAFKA_{name.upper()}": str(value)
                             for name, value in protocol.settings(settings).items()}}


@pytest.mark.asyncio
async def test_worker_serves_health_and_metrics_and_leaves_the_group_on_sigterm(
        apache_kafka_broker, unique_topic, unique_group, group_protocol, tmp_path):
    """/health reads metrics()["group_state"]: STABLE when healthy under either group protocol."""
    bootstrap = apache_kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=PARTITIONS)
    produce(bootstrap, unique_topic, [{"value": f"v{i}", "partition": i % PARTITIONS} for i in range(RECORDS)])
    env = worker_env(group_protocol, bootstrap_servers=bootstrap, topics=unique_topic, group_id=unique_group,
                     auto_offset_reset="earliest", session_timeout_ms=str(SESSION_TIMEOUT_MS),
                     heartbeat_interval_ms="500", client_id="fastapi-worker")
    other = Consumer(unique_topic, **group_protocol.settings(
        bootstrap_servers=bootstrap, group_id=unique_group, auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=300))
    # Without a leave, the group hands the worker's partitions over only after the session timeout.
    assert group_protocol.session_timeout({"session_timeout_ms": SESSION_TIMEOUT_MS}) >= 2 * HANDOVER_BOUND
    async with running_worker(env, tmp_path) as (server, http, log_path):
        await _check_running_worker(http, group_protocol.name)
        await _check_sigterm_hands_partitions_over(server, other, http)
    log_text = log_path.read_text()
    # uvicorn re-raises the signal it handled once it has shut down gracefully.
    assert server.returncode in (0, -signal.SIGTERM), log_text
    assert "consumer closed: offsets committed, left the group" in log_text
    assert "Finished server process" in log_text
    assert "Traceback" not in log_text


@pytest.mark.asyncio
async def test_worker_starts_where_kafka_is_installed(apache_kafka_broker, unique_topic, unique_group, tmp_path):
    """KAFKA_HOME, KAFKA_HEAP_OPTS and a broker image's KAFKA_ADVERTISED_LISTENERS in the environment:
    the worker starts, consumes and says once (INFO, not WARNING) that it ignored them."""
    bootstrap = apache_kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=PARTITIONS)
    produce(bootstrap, unique_topic, [{"value": f"v{i}", "partition": i % PARTITIONS} for i in range(RECORDS)])
    env = {**os.environ, **KAFKA_INSTALL_ENV, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_TOPICS": unique_topic,
           "KAFKA_GROUP_ID": unique_group, "KAFKA_AUTO_OFFSET_RESET": "earliest"}
    async with running_worker(env, tmp_path) as (server, http, log_path):
        async def all_processed():
            if server.returncode is not None:
                raise AssertionError(f"the worker exited with {server.returncode}:\n{log_path.read_text()}")
            response = await get_or_none(http, "/metrics.json")
            return response is not None and response.json()["records_processed"] == RECORDS

        await eventually(all_processed, 60, f"{RECORDS} records processed")
        assert (await http.get("/health")).status_code == 200
        server.send_signal(signal.SIGTERM)
        await asyncio.wait_for(server.wait(), 15)
    log_text = log_path.read_text()
    assert ("INFO:fastapi_worker:not consumer settings, ignored: KAFKA_ADVERTISED_LISTENERS, KAFKA_HEAP_OPTS, "
            "KAFKA_HOME") in log_text
    assert "WARNING" not in log_text
    assert "Traceback" not in log_text


async def _check_running_worker(http, protocol: str) -> None:
    async def healthy():
        response = await get_or_none(http, "/health")
        return response if response is not None and response.status_code == 200 else None

    response = await eventually(healthy, 60, "/health 200")
    body = response.json()
    assert body["status"] == "ok"
    assert body["group_state"] == "STABLE"

    async def all_processed():
        metrics = (await http.get("/metrics.json")).json()
        return metrics if metrics["records_processed"] >= RECORDS else None

    metrics = await eventually(all_processed, 30, f"{RECORDS} records processed")
    assert metrics["records_processed"] == RECORDS
    assert metrics["group_protocol"] == protocol
    assert metrics["group_state"] == "STABLE"
    assert len(metrics["assignment"]) == PARTITIONS
    assert metrics["heartbeats_sent"] >= 0
    assert set(metrics["lag"].values()) == {0}


async def _check_sigterm_hands_partitions_over(server, other: Consumer, http) -> None:
    async with other, Poller(other, poll_timeout=0.1) as poller:
        # The group rebalances to share the partitions between the worker and `other`.
        async def shared():
            metrics = (await http.get("/metrics.json")).json()
            return 0 < len(other.assignment()) < PARTITIONS and metrics["group_state"] == "STABLE" \
                and len(metrics["assignment"]) + len(other.assignment()) == PARTITIONS

        await eventually(shared, 60, "partitions shared between the worker and a second member")
        server.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        await eventually(_owns_all(other), 20, "the second member owning every partition")
        handover = time.monotonic() - stopped_at
        # Without a leave the coordinator would wait for the session timeout (30 s classic, 10 s KIP-848).
        assert handover < HANDOVER_BOUND, f"hand-over took {handover:.1f} s"
        # The worker committed what it processed: nothing is handed out twice.
        await asyncio.sleep(0.5)
        assert poller.records == []
    await asyncio.wait_for(server.wait(), 15)


def _owns_all(consumer: Consumer):
    async def check() -> bool:
        return len(consumer.assignment()) == PARTITIONS
    return check


@pytest.mark.asyncio
async def test_health_turns_unhealthy_with_the_last_error_while_joining_keeps_failing(
        mock_cluster, unique_topic, unique_group, tmp_path):
    """A coordinator that drops every JoinGroup (the mock advertises v6 but cannot parse it):
    past session_timeout_ms, /health says 503 with the error; once the broker is fixed, 200.

    Classic only: the librdkafka mock has no ConsumerGroupHeartbeat, and the fault is a JoinGroup one."""
    from aiokafka_lite.testing.mock_cluster import ApiKey

    mock_cluster.create_topic(unique_topic, partitions=2)
    mock_cluster.set_api_version(ApiKey.JOIN_GROUP, 0, 6)
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": mock_cluster.bootstrap_servers, "KAFKA_TOPICS": unique_topic,
           "KAFKA_GROUP_ID": unique_group, "KAFKA_SESSION_TIMEOUT_MS": "3000",
           "KAFKA_HEARTBEAT_INTERVAL_MS": "500", "KAFKA_MAX_POLL_INTERVAL_MS": "60000"}
    async with running_worker(env, tmp_path) as (server, http, log_path):
        async def unhealthy_with_reason():
            response = await get_or_none(http, "/health")
            if response is None or response.status_code != 503:
                return None
            return response if "unreachable" in response.json()["reason"] else None

        body = (await eventually(unhealthy_with_reason, 30, "/health 503 naming the coordinator")).json()
        assert body["status"] == "unavailable"
        assert "longer than session_timeout_ms=3000" in body["reason"]
        assert "awaiting JoinGroup v6" in body["last_error"]
        assert "awaiting JoinGroup v6" in body["reason"]

        mock_cluster.set_api_version(ApiKey.JOIN_GROUP, 0, 5)

        async def healthy():
            response = await get_or_none(http, "/health")
            return response if response is not None and response.status_code == 200 else None

        assert (await eventually(healthy, 30, "/health 200 after the fix")).json()["last_error"] is None
        server.send_signal(signal.SIGTERM)
        await asyncio.wait_for(server.wait(), 15)
    log_text = log_path.read_text()
    assert log_text.count("WARNING:aiokafka_lite") == 1, log_text
    assert "Traceback" not in log_text


@pytest.mark.asyncio
async def test_worker_logs_a_poison_pill_and_seeks_past_it(tansu_broker, unique_topic, unique_group, caplog):
    """In process on Tansu: a value that does not deserialize is logged with its partition and
    offset, counted in /metrics, and skipped; every other record is processed."""

    def refuse_poison(data: bytes | None) -> str:
        if data == b"POISON":
            raise ValueError("poison")
        return (data or b"").decode()

    create_topic(tansu_broker, unique_topic)
    produce(tansu_broker, unique_topic, [(None, v) for v in ("v0", "v1", "POISON", "v3", "v4")],
            enable_idempotence=True)
    app = load_app_module().create_app({
        "bootstrap.servers": tansu_broker.bootstrap_servers, "group.id": unique_group,
        "auto.offset.reset": "earliest", "session.timeout.ms": "6000", "heartbeat.interval.ms": "500",
        "value_deserializer": refuse_poison}, [unique_topic])
    async with app.router.lifespan_context(app):
        worker = app.state.worker

        async def all_processed() -> bool:
            return worker.processed >= 4 or worker.failure() is not None

        await eventually(all_processed, 30, "4 records processed")
        assert worker.failure() is None
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://worker") as http:
            metrics = (await http.get("/metrics.json")).json()
    assert (metrics["records_processed"], metrics["records_skipped"]) == (4, 1)
    [warning] = [r.getMessage() for r in caplog.records if r.name == "fastapi_worker"]
    assert f"skipping the record at {unique_topic}[0]@2: its value does not deserialize" in warning


@pytest.mark.asyncio
async def test_metrics_endpoint_serves_prometheus_text_for_two_consumers(apache_kafka_broker, unique_topic,
                                                                         unique_group):
    """In process on Apache Kafka: /metrics parses with prometheus_client's parser and holds the
    worker's real figures, and a second consumer registered on the same collector is told apart by
    its client_id and group_id; /metrics.json still serves metrics() as JSON."""
    from prometheus_client.parser import text_string_to_metric_families

    bootstrap = apache_kafka_broker.bootstrap_servers
    partitions, records = 3, 60
    create_topic(bootstrap, unique_topic, partitions=partitions)
    produce(bootstrap, unique_topic, [{"value": f"v{i}", "partition": i % partitions} for i in range(records)])
    app = load_app_module().create_app({
        "bootstrap.servers": bootstrap, "group.id": unique_group, "client.id": "worker-a",
        "auto.offset.reset": "earliest", "heartbeat.interval.ms": "300"}, [unique_topic])
    other_group = f"{unique_group}-b"
    other = Consumer(unique_topic, bootstrap_servers=bootstrap, group_id=other_group, client_id="worker-b",
                     auto_offset_reset="earliest", enable_auto_commit=False)
    async with app.router.lifespan_context(app), other:
        worker = app.state.worker
        got: list = []
        while len(got) < records:
            got.extend(await other.poll(timeout=1.0))
        await other.commit()
        with pytest.raises(KafkaError):  # a partition the broker does not have: counted apart
            await other.commit({TopicPartition(f"{unique_topic}-missing", 0): OffsetAndMetadata(1)}, timeout=1.0)
        app.state.prometheus.add(other)

        async def processed_and_heartbeating() -> bool:
            figures = worker.consumer.metrics()
            return worker.processed >= records and figures.get("heartbeat_rtt_seconds") is not None

        await eventually(processed_and_heartbeating, 30, f"{records} records processed and a heartbeat")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://worker") as http:
            response = await http.get("/metrics")
            as_json = (await http.get("/metrics.json")).json()
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    a = {"client_id": "worker-a", "group_id": unique_group}
    b = {"client_id": "worker-b", "group_id": other_group}
    assert value("fastapi_worker_records_processed_total") == records
    for who in (a, b):
        assert value("aiokafka_lite_consumed_records_total", **who) == records
        assert value("aiokafka_lite_consumed_bytes_total", **who) > records * 2  # at least the values' bytes
        assert value("aiokafka_lite_assigned_partitions", **who) == partitions
        lag = {dict(k[1])["partition"]: v for k, v in samples.items()
               if k[0] == "aiokafka_lite_partition_lag" and ("client_id", who["client_id"]) in k[1]}
        assert lag == {str(p): 0 for p in range(partitions)}
        assert value("aiokafka_lite_group_state", **who, state="STABLE") == 1
        assert value("aiokafka_lite_rebalances_total", **who, group_protocol="classic") >= 1
        assert value("aiokafka_lite_time_since_last_poll_seconds", **who) < 5
    assert ("aiokafka_lite_partition_lag", tuple(sorted({**a, "topic": unique_topic, "partition": "0"}.items()))) \
        in samples
    assert value("aiokafka_lite_commits_total", **b) == 1
    assert value("aiokafka_lite_commit_duration_seconds_count", **b) == 1
    assert 0 < value("aiokafka_lite_commit_duration_seconds_sum", **b) < 5
    assert value("aiokafka_lite_commit_failures_total", **b) == 1
    assert 0 < value("aiokafka_lite_heartbeat_round_trip_seconds", **a) < 5
    decoder = as_json["record_decoder"]
    assert value("aiokafka_lite_consumer_info", **a, group_protocol="classic", rebalance_protocol="eager",
                 heartbeat_mode="task", record_decoder=decoder) == 1
    assert as_json["records_processed"] == records
    assert as_json["records_consumed"] == records
    assert as_json["client_id"] == "worker-a"
