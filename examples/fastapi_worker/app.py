"""A FastAPI service with a Kafka consumer working in the background.

    cd examples/fastapi_worker    # uvicorn imports app from the current directory
    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 KAFKA_TOPICS=orders KAFKA_GROUP_ID=billing \\
        uvicorn app:app --host 127.0.0.1 --port 8000

- The lifespan creates one consumer and a task that starts it and polls it, and returns at once:
  the app serves while the task keeps trying to reach the cluster (``start()`` again every 0.25 s;
  the consumer logs one WARNING the first time). ``WORKER_GIVE_UP_MS`` (unset or 0: never) ends the
  process, as a SIGTERM would, when the cluster has not answered for that long. On shutdown
  (SIGTERM, Ctrl-C), whatever the task is doing (connecting, rebalancing, processing), it finishes
  the batch in hand within about a second, then ``close()`` commits and leaves the group
  (LeaveGroup, or a leave heartbeat under group_protocol="consumer"), so the group hands this
  worker's partitions to the others at once instead of after the session timeout.
- ``GET /health`` (readiness): 200 only while the member is in a stable group AND polling in time;
  503 with the reason otherwise: ``connecting: 127.0.0.1:9093 refused the connection (5 tries)``
  while the cluster does not answer (``metrics()["bootstrap_failures"]``), the last error when
  joining keeps failing (longer than max_poll_interval_ms) or the coordinator stays unreachable
  (longer than session_timeout_ms). Point a readiness probe at it.
- ``GET /live`` (liveness): 200 whenever the event loop answers. Point a liveness probe at it, not
  at /health: a cluster that is down is no reason to restart the pod.
- ``GET /metrics``: Prometheus's text format: the consumer's figures (records and bytes consumed,
  lag per partition, commits, rebalances, heartbeats, ...; see docs/prometheus.md) with
  ``client_id`` and ``group_id`` labels, plus how many records this worker processed and how many
  it skipped because they could not be deserialized. ``GET /metrics.json``: the same as JSON
  (``consumer.metrics()`` and the two counts).
- A record whose key or value the deserializer cannot read (a poison pill) does not stop the
  worker: poll() raises ``RecordDeserializationError``; :func:`dead_letter` logs it (publish its
  raw bytes to a dead-letter topic there if you keep one) and the worker seeks past it.

Any consumer setting can be given as ``KAFKA_<NAME>``, e.g. ``KAFKA_MAX_POLL_INTERVAL_MS=60000``;
other ``KAFKA_*`` variables (``KAFKA_HOME``, ``KAFKA_HEAP_OPTS`` where Kafka is installed) are not
settings and are ignored, with an INFO line naming them (a WARNING for a likely misspelling);
deserializers go in ``create_app(properties=...)`` by their field names (``value_deserializer``).
Replace :func:`handle` with your own processing.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Protocol

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from aiokafka_lite import Consumer, ConsumerRecord
from aiokafka_lite.config import settings_table
from aiokafka_lite.errors import KafkaTimeoutError, RecordDeserializationError
from aiokafka_lite.prometheus import TEXT_CONTENT_TYPE, ConsumerCollector

log = logging.getLogger("fastapi_worker")

ENV_PREFIX = "KAFKA_"
# KAFKA_ + a consumer setting's name, upper case. Other KAFKA_* variables are common where Kafka is
# installed (KAFKA_HOME, KAFKA_HEAP_OPTS, a broker image's KAFKA_ADVERTISED_LISTENERS): not ours.
SETTING_NAMES = frozenset(row.name for row in settings_table())
TOPICS_VARIABLE = "KAFKA_TOPICS"  # the example's own: comma-separated topics to subscribe to
# poll() returns at least this often, so shutdown waits at most about this long for the loop.
POLL_SECONDS = 1.0
# Each start() call waits this long (the attempt goes on between calls): a shutdown while connecting
# waits at most this long for the task.
CONNECT_WAIT_SECONDS = 0.25
GIVE_UP_VARIABLE = "WORKER_GIVE_UP_MS"  # the example's own: unset or 0 keeps trying to connect for ever


class InvalidEnvironment(ValueError):
    """An environment variable of the example's own with a value it cannot use."""


def give_up_seconds(env: Mapping[str, str]) -> float | None:
    """``WORKER_GIVE_UP_MS``: how long the worker tries to reach the cluster before it ends the
    process (None: for ever). InvalidEnvironment unless unset or a whole number of milliseconds >= 0."""
    text = env.get(GIVE_UP_VARIABLE, "").strip()
    if not text:
        return None
    try:
        milliseconds = int(text)
    except ValueError:
        milliseconds = -1
    if milliseconds < 0:
        raise InvalidEnvironment(f"{GIVE_UP_VARIABLE}={env[GIVE_UP_VARIABLE]!r}: expected a whole number of "
                                 "milliseconds, 0 or more (unset or 0: keep trying to reach the cluster for ever)")
    return milliseconds / 1000 if milliseconds else None


def exit_if_environment_invalid(env: Mapping[str, str]) -> None:
    """At import, before uvicorn serves: a value the worker could not use ends the process with one
    line (SystemExit's message on stderr), not a worker task that fails later behind a 503."""
    try:
        give_up_seconds(env)
    except InvalidEnvironment as exc:
        raise SystemExit(f"fastapi_worker: cannot start: {exc}") from None


async def connect(consumer: Any, stopping: asyncio.Event, give_up: float | None) -> bool:
    """``consumer.start()`` (a Consumer or a ShareConsumer) until it succeeds (True) or the service
    stops (False). Each call waits CONNECT_WAIT_SECONDS: the attempt goes on between calls; /health reads
    why it fails from ``metrics()["bootstrap_failures"]``. Past ``give_up`` seconds the process is
    ended as by a SIGTERM (an orchestrator restarts it) and the error is raised (/health says it)."""
    loop = asyncio.get_running_loop()
    deadline = None if give_up is None else loop.time() + give_up
    while not stopping.is_set():
        try:
            await consumer.start(timeout=CONNECT_WAIT_SECONDS)
        except KafkaTimeoutError as exc:
            if deadline is not None and loop.time() >= deadline:
                log.error("gave up reaching the cluster after %s=%.0f: %s; ending the process",
                          GIVE_UP_VARIABLE, give_up * 1000 if give_up else 0, exc)
                signal.raise_signal(signal.SIGTERM)  # uvicorn shuts down as for any SIGTERM
                raise
            continue
        log.info("connected to the cluster")
        return not stopping.is_set()
    return False


def properties_from_env(env: Mapping[str, str]) -> dict[str, str]:
    """``KAFKA_GROUP_ID=billing`` -> ``{"group.id": "billing"}``, for every variable that is
    ``KAFKA_`` + a consumer setting's name; the others are left alone (see :func:`ignored_env`)."""
    return {name.replace("_", "."): value for name, value in _settings_in(env).items()}


def _settings_in(env: Mapping[str, str]) -> dict[str, str]:
    return {var[len(ENV_PREFIX):].lower(): value for var, value in env.items()
            if var.startswith(ENV_PREFIX) and var[len(ENV_PREFIX):].lower() in SETTING_NAMES}


def ignored_env(env: Mapping[str, str]) -> dict[str, str | None]:
    """The ``KAFKA_*`` variables that name no setting, each with the setting it is close to (a
    likely misspelling) or None."""
    ignored: dict[str, str | None] = {}
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX) or var == TOPICS_VARIABLE:
            continue
        name = var[len(ENV_PREFIX):].lower()
        if name not in SETTING_NAMES:
            close = difflib.get_close_matches(name, SETTING_NAMES, n=1, cutoff=0.8)
            ignored[var] = ENV_PREFIX + close[0].upper() if close else None
    return ignored


def log_ignored_env(env: Mapping[str, str]) -> None:
    ignored = ignored_env(env)
    for var, setting in ignored.items():
        if setting is not None:
            log.warning("%s is not a consumer setting and is ignored; did you mean %s?", var, setting)
    others = [var for var, setting in ignored.items() if setting is None]
    if others:
        log.info("not consumer settings, ignored: %s (a setting is KAFKA_ + its name, e.g. "
                 "KAFKA_SESSION_TIMEOUT_MS)", ", ".join(others))


async def handle(record: ConsumerRecord) -> None:
    """Your processing goes here. It runs in the poll task: a slow handler delays the next poll(),
    and past max_poll_interval_ms the watchdog takes this member out of the group (see /health)."""
    log.debug("processed %s[%d]@%d", record.topic, record.partition, record.offset)


async def dead_letter(error: RecordDeserializationError) -> None:
    """A record the deserializer could not read; the worker seeks past it afterwards. Publish
    ``error.key`` / ``error.value`` (the raw bytes) and ``error.headers`` to a dead-letter topic
    here if you keep one; this example logs where the record is and why it failed."""
    tp = error.topic_partition
    log.warning("skipping the record at %s[%d]@%d: its %s does not deserialize (%r); raw key %r, "
                "value %d bytes", tp.topic, tp.partition, error.offset, error.origin, error.__cause__,
                error.key, len(error.value or b""))


class ServiceWorker(Protocol):
    """What the service runs: a consumer and the work around it (:class:`Worker` here, the
    processor's in process_app.py). ``required_properties`` override the environment's."""

    required_properties: ClassVar[Mapping[str, str]]
    consumer: Consumer

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    def failure(self) -> BaseException | None: ...
    def collector(self) -> Collector: ...  # the worker's own Prometheus figures
    def figures(self) -> dict[str, Any]: ...  # the same for /metrics.json
    def health_figures(self) -> dict[str, Any]: ...  # added to /health's body


class Worker:
    """One consumer and the task that polls it."""

    required_properties: ClassVar[Mapping[str, str]] = {}

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.processed = 0
        self.skipped = 0  # records that did not deserialize (see dead_letter)
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the task that connects, then polls; it does not wait for the cluster."""
        self._task = asyncio.create_task(self._run(), name="kafka worker")

    async def _run(self) -> None:
        if not await connect(self.consumer, self._stopping, give_up_seconds(os.environ)):
            return
        while not self._stopping.is_set():
            try:
                records = await self.consumer.poll(timeout=POLL_SECONDS)
            except RecordDeserializationError as error:
                # The records before it were handed out already; until we seek, every poll()
                # raises this again. The commit covers offsets up to it, never past it.
                await dead_letter(error)
                self.skipped += 1
                self.consumer.seek(error.topic_partition, error.offset + 1)
                continue
            for record in records:
                await handle(record)
                self.processed += 1

    async def stop(self) -> None:
        """Finish the batch in hand, then commit and leave the group (close)."""
        self._stopping.set()
        try:
            if self._task is not None:
                await self._task
        except Exception as exc:  # it had stopped by an error (/health said so); shut down anyway
            log.error("the worker had stopped: %r", exc)
        finally:
            await self.consumer.close()
            log.info("consumer closed: offsets committed, left the group")

    def failure(self) -> BaseException | None:
        """The error that ended the poll task, if it ended by one."""
        if self._task is None or not self._task.done() or self._task.cancelled():
            return None
        return self._task.exception()

    def collector(self) -> Collector:
        return WorkerFigures(self)

    def figures(self) -> dict[str, Any]:
        return {"records_processed": self.processed, "records_skipped": self.skipped}

    def health_figures(self) -> dict[str, Any]:
        return {}


class WorkerFigures(Collector):
    """The worker's own counts for Prometheus (the consumer's come from ConsumerCollector)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def collect(self) -> list[CounterMetricFamily]:
        return [CounterMetricFamily("fastapi_worker_records_processed", "Records handle() processed",
                                    value=self.worker.processed),
                CounterMetricFamily("fastapi_worker_records_skipped", "Records that did not deserialize",
                                    value=self.worker.skipped)]


def health_report(metrics: Mapping[str, Any], max_poll_interval: float,
                  failure: BaseException | None = None) -> tuple[bool, str]:
    """(healthy, reason): healthy only in a STABLE group with the last poll() within max_poll_interval."""
    if failure is not None:
        return False, f"the poll task stopped: {type(failure).__name__}: {failure}"
    if metrics.get("started") is False:
        return False, connecting_reason(metrics)
    group_health = metrics.get("group_health") or {}
    if group_health.get("healthy") is False:
        return False, f"{group_health['problem']}; last error: {group_health['last_error']}"
    state = metrics.get("group_state")
    if state != "STABLE":
        return False, f"group state is {state}, not STABLE"
    since = metrics.get("seconds_since_last_poll")
    if since is None:
        return False, "the consumer has not polled yet"
    if since >= max_poll_interval:
        return False, (f"{since:.1f} s since the last poll() exceeds max_poll_interval_ms="
                       f"{max_poll_interval * 1000:.0f}")
    return True, f"STABLE, last poll {since:.1f} s ago"


def connecting_reason(metrics: Mapping[str, Any]) -> str:
    """/health's reason before start() succeeded: why the consumer cannot reach the cluster."""
    return f"connecting: {metrics.get('bootstrap_failures') or 'no bootstrap server has answered yet'}"


def create_app(properties: Mapping[str, str] | None = None, topics: list[str] | None = None,
               worker_type: Callable[[Consumer], ServiceWorker] = Worker,
               title: str = "aiokafka-lite worker") -> FastAPI:
    """The service; settings default to the ``KAFKA_*`` environment variables, read at start-up."""
    required = getattr(worker_type, "required_properties", {})

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        give_up_seconds(os.environ)  # checked before anything starts (the worker reads it again)
        if properties is None:
            log_ignored_env(os.environ)
        props = dict(properties) if properties is not None else properties_from_env(os.environ)
        names = topics if topics is not None else os.environ.get(TOPICS_VARIABLE, "").split(",")
        worker = worker_type(Consumer.from_properties({**props, **required}, *[t for t in names if t]))
        await worker.start()
        app.state.worker = worker
        # The consumer's figures are written by the collector itself (fast at many partitions);
        # the app's own go through a registry of its own, as any prometheus_client metric would.
        app.state.prometheus = ConsumerCollector([worker.consumer])
        app.state.registry = CollectorRegistry()
        app.state.registry.register(worker.collector())
        try:
            yield
        finally:
            await worker.stop()

    app = FastAPI(title=title, lifespan=lifespan)
    app.get("/live")(live)

    @app.get("/health")
    async def health() -> JSONResponse:
        worker: ServiceWorker = app.state.worker
        metrics = worker.consumer.metrics()
        healthy, reason = health_report(metrics, worker.consumer.config.max_poll_interval, worker.failure())
        body = {"status": "ok" if healthy else "unavailable", "reason": reason,
                "group_state": metrics.get("group_state"),
                "seconds_since_last_poll": metrics.get("seconds_since_last_poll"),
                "last_error": (metrics.get("group_health") or {}).get("last_error"),
                **worker.health_figures()}
        return JSONResponse(body, status_code=200 if healthy else 503)

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        body = app.state.prometheus.text() + generate_latest(app.state.registry)
        return Response(body, media_type=TEXT_CONTENT_TYPE)

    @app.get("/metrics.json")
    async def metrics() -> dict[str, Any]:
        worker: ServiceWorker = app.state.worker
        return {**worker.consumer.metrics(), **worker.figures()}

    return app


async def live() -> dict[str, str]:
    """Liveness: the event loop answers (readiness, being in the group, is /health)."""
    return {"status": "ok"}


logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"))
exit_if_environment_invalid(os.environ)
app = create_app()
