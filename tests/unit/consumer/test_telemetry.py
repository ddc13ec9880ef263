"""KIP-714 on the client: telemetry_state's table driven by scripted answers, the metrics a push
carries (telemetry_metrics), and MetricsPush's loop against a scripted connection."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any, cast

import pytest

from aiokafka_lite.config import ConsumerConfig
from aiokafka_lite.consumer.telemetry import MetricsPush
from aiokafka_lite.consumer.telemetry_metrics import PREFIX, MetricsCollector
from aiokafka_lite.consumer.telemetry_state import (
    DEFAULT_INTERVAL,
    INVALID_RECORD,
    THROTTLING_QUOTA_EXCEEDED,
    UNKNOWN_SUBSCRIPTION_ID,
    UNSUPPORTED_COMPRESSION_TYPE,
    ZERO_UUID,
    Next,
    TelemetryState,
)
from aiokafka_lite.errors import KafkaConnectionError
from aiokafka_lite.protocol.api import Api
from aiokafka_lite.protocol.compression import decompress

INSTANCE = uuid.UUID("12345678-1234-5678-1234-567812345678")
TELEMETRY_TOO_LARGE = 118


def subscriptions(prefixes: tuple[str, ...] = ("org.apache.kafka.consumer.",), code: int = 0,
                  interval_ms: int = 2000, instance: uuid.UUID = INSTANCE, subscription_id: int = 7,
                  compression: tuple[int, ...] = (), throttle_ms: int = 0) -> dict[str, Any]:
    return {"throttle_time_ms": throttle_ms, "error_code": code, "client_instance_id": instance,
            "subscription_id": subscription_id, "accepted_compression_types": list(compression),
            "push_interval_ms": interval_ms, "telemetry_max_bytes": 1 << 20, "delta_temporality": False,
            "requested_metrics": list(prefixes)}


def push_answer(code: int = 0, throttle_ms: int = 0) -> dict[str, Any]:
    return {"throttle_time_ms": throttle_ms, "error_code": code}


def subscribed(jitter: float = 0.5) -> TelemetryState:
    state = TelemetryState(lambda: jitter)
    state.on_subscriptions(subscriptions())
    return state


# ---------------------------------------------------------------- the state table

def test_the_first_answer_assigns_the_instance_id_and_the_first_push_is_jittered() -> None:
    state = TelemetryState(lambda: 0.25)
    assert (state.instance_id, state.next) == (ZERO_UUID, Next.SUBSCRIBE)
    assert state.on_subscriptions(subscriptions()) == pytest.approx(2.0 * 0.75)
    assert (state.instance_id, state.next) == (INSTANCE, Next.PUSH)
    assert state.push_wanted
    # A later answer carries the zero UUID: the id stays.
    state.on_subscriptions(subscriptions(instance=ZERO_UUID))
    assert state.instance_id == INSTANCE


def test_no_metrics_requested_means_no_push_and_asking_again_after_the_interval() -> None:
    state = TelemetryState(lambda: 0.5)
    assert state.on_subscriptions(subscriptions(prefixes=())) == 2.0
    assert state.next is Next.SUBSCRIBE
    assert not state.push_wanted


def test_an_accepted_push_is_followed_by_the_next_after_the_interval() -> None:
    state = subscribed()
    assert state.on_push(push_answer()) == 2.0
    assert state.next is Next.PUSH
    assert state.on_push(push_answer(throttle_ms=5000)) == 5.0  # a throttled client waits longer


@pytest.mark.parametrize("code", [UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE])
def test_a_changed_subscription_is_asked_for_at_once(code: int) -> None:
    state = subscribed()
    assert state.on_push(push_answer(code)) == 0.0
    assert state.next is Next.SUBSCRIBE


@pytest.mark.parametrize("code", [TELEMETRY_TOO_LARGE, THROTTLING_QUOTA_EXCEEDED])
def test_too_large_or_throttled_pushes_wait_for_the_next_interval(code: int) -> None:
    state = subscribed()
    assert state.on_push(push_answer(code)) == 2.0
    assert state.next is Next.PUSH


@pytest.mark.parametrize("code", [INVALID_RECORD, 42, 31])  # INVALID_REQUEST, CLUSTER_AUTHORIZATION_FAILED
def test_a_refused_payload_or_request_stops_the_pushes(code: int) -> None:
    state = subscribed()
    state.on_push(push_answer(code))
    assert state.next is Next.STOPPED
    assert not state.push_wanted
    assert "PushTelemetry answered" in (state.stopped_because or "")


def test_no_answer_starts_over_after_the_interval() -> None:
    state = TelemetryState(lambda: 0.5)
    assert state.on_failure() == DEFAULT_INTERVAL  # no interval known yet: Java's default
    state = subscribed()
    assert state.on_failure() == 2.0
    assert state.next is Next.SUBSCRIBE
    assert state.instance_id == INSTANCE


def test_matching_is_by_prefix_and_an_empty_prefix_matches_everything() -> None:
    state = TelemetryState(lambda: 0.5)
    state.on_subscriptions(subscriptions(prefixes=("org.apache.kafka.consumer.coordinator.",)))
    assert state.subscription is not None
    assert state.subscription.wants("org.apache.kafka.consumer.coordinator.commit.total")
    assert not state.subscription.wants("org.apache.kafka.consumer.last.poll.seconds.ago")
    state.on_subscriptions(subscriptions(prefixes=("",)))
    assert state.subscription is not None
    assert state.subscription.wants("anything")


# ---------------------------------------------------------------- what a push carries

SNAPSHOT: dict[str, Any] = {
    "group_id": "g", "assignment": ["t-0", "t-1"], "lag": {"t-0": 3, "t-1": None}, "commits": 4,
    "records_consumed": 100, "bytes_consumed": 2000, "heartbeats_sent": 9, "rebalances": 1,
    "seconds_since_last_poll": 0.5, "commit_latency_seconds": {"count": 4, "sum": 0.008, "buckets": []},
}


def _values(points: list[Any]) -> dict[str, Any]:
    return {p.name[len(PREFIX):]: p for p in points}


def test_cumulative_sums_count_from_the_start_and_gauges_read_the_snapshot() -> None:
    collector = MetricsCollector(start_ns=100)
    got = _values(collector.collect(SNAPSHOT, now_ns=200, delta=False))
    assert got["fetch.manager.records.consumed.total"].value == 100
    assert got["fetch.manager.records.consumed.total"].start_ns == 100
    assert got["coordinator.assigned.partitions"].value == 2
    assert got["coordinator.commit.latency.avg"].value == pytest.approx(2.0)  # ms per commit
    assert got["fetch.manager.records.lag"].attributes == {"topic": "t", "partition": "0"}  # t-1: unknown
    later = _values(collector.collect({**SNAPSHOT, "records_consumed": 150}, now_ns=300, delta=False))
    assert later["fetch.manager.records.consumed.total"].value == 150
    assert "coordinator.commit.latency.avg" not in later  # no commit completed since


def test_without_a_group_there_are_no_coordinator_metrics() -> None:
    got = _values(MetricsCollector(start_ns=0).collect({**SNAPSHOT, "group_id": None}, now_ns=1, delta=False))
    assert not [name for name in got if name.startswith("coordinator.")]
    assert got["fetch.manager.records.consumed.total"].value == 100


def test_delta_sums_count_since_the_last_collection() -> None:
    collector = MetricsCollector(start_ns=100)
    collector.collect(SNAPSHOT, now_ns=200, delta=True)
    later = _values(collector.collect({**SNAPSHOT, "records_consumed": 150}, now_ns=300, delta=True))
    point = later["fetch.manager.records.consumed.total"]
    assert (point.value, point.start_ns, point.delta) == (50, 200, True)


# ---------------------------------------------------------------- the loop, on a scripted connection

class ScriptedConnection:
    def __init__(self, answers: list[Mapping[str, Any] | Exception], keys: tuple[int, ...] = (71, 72)) -> None:
        self.answers = answers
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.broker_versions = {key: (0, 0) for key in keys}
        self.drained = asyncio.Event()

    def version_for(self, api: Api, client_max: int | None = None) -> int:
        return 0

    async def send(self, api: Api, version: int, body: Mapping[str, Any], **_: Any) -> Mapping[str, Any]:
        self.sent.append((api.name, dict(body)))
        if not self.answers:
            self.drained.set()
            await asyncio.Event().wait()  # no more answers: hang until cancelled
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class ScriptedCluster:
    def __init__(self, conn: ScriptedConnection) -> None:
        self.conn = conn

    def least_loaded_node(self) -> int:
        return 1

    async def connection(self, node_id: int, timeout: Any = None) -> ScriptedConnection:
        return self.conn


async def _until_drained_then_close(conn: ScriptedConnection, push: MetricsPush) -> None:
    """Wait until the script is used up (the loop then hangs in a send), answer the terminating
    push, finish (close()'s graceful part)."""
    await asyncio.wait_for(conn.drained.wait(), 5)
    conn.answers.append(push_answer())
    await push.finish()


def _pusher(conn: ScriptedConnection, **settings: Any) -> MetricsPush:
    push = MetricsPush(ConsumerConfig(client_id="c", group_id="g", **settings), lambda: dict(SNAPSHOT),
                       jitter=lambda: 0.0)
    push.start(cast(Any, ScriptedCluster(conn)))
    return push


@pytest.mark.asyncio
async def test_subscribe_push_resubscribe_and_a_terminating_push_on_close() -> None:
    fast = subscriptions(interval_ms=20, compression=(4, 1))
    conn = ScriptedConnection([fast, push_answer(), push_answer(UNKNOWN_SUBSCRIPTION_ID),
                               {**fast, "subscription_id": 8, "client_instance_id": ZERO_UUID},
                               push_answer(), push_answer()])
    push = _pusher(conn)
    await _until_drained_then_close(conn, push)
    names = [name for name, _ in conn.sent]
    # The last regular push hangs (the script is used up) until close() cancels it; then the terminating one.
    assert names == ["GetTelemetrySubscriptions", "PushTelemetry", "PushTelemetry", "GetTelemetrySubscriptions",
                     "PushTelemetry", "PushTelemetry", "PushTelemetry", "PushTelemetry"]
    bodies = [body for _, body in conn.sent]
    assert bodies[0]["client_instance_id"] == ZERO_UUID
    assert all(b["client_instance_id"] == INSTANCE for b in bodies[1:])
    assert [b["subscription_id"] for b in bodies if "subscription_id" in b] == [7, 7, 8, 8, 8, 8]
    assert [b["terminating"] for b in bodies if "terminating" in b] == [False] * 5 + [True]
    last = bodies[-1]
    assert last["compression_type"] == 4  # zstd, first among those accepted
    assert PREFIX.encode() + b"coordinator.commit.total" in decompress(4, last["metrics"])
    assert push.state.next is Next.STOPPED
    assert push.pushes == 4  # accepted: three regular ones and the terminating one


@pytest.mark.asyncio
async def test_no_compression_unless_accepted_and_only_the_requested_metrics() -> None:
    only = subscriptions(prefixes=(PREFIX + "fetch.",), interval_ms=20)
    conn = ScriptedConnection([only, push_answer()])
    push = _pusher(conn)
    await _until_drained_then_close(conn, push)
    body = conn.sent[1][1]
    assert body["compression_type"] == 0
    assert PREFIX.encode() + b"fetch.manager.records.consumed.total" in body["metrics"]
    assert b"coordinator" not in body["metrics"]


@pytest.mark.asyncio
async def test_connection_failures_start_over_quietly(caplog: pytest.LogCaptureFixture) -> None:
    conn = ScriptedConnection([subscriptions(interval_ms=20), KafkaConnectionError("gone"),
                               subscriptions(interval_ms=20)])
    push = _pusher(conn)
    await _until_drained_then_close(conn, push)
    assert [name for name, _ in conn.sent][:4] == ["GetTelemetrySubscriptions", "PushTelemetry",
                                                  "GetTelemetrySubscriptions", "PushTelemetry"]
    assert not [r for r in caplog.records if r.levelno >= 30]


@pytest.mark.asyncio
async def test_nothing_is_sent_when_disabled_or_unsupported() -> None:
    conn = ScriptedConnection([subscriptions()])
    push = _pusher(conn, enable_metrics_push=False)
    await asyncio.sleep(0.05)
    await push.finish()
    assert conn.sent == []
    old = ScriptedConnection([subscriptions()], keys=())  # a broker without the APIs
    push = _pusher(old)
    await asyncio.sleep(0.05)
    await push.finish()
    assert old.sent == []
    assert push.state.next is Next.STOPPED


@pytest.mark.asyncio
async def test_the_forced_part_of_close_sends_no_terminating_push() -> None:
    """close()'s graceful part pushes the terminating metrics, within its timeout; the forced part
    (the timeout lapsed, or close(timeout=0)) only stops the loop: no request that could outlast it."""
    conn = ScriptedConnection([subscriptions(interval_ms=20), push_answer()])
    push = _pusher(conn)
    await asyncio.wait_for(conn.drained.wait(), 5)
    sent = len(conn.sent)
    await push.close()
    assert len(conn.sent) == sent
    assert not any(body.get("terminating") for _, body in conn.sent)


def test_java_name_turns_it_off() -> None:
    assert ConsumerConfig().enable_metrics_push is True  # Java's default
    assert ConsumerConfig.from_properties({"enable.metrics.push": "false"}).enable_metrics_push is False


@pytest.mark.asyncio
async def test_an_unexpected_error_stops_the_pushes_and_is_logged_below_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("snapshot bug")

    conn = ScriptedConnection([subscriptions(interval_ms=20)])
    push = MetricsPush(ConsumerConfig(), broken, jitter=lambda: 0.0)
    caplog.set_level("INFO", logger="aiokafka_lite")
    push.start(cast(Any, ScriptedCluster(conn)))
    for _ in range(100):
        if push.state.next is Next.STOPPED:
            break
        await asyncio.sleep(0.01)
    await push.finish()
    assert push.state.next is Next.STOPPED
    assert "snapshot bug" in (push.state.stopped_because or "")
    assert [r.levelname for r in caplog.records] == ["INFO"]
