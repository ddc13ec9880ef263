"""examples/fastapi_worker/process_app.py end to end: uvicorn on loopback, Apache Kafka 4.3.1, httpx."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.testing._process import free_port
from aiokafka_lite.testing.helpers import create_topic, produce

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

APP_DIR = Path(__file__).resolve().parents[2] / "examples" / "fastapi_worker"
PARTITIONS, RECORDS = 4, 400


@pytest.mark.asyncio
async def test_processing_worker_serves_health_and_metrics_and_commits_on_sigterm(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, tmp_path: Path) -> None:
    bootstrap = apache_kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=PARTITIONS)
    produce(bootstrap, unique_topic, [(f"k{i % 40}", f"v{i}") for i in range(RECORDS)])
    env = {"PATH": "/usr/bin:/bin", "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_TOPICS": unique_topic,
           "KAFKA_GROUP_ID": unique_group, "KAFKA_AUTO_OFFSET_RESET": "earliest", "PROCESS_CONCURRENCY": "40"}
    port = free_port()
    log_path = tmp_path / "uvicorn.log"
    with log_path.open("w") as log:
        server = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "uvicorn", "process_app:app", "--app-dir", str(APP_DIR), "--host", "127.0.0.1",
            "--port", str(port), env=env, stdout=log, stderr=subprocess.STDOUT)
    seen: dict[str, Any] = {}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5.0) as http:
            async def fetch() -> None:
                try:
                    seen["health"] = await http.get("/health")
                    seen["json"] = (await http.get("/metrics.json")).json()
                except httpx.TransportError:  # not listening yet
                    pass
                await asyncio.sleep(0.1)

            async def processed_all() -> bool:
                await fetch()
                return "json" in seen and seen["json"]["processing"]["processed"] >= RECORDS

            deadline = asyncio.get_running_loop().time() + 60.0
            while not await processed_all():
                assert asyncio.get_running_loop().time() < deadline, f"not all processed: {seen.get('json')}"
            assert seen["health"].status_code == 200, seen["health"].text
            assert seen["health"].json()["group_state"] == "STABLE"
            text = (await http.get("/metrics")).text
            assert f"fastapi_worker_process_processed_total {float(RECORDS)}" in text
            assert "fastapi_worker_process_in_flight " in text
        server.send_signal(signal.SIGTERM)
        await asyncio.wait_for(server.wait(), 30.0)
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
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
