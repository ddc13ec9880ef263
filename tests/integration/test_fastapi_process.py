"""examples/fastapi_worker/process_app.py end to end: uvicorn on loopback, Apache Kafka 4.3.1, httpx."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce

from ._fastapi_app import get_or_none, running_worker

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

PARTITIONS, RECORDS = 4, 400


@pytest.mark.asyncio
async def test_processing_worker_serves_health_and_metrics_and_commits_on_sigterm(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, tmp_path: Path) -> None:
    bootstrap = apache_kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=PARTITIONS)
    produce(bootstrap, unique_topic, [(f"k{i % 40}", f"v{i}") for i in range(RECORDS)])
    env = {"PATH": "/usr/bin:/bin", "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_TOPICS": unique_topic,
           "KAFKA_GROUP_ID": unique_group, "KAFKA_AUTO_OFFSET_RESET": "earliest", "PROCESS_CONCURRENCY": "40"}
    seen: dict[str, Any] = {}
    async with running_worker(env, tmp_path, app="process_app:app") as (server, http, log_path):
        async def processed_all() -> bool:
            seen["health"] = await get_or_none(http, "/health")
            response = await get_or_none(http, "/metrics.json")
            seen["json"] = None if response is None else response.json()
            await asyncio.sleep(0.1)
            return seen["json"] is not None and seen["json"]["processing"]["processed"] >= RECORDS

        deadline = asyncio.get_running_loop().time() + 60.0
        while not await processed_all():
            assert asyncio.get_running_loop().time() < deadline, f"not all processed: {seen.get('json')}"
        assert seen["health"].status_code == 200, seen["health"].text
        assert seen["health"].json()["group_state"] == "STABLE"
        assert {"in_flight", "held"} <= set(seen["health"].json())
        text = (await http.get("/metrics")).text
        assert f"fastapi_worker_process_processed_total {float(RECORDS)}" in text
        assert "fastapi_worker_process_in_flight " in text
        server.send_signal(signal.SIGTERM)
        await asyncio.wait_for(server.wait(), 30.0)
    log_text = log_path.read_text()
    assert server.returncode in (0, -signal.SIGTERM), log_text
    assert f"processor stopped: {RECORDS} processed, 0 failed, watermark committed" in log_text
    assert "Traceback" not in log_text
    assert "WARNING" not in log_text
    tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
    async with Consumer(bootstrap_servers=bootstrap, group_id=unique_group, enable_auto_commit=False) as check:
        ends = await check.end_offsets(tps)
        committed = await check.committed(tps)
    assert {tp: om.offset for tp, om in committed.items() if om is not None} == ends
