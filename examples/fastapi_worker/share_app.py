"""A share-group worker pool as a FastAPI service (KIP-932): app.py's service on a ShareConsumer.

    cd examples/fastapi_worker
    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:9092 KAFKA_TOPICS=jobs KAFKA_GROUP_ID=workers \\
        SHARE_CONCURRENCY=32 uvicorn share_app:app --host 127.0.0.1 --port 8000

- The lifespan creates a ShareConsumer (explicit acknowledgement) and a task that starts it as
  app.py's does (the app serves at once; ``WORKER_GIVE_UP_MS``), then runs a ShareProcessor running
  :func:`handle` in ``SHARE_CONCURRENCY`` worker tasks (default 16): a record whose handler returns
  is accepted; one whose handler raises is released (the broker delivers it again, to any replica)
  and, once delivered more than ``SHARE_MAX_RETRIES`` times (default 3), rejected and given to
  :func:`dead_letter`. On shutdown the processor stops (running handlers get ``drain_timeout``),
  then ``close()`` sends the last acknowledgements and leaves the group at once; a SIGTERM while
  connecting closes at once.
- ``GET /health`` (readiness): 200 only while the member is in the group (STABLE) AND a worker
  polled within max_poll_interval_ms, and the processor has not stopped by an error; 503 with the
  reason otherwise (``connecting: ...`` until the cluster answers). ``GET /live`` (liveness): 200
  while the event loop answers.
- ``GET /metrics.json``: ``share.metrics()`` (the member, the share sessions, records handed out
  and held, acknowledgements) with ``processing``: ``ShareProcessor.metrics()`` (accepted, released,
  rejected, handlers in progress and the most at once).

Settings as in app.py (``KAFKA_<NAME>``, e.g. ``KAFKA_MAX_POLL_INTERVAL_MS``). Where a new share
group starts is a group config (``share.auto.offset.reset``, set with Kafka's tools); see docs/share.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from app import (
    TOPICS_VARIABLE,
    connect,
    connecting_reason,
    exit_if_environment_invalid,
    give_up_seconds,
    live,
    log_ignored_env,
    properties_from_env,
)
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from aiokafka_lite import ShareConsumer
from aiokafka_lite.processing import ShareProcessor
from aiokafka_lite.share import ShareRecord

log = logging.getLogger("fastapi_worker")


async def handle(record: ShareRecord) -> None:
    """Your processing goes here: an HTTP call, a database write. Many run at once."""
    await asyncio.sleep(0.005)
    log.debug("processed %s[%d]@%d (delivery %d)", record.topic, record.partition, record.offset,
              record.delivery_count)


async def dead_letter(record: ShareRecord, error: Exception) -> None:
    """A record that failed in every delivery: publish it to a dead-letter topic here."""
    log.warning("dead letter %s[%d]@%d after %d deliveries: %r", record.topic, record.partition,
                record.offset, record.delivery_count, error)


class ShareWorker:
    def __init__(self, share: ShareConsumer) -> None:
        self.share = share
        self.processor = ShareProcessor(share, handle, on_failure=dead_letter,
                                        concurrency=int(os.environ.get("SHARE_CONCURRENCY", "16")),
                                        max_retries=int(os.environ.get("SHARE_MAX_RETRIES", "3")))
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None

    async def start(self) -> None:
        """Start the task that connects, then runs the processor; it does not wait for the cluster."""
        self._task = asyncio.create_task(self._run(), name="share processor")

    async def _run(self) -> Any:
        if not await connect(self.share, self._stopping, give_up_seconds(os.environ)):
            return None  # stopped before the cluster answered
        return await self.processor.run()

    async def stop(self) -> None:
        self._stopping.set()
        self.processor.stop()
        try:
            result = None if self._task is None else await self._task
            if result is not None:
                log.info("share worker stopped: %d accepted, %d released, %d rejected", result.accepted,
                         result.released, result.rejected)
        except Exception as exc:  # it had stopped by an error (/health said so); shut down anyway
            log.error("the share processor had stopped: %r", exc)
        finally:
            await self.share.close()
            log.info("share consumer closed: acknowledgements sent, left the group")

    def failure(self) -> BaseException | None:
        if self._task is None or not self._task.done() or self._task.cancelled():
            return None
        return self._task.exception()


def health_report(metrics: Mapping[str, Any], max_poll_interval: float,
                  failure: BaseException | None) -> tuple[bool, str]:
    if failure is not None:
        return False, f"the processor stopped: {type(failure).__name__}: {failure}"
    if metrics.get("started") is False:
        return False, connecting_reason(metrics)
    member = metrics.get("member") or {}
    state = member.get("group_state")
    if state != "STABLE":
        return False, f"group state is {state}, not STABLE"
    since = member.get("last_poll_seconds_ago")
    if since is None or since >= max_poll_interval:
        return False, f"no poll within max_poll_interval_ms={max_poll_interval * 1000:.0f}"
    return True, f"STABLE, last poll {since:.1f} s ago"


def create_app(properties: Mapping[str, str] | None = None, topics: list[str] | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        give_up_seconds(os.environ)  # checked before anything starts (the worker reads it again)
        if properties is None:
            log_ignored_env(os.environ)
        props = dict(properties) if properties is not None else properties_from_env(os.environ)
        names = topics if topics is not None else os.environ.get(TOPICS_VARIABLE, "").split(",")
        share = ShareConsumer.from_properties({**props, "share.acknowledgement.mode": "explicit"},
                                              *[t for t in names if t])
        worker = ShareWorker(share)
        await worker.start()
        app.state.worker = worker
        try:
            yield
        finally:
            await worker.stop()

    app = FastAPI(title="aiokafka-lite share worker", lifespan=lifespan)
    app.get("/live")(live)

    @app.get("/health")
    async def health() -> JSONResponse:
        worker: ShareWorker = app.state.worker
        metrics = worker.share.metrics()
        healthy, reason = health_report(metrics, worker.share.config.max_poll_interval, worker.failure())
        body = {"status": "ok" if healthy else "unavailable", "reason": reason,
                "in_progress": worker.processor.metrics()["in_progress"]}
        return JSONResponse(body, status_code=200 if healthy else 503)

    @app.get("/metrics.json")
    async def metrics() -> dict[str, Any]:
        worker: ShareWorker = app.state.worker
        return {**worker.share.metrics(), "processing": worker.processor.metrics()}

    return app


logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"))
exit_if_environment_invalid(os.environ)
app = create_app()
