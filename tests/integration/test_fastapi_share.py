"""examples/fastapi_worker/share_app.py end to end: uvicorn on loopback, Apache Kafka 4.3.1, httpx:
every record of a 2-partition topic accepted by 20 worker tasks, /health 200 while working, SIGTERM
ends it cleanly (the processor's summary, the close, no WARNING)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.testing.helpers import create_topic, produce, set_group_config

from ._fastapi_app import get_or_none, running_worker

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

RECORDS = 400


@pytest.mark.asyncio
async def test_share_worker_pool_serves_health_and_takes_every_record_once(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, tmp_path: Path) -> None:
    bootstrap = apache_kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=2)
    produce(bootstrap, unique_topic, [(f"k{i}", f"v{i}") for i in range(RECORDS)])
    set_group_config(bootstrap, unique_group, {"share.auto.offset.reset": "earliest"})
    env = {"PATH": "/usr/bin:/bin", "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_TOPICS": unique_topic,
           "KAFKA_GROUP_ID": unique_group, "SHARE_CONCURRENCY": "20"}
    seen: dict[str, Any] = {}
    async with running_worker(env, tmp_path, app="share_app:app") as (server, http, log_path):
        deadline = asyncio.get_running_loop().time() + 60.0
        while True:
            seen["health"] = await get_or_none(http, "/health")
            response = await get_or_none(http, "/metrics.json")
            seen["json"] = None if response is None else response.json()
            if seen["json"] is not None and seen["json"]["processing"]["accepted"] >= RECORDS:
                break
            assert asyncio.get_running_loop().time() < deadline, f"not all accepted: {seen.get('json')}"
            await asyncio.sleep(0.1)
        assert seen["health"] is not None
        assert seen["health"].status_code == 200, seen["health"].text
        processing = seen["json"]["processing"]
        print(f"\n{processing}")
        assert processing["accepted"] == RECORDS
        assert processing["peak_in_progress"] > 2
        server.send_signal(signal.SIGTERM)
        await asyncio.wait_for(server.wait(), 30.0)
    log_text = log_path.read_text()
    assert server.returncode in (0, -signal.SIGTERM), log_text
    assert f"share worker stopped: {RECORDS} accepted, 0 released, 0 rejected" in log_text
    assert "share consumer closed: acknowledgements sent, left the group" in log_text
    assert "Traceback" not in log_text
    assert "WARNING" not in log_text
