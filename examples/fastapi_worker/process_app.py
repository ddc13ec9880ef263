"""app.py's service with many records in flight: aiokafka_lite.processing instead of a poll loop.

    cd examples/fastapi_worker
    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 KAFKA_TOPICS=orders KAFKA_GROUP_ID=billing \\
        PROCESS_CONCURRENCY=100 uvicorn process_app:app --host 127.0.0.1 --port 8000

- The lifespan creates a consumer (auto-commit off: the processor commits the watermark) and a task
  that starts it as app.py's does (the app serves at once; ``WORKER_GIVE_UP_MS``), then runs a
  Processor running :func:`handle` on up to ``PROCESS_CONCURRENCY`` records at once (default 50),
  each key's records in order (``PROCESS_ORDERING``: key, partition or none). On shutdown the
  processor stops (handlers in flight get ``drain_timeout``, the watermark is committed), then
  ``close()`` leaves the group; a SIGTERM while connecting closes at once.
- ``GET /health`` (readiness): app.py's (``connecting: ...`` until the cluster answers; then a
  STABLE group, polled within max_poll_interval_ms: the processor polls all along, however long
  handlers take), and 503 once the processor has stopped by an error. The body adds the records in
  flight and held. ``GET /live`` (liveness): 200 while the event loop answers.
- ``GET /metrics``: the consumer's Prometheus figures plus the processor's (``fastapi_worker_process_*``:
  processed, failed, skipped, retries; in flight, held, paused partitions). ``GET /metrics.json``:
  ``consumer.metrics()`` with ``processing``: ``Processor.metrics()``.
- A record whose handler fails every attempt goes to :func:`dead_letter` (logged here).

Settings as in app.py (``KAFKA_<NAME>``). Keys and values stay bytes: a deserializer that raises
would stop the processor (app.py shows the poison-pill handling of a plain poll loop).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from app import connect, create_app, exit_if_environment_invalid, give_up_seconds
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from aiokafka_lite import Consumer, ConsumerRecord
from aiokafka_lite.processing import Processor

log = logging.getLogger("fastapi_worker")


async def handle(record: ConsumerRecord) -> None:
    """Your processing goes here: an HTTP call, a database write. Many run at once."""
    await asyncio.sleep(0.005)
    log.debug("processed %s[%d]@%d", record.topic, record.partition, record.offset)


async def dead_letter(record: ConsumerRecord, error: Exception) -> None:
    """A record whose handler failed every attempt: publish it to a dead-letter topic here."""
    log.warning("dead letter %s[%d]@%d: %r", record.topic, record.partition, record.offset, error)


class ProcessingWorker:
    """A consumer and a Processor running :func:`handle` on it (app.py's ServiceWorker)."""

    # The processor commits the watermark; an auto-commit would commit past unfinished records.
    required_properties: ClassVar[Mapping[str, str]] = {"enable.auto.commit": "false"}

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.processor = Processor(consumer, handle, on_failure=dead_letter,
                                   concurrency=int(os.environ.get("PROCESS_CONCURRENCY", "50")),
                                   ordering=os.environ.get("PROCESS_ORDERING", "key"))
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None

    async def start(self) -> None:
        """Start the task that connects, then runs the processor; it does not wait for the cluster."""
        self._task = asyncio.create_task(self._run(), name="kafka processor")

    async def _run(self) -> Any:
        if not await connect(self.consumer, self._stopping, give_up_seconds(os.environ)):
            return None  # stopped before the cluster answered
        return await self.processor.run()

    async def stop(self) -> None:
        self._stopping.set()
        self.processor.stop()
        try:
            result = None if self._task is None else await self._task
            if result is not None:
                log.info("processor stopped: %d processed, %d failed, watermark committed",
                         result.processed, result.failed)
        except Exception as exc:  # it had stopped by an error (/health said so); shut down anyway
            log.error("the processor had stopped: %r", exc)
        finally:
            await self.consumer.close()
            log.info("consumer closed: left the group")

    def failure(self) -> BaseException | None:
        if self._task is None or not self._task.done() or self._task.cancelled():
            return None
        return self._task.exception()

    def collector(self) -> Collector:
        return ProcessingFigures(self.processor)

    def figures(self) -> dict[str, Any]:
        return {"processing": self.processor.metrics()}

    def health_figures(self) -> dict[str, Any]:
        figures = self.processor.metrics()
        return {"in_flight": figures["in_flight"], "held": figures["held"]}


class ProcessingFigures(Collector):
    def __init__(self, processor: Processor) -> None:
        self.processor = processor

    def collect(self) -> list[Any]:
        figures = self.processor.metrics()
        counters = [CounterMetricFamily(f"fastapi_worker_process_{name}", f"process(): records {name}",
                                        value=figures[name]) for name in ("processed", "failed", "skipped")]
        counters.append(CounterMetricFamily("fastapi_worker_process_retries", "process(): handler retries",
                                            value=figures["retries"]))
        gauges = [GaugeMetricFamily(f"fastapi_worker_process_{name}", f"process(): {name.replace('_', ' ')}",
                                    value=figures[name]) for name in ("in_flight", "held", "paused_partitions")]
        return counters + gauges


exit_if_environment_invalid(os.environ)
app = create_app(worker_type=ProcessingWorker, title="aiokafka-lite processing worker")
