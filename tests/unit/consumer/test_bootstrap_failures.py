"""metrics()["bootstrap_failures"]: while start() has not succeeded, why the consumer cannot reach
the cluster (each bootstrap server's last failure and tries), so that a service can say it (the
FastAPI example's /health: ``connecting: 127.0.0.1:1 refused the connection``); None before any
failure and once started."""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite import Consumer, ShareConsumer
from aiokafka_lite.errors import KafkaTimeoutError

# Nothing listens on port 1: every connection is refused at once.
NOWHERE = "127.0.0.1:1"


@pytest.mark.parametrize("kind", [Consumer, ShareConsumer])
@pytest.mark.asyncio
async def test_metrics_say_why_the_cluster_cannot_be_reached(kind: Any) -> None:
    consumer = kind("t", bootstrap_servers=NOWHERE, group_id="g", reconnect_backoff_ms=50)
    assert consumer.metrics()["bootstrap_failures"] is None  # not tried yet
    for _ in range(2):  # the attempt goes on between calls, and so does its report
        with pytest.raises(KafkaTimeoutError):
            await consumer.start(timeout=0.3)
        failures = consumer.metrics()["bootstrap_failures"]
        assert failures is not None
        assert failures.startswith(f"{NOWHERE} refused the connection (")
        assert consumer.metrics()["started"] is False
    await consumer.close(timeout=0)
