"""No retry storm, no log storm, when a broker keeps failing (issue #11, item 6).

The real case: a coordinator that advertises a JoinGroup version it cannot parse accepts every
connection and drops it on every JoinGroup. librdkafka's mock cluster does exactly that when it
advertises JoinGroup v6 (our mock fixture narrows it to v5 because of this; here we widen it
again). Before the fix one consumer retried every ~100 ms and logged a WARNING per attempt.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.testing.mock_cluster import ApiKey, MockCluster

pytestmark = pytest.mark.asyncio

POLL_TIMEOUT = 0.2
POLL_SLACK = 0.3  # two shared cores: scheduling noise, not a speed target
RETRY_BACKOFF_MAX = 1.0
WINDOW = 9.0
SESSION_TIMEOUT_MS = 6000


@dataclass
class Line:
    at: float
    level: int
    logger: str
    message: str


class Recorder(logging.Handler):
    """Every aiokafka_lite log record, with its monotonic time."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[Line] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(Line(time.monotonic(), record.levelno, record.name, record.getMessage()))

    def at_least(self, level: int) -> list[Line]:
        return [line for line in self.lines if line.level >= level]


@pytest.fixture
def recorder():
    logger = logging.getLogger("aiokafka_lite")
    handler = Recorder()
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


async def poll_for(consumer: Consumer, seconds: float, durations: list[float]) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        began = loop.time()
        await consumer.poll(timeout=POLL_TIMEOUT)
        durations.append(loop.time() - began)


def join_attempts(lines: list[Line]) -> list[float]:
    """When each join attempt started: every attempt reconnects to the coordinator (the broker
    dropped the last connection), and the coordinator is the broker connected to most often."""
    connects: dict[str, list[float]] = {}
    for line in lines:
        if line.message.startswith("connected to "):
            connects.setdefault(line.message, []).append(line.at)
    return max(connects.values(), key=len, default=[])


async def test_join_dropped_every_time_backs_off_warns_once_and_reports_health(
        mock_cluster: MockCluster, unique_topic: str, unique_group: str, recorder: Recorder) -> None:
    mock_cluster.create_topic(unique_topic, partitions=2)
    mock_cluster.set_api_version(ApiKey.JOIN_GROUP, 0, 6)  # advertised, but dropped when sent
    consumer = Consumer(unique_topic, bootstrap_servers=mock_cluster.bootstrap_servers, group_id=unique_group,
                        session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=1000,
                        max_poll_interval_ms=60000, retry_backoff_ms=100,
                        retry_backoff_max_ms=int(RETRY_BACKOFF_MAX * 1000))
    durations: list[float] = []
    async with consumer:
        await poll_for(consumer, WINDOW, durations)
        assert consumer.assignment() == set()
        health = consumer.metrics().get("group_health")
        failing_lines = list(recorder.lines)

        mock_cluster.set_api_version(ApiKey.JOIN_GROUP, 0, 5)  # the broker is fixed
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while not consumer.assignment() and loop.time() < deadline:
            await poll_for(consumer, POLL_TIMEOUT, durations)
        assert consumer.assignment(), "the consumer did not join once JoinGroup was answered"
        recovered_health = consumer.metrics().get("group_health")

    attempts = join_attempts(failing_lines)
    intervals = [b - a for a, b in itertools.pairwise(attempts)]
    warnings = [line for line in failing_lines if line.level >= logging.WARNING]
    print(f"\n{len(attempts)} join attempts and {len(warnings)} WARNING lines in {WINDOW} s; intervals "
          f"{[round(i, 2) for i in intervals]}; longest poll {max(durations):.3f} s")
    # Backoff: 0.1, 0.2, 0.4, 0.8, then the 1.0 s cap, each +-20%. A flat 100 ms made ~80.
    assert 6 <= len(attempts) <= 16, intervals
    assert intervals[0] < 0.4, intervals
    assert all(0.8 * RETRY_BACKOFF_MAX - 0.05 <= i <= 1.2 * RETRY_BACKOFF_MAX + 0.3 for i in intervals[4:]), intervals
    assert len({round(i, 3) for i in intervals[4:]}) > 1, "no jitter"

    assert len(warnings) == 1, [w.message for w in warnings]
    assert "JoinGroup v6" in warnings[0].message
    assert "it advertises v0-v6" in warnings[0].message

    assert health is not None
    assert recovered_health is not None
    assert health["healthy"] is False
    assert "unreachable" in health["problem"]
    assert f"session_timeout_ms={SESSION_TIMEOUT_MS}" in health["problem"]
    assert "awaiting JoinGroup v6" in health["last_error"]
    assert recovered_health["healthy"] is True

    recovery = [line.message for line in recorder.lines[len(failing_lines):]
                if line.level == logging.INFO and "recovered" in line.message]
    assert len([m for m in recovery if "JoinGroup: recovered (JoinGroup v5 answered)" in m]) == 1, recovery
    assert len([m for m in recovery if f"group {unique_group}: join: recovered" in m]) == 1, recovery
    assert not recorder.at_least(logging.WARNING)[1:], "a WARNING after the first"
    assert max(durations) <= POLL_TIMEOUT + POLL_SLACK, max(durations)


# ---------------------------------------------------------------- a broker restart is normal operation

@pytest.fixture(scope="module")
def restartable_kafka():
    """A broker of this module's own: restarting the session's shared one would disturb others.
    Its PROXIED listener advertises a port for a JoinGroupDropper to listen on."""
    from aiokafka_lite.testing._process import BrokerUnavailable, free_port
    from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker

    broker = ApacheKafkaBroker(extra_listeners={"PROXIED": "PLAINTEXT"},
                               advertised_ports={"PROXIED": free_port()})
    try:
        broker.start()
    except BrokerUnavailable as exc:
        pytest.skip(f"Apache Kafka unavailable: {exc}")
    try:
        yield broker
    finally:
        broker.stop()


async def poll_until(consumer: Consumer, done, timeout: float, durations: list[float], what: str) -> list:
    records: list = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done(records):
        if loop.time() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s ({len(records)} records)")
        began = loop.time()
        records.extend(await consumer.poll(timeout=POLL_TIMEOUT))
        durations.append(loop.time() - began)
    return records


async def test_broker_restart_logs_no_warning(restartable_kafka, unique_topic: str, unique_group: str,
                                              recorder: Recorder) -> None:
    from aiokafka_lite.testing.helpers import create_topic, produce

    bootstrap = restartable_kafka.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=2)
    produce(bootstrap, unique_topic, [{"value": f"before-{i}", "partition": i % 2} for i in range(10)])
    consumer = Consumer(unique_topic, bootstrap_servers=bootstrap, group_id=unique_group,
                        auto_offset_reset="earliest", session_timeout_ms=30000, heartbeat_interval_ms=500,
                        request_timeout_ms=10000, default_api_timeout_ms=20000)
    durations: list[float] = []
    async with consumer:
        await poll_until(consumer, lambda got: len(got) >= 10, 60, durations, "the first records")
        restart = asyncio.create_task(asyncio.to_thread(restartable_kafka.restart))
        await poll_until(consumer, lambda _: restart.done(), 120, durations, "the restart")
        await restart
        produce(bootstrap, unique_topic, [{"value": f"after-{i}", "partition": i % 2} for i in range(10)])
        after = await poll_until(consumer, lambda got: len(got) >= 10, 60, durations, "records after the restart")
        assert {r.value for r in after} >= {f"after-{i}".encode() for i in range(10)}
        # A few more polls: late heartbeat or commit failures would log now.
        await poll_for(consumer, 3.0, durations)
        health = consumer.metrics().get("group_health")
    loud = [f"{line.logger} {logging.getLevelName(line.level)} {line.message}"
            for line in recorder.at_least(logging.WARNING)]
    info = [line.message for line in recorder.lines if line.level == logging.INFO]
    print(f"\nrestart: {len(loud)} WARNING+ lines, {len(info)} INFO lines; longest poll {max(durations):.3f} s")
    print("\n".join(info))
    assert loud == []
    assert health is not None
    assert health["healthy"] is True
    assert max(durations) <= POLL_TIMEOUT + POLL_SLACK, max(durations)


# ---------------------------------------------------------------- the same storm in front of Apache Kafka

class JoinGroupDropper:
    """A loopback proxy that reads Kafka request frames and, while ``dropping``, closes both
    sides as soon as a JoinGroup request arrives (a broker that cannot parse it)."""

    def __init__(self, upstream_port: int, port: int) -> None:
        self.upstream_port = upstream_port
        self.port = port
        self.dropping = True
        self.dropped = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> JoinGroupDropper:
        self._server = await asyncio.start_server(self._on_client, "127.0.0.1", self.port, reuse_address=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        await self._server.wait_closed()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        back = asyncio.create_task(self._copy(up_reader, writer))
        try:
            while True:
                header = await reader.readexactly(4)
                frame = await reader.readexactly(int.from_bytes(header, "big"))
                if self.dropping and int.from_bytes(frame[:2], "big") == ApiKey.JOIN_GROUP:
                    self.dropped += 1
                    return
                up_writer.write(header + frame)
                await up_writer.drain()
        except (asyncio.IncompleteReadError, OSError):
            return
        finally:
            back.cancel()
            await asyncio.wait([back])
            for w in (writer, up_writer):
                w.transport.abort()
            self._tasks.discard(task)

    @staticmethod
    async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            return


async def test_apache_kafka_behind_a_proxy_dropping_every_join_group(
        restartable_kafka, unique_topic: str, unique_group: str, recorder: Recorder) -> None:
    from aiokafka_lite.testing.helpers import create_topic

    create_topic(restartable_kafka.bootstrap_servers, unique_topic, partitions=2)
    proxy_port = restartable_kafka.advertised_ports["PROXIED"]
    dropper = JoinGroupDropper(restartable_kafka.listener_port("PROXIED"), proxy_port)
    durations: list[float] = []
    async with dropper:
        consumer = Consumer(unique_topic, bootstrap_servers=f"127.0.0.1:{proxy_port}", group_id=unique_group,
                            session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=1000)
        async with consumer:
            await poll_for(consumer, WINDOW, durations)
            dropped = dropper.dropped
            health = consumer.metrics().get("group_health")
            failing_lines = list(recorder.lines)
            dropper.dropping = False
            await poll_until(consumer, lambda _: bool(consumer.assignment()), 30, durations, "the join")
    warnings = [line.message for line in failing_lines if line.level >= logging.WARNING]
    print(f"\n{dropped} JoinGroup requests dropped in {WINDOW} s, {len(warnings)} WARNING lines")
    assert 6 <= dropped <= 16  # ~90 with a flat 100 ms
    assert len(warnings) == 1, warnings
    assert "JoinGroup v" in warnings[0]
    assert "it advertises v0-v" in warnings[0]
    assert health is not None
    assert health["healthy"] is False
    assert "awaiting JoinGroup v" in health["last_error"]
    recovery = [line.message for line in recorder.lines[len(failing_lines):]
                if line.level == logging.INFO and "recovered" in line.message]
    assert len([m for m in recovery if "JoinGroup: recovered" in m]) == 1, recovery
    assert not [line for line in recorder.at_least(logging.WARNING)][1:]
    assert max(durations) <= POLL_TIMEOUT + POLL_SLACK, max(durations)
