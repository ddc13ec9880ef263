"""Client metrics pushed to the cluster (KIP-714): ``MetricsPush``, a task the consumer owns.

From start() on, while ``enable_metrics_push`` is set and the brokers speak GetTelemetrySubscriptions
and PushTelemetry (ApiVersions), the task asks a broker which metrics it wants and pushes them, as
OTLP ``MetricsData`` (``protocol/otlp.py``), at the interval it asks for; ``telemetry_state.py``
decides what comes next. close() cancels and awaits the task, then sends one last push marked
terminating. Nothing here logs at WARNING or above unless the broker calls our payload invalid.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from .._net.cluster import Cluster
from .._net.connection import Connection
from ..config import ConsumerConfig
from ..errors import KafkaError
from ..protocol.compression import compress
from ..protocol.messages import GET_TELEMETRY_SUBSCRIPTIONS, PUSH_TELEMETRY
from ..protocol.otlp import encode_metric, encode_metrics_data, framing_size
from .telemetry_metrics import MetricsCollector
from .telemetry_state import INVALID_RECORD, INVALID_REQUEST, Next, Subscription, TelemetryState

log = logging.getLogger("aiokafka_lite.consumer")

# The terminating push, in close()'s graceful part, gets at most this long (seconds) of its timeout.
TERMINATING_PUSH_LIMIT = 1.0

# Record-batch codec codes in our order of preference, among those the broker accepts.
_ZSTD, _GZIP, _NONE = 4, 1, 0
_CODECS = (_ZSTD, _GZIP)

SCOPE_NAME = "aiokafka_lite"


class _Unsupported(Exception):
    """The broker does not speak the telemetry APIs."""


class MetricsPush:
    """KIP-714's push loop for one consumer; ``snapshot`` is ``Consumer.metrics``."""

    def __init__(self, config: ConsumerConfig, snapshot: Callable[[], dict[str, Any]],
                 jitter: Callable[[], float] = random.random) -> None:
        self._config = config
        self._snapshot = snapshot
        self._state = TelemetryState(jitter)
        self._collector = MetricsCollector(time.time_ns())
        self._cluster: Cluster | None = None
        self._task: asyncio.Task[None] | None = None
        self._node: int | None = None  # the broker pushed to, kept while it answers (as Java does)
        self.pushes = 0  # accepted, the terminating one included

    @property
    def state(self) -> TelemetryState:
        return self._state

    def start(self, cluster: Cluster) -> None:
        if not self._config.enable_metrics_push or self._task is not None:
            return
        self._cluster = cluster
        self._task = asyncio.create_task(self._run(), name="aiokafka-lite metrics push")

    async def finish(self) -> None:
        """close()'s graceful part: stop the loop, then push once more, marked terminating (best
        effort, within close()'s timeout: a lapse there skips it, as the forced part pushes nothing)."""
        await self.close()
        if not self._state.push_wanted:
            return
        try:
            async with asyncio.timeout(TERMINATING_PUSH_LIMIT):
                await self._push(await self._connection(), terminating=True)
        except (TimeoutError, KafkaError, _Unsupported) as exc:
            log.debug("the terminating metrics push did not complete: %s", exc)
        self._state.stop("closed")

    async def close(self) -> None:
        """Cancel and await the loop's task (the forced part of close(): no more requests)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})  # a cancellation of close() itself still reaches its caller
            if not task.cancelled():
                task.exception()  # retrieved (the loop logs its own failures)

    async def _run(self) -> None:
        delay = 0.0
        while self._state.next is not Next.STOPPED:
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                delay = await self._step()
            except _Unsupported as exc:
                self._state.stop(str(exc))
                log.debug("metrics push off: %s", exc)
                return
            except KafkaError as exc:
                self._node = None  # start over on another broker, perhaps
                delay = self._state.on_failure()
                log.debug("metrics push: %s; asking again in %.1f s", exc, delay)
            except Exception as exc:  # a bug here must not go unseen, nor fail the consumer
                self._state.stop(f"unexpected {exc!r}")
                log.info("client metrics push failed", exc_info=True)
                return
        if self._state.stopped_because is not None:
            log.info("client metrics push stopped: %s", self._state.stopped_because)

    async def _step(self) -> float:
        conn = await self._connection()
        if self._state.next is Next.SUBSCRIBE:
            body = await conn.send(GET_TELEMETRY_SUBSCRIPTIONS, conn.version_for(GET_TELEMETRY_SUBSCRIPTIONS),
                                   {"client_instance_id": self._state.instance_id})
            delay = self._state.on_subscriptions(body)
            log.debug("metrics subscription %s for client instance %s", self._state.subscription,
                      self._state.instance_id)
            return delay
        return await self._push(conn, terminating=False)

    async def _push(self, conn: Connection, terminating: bool) -> float:
        subscription = self._state.subscription
        assert subscription is not None  # a push follows a subscription
        codec, payload = self._payload(subscription)
        body = await conn.send(PUSH_TELEMETRY, conn.version_for(PUSH_TELEMETRY), {
            "client_instance_id": self._state.instance_id, "subscription_id": subscription.subscription_id,
            "terminating": terminating, "compression_type": codec, "metrics": payload})
        code = int(body["error_code"])
        if code == 0:
            self.pushes += 1
        elif code in (INVALID_RECORD, INVALID_REQUEST):
            log.warning("the broker refused this client's metrics push (error %d); metrics push stops", code)
        return self._state.on_push(body)

    def _payload(self, subscription: Subscription) -> tuple[int, bytes]:
        """(codec, bytes) of the metrics the subscription wants, within its size limit."""
        points = self._collector.collect(self._snapshot(), time.time_ns(), subscription.delta_temporality)
        metrics, size = [], 0
        for point in points:
            if not subscription.wants(point.name):
                continue
            encoded = encode_metric(point)
            size += framing_size(encoded)
            if subscription.max_bytes > 0 and size > subscription.max_bytes // 2:
                break  # within half the limit, leaving the resource and scope room; the rest is left out
            metrics.append(encoded)
        resource: dict[str, str | int | float] = {"client_id": self._config.client_id}
        if self._config.group_id is not None:
            resource["group_id"] = self._config.group_id
        data = encode_metrics_data(metrics, resource, SCOPE_NAME)
        for codec in _CODECS:
            if codec in subscription.accepted_compression_types:
                return codec, compress(codec, data)
        return _NONE, data

    async def _connection(self) -> Connection:
        cluster = self._cluster
        if cluster is None:
            raise _Unsupported("not started")
        node = self._node = cluster.least_loaded_node() if self._node is None else self._node
        if node is None:
            raise KafkaError("no broker known")
        conn = await cluster.connection(node, timeout=self._config.request_timeout)
        versions = conn.broker_versions
        if GET_TELEMETRY_SUBSCRIPTIONS.key not in versions or PUSH_TELEMETRY.key not in versions:
            raise _Unsupported(f"broker {node} does not support GetTelemetrySubscriptions/PushTelemetry")
        return conn
