"""examples/fastapi_worker with a cluster that is not there (yet) (issue 41): each app serves at once,
/health answers 503 with the consumer's own reason (``connecting: 127.0.0.1:PORT refused the
connection``) while the task keeps trying in the background, a SIGTERM ends it in well under 2 s
without a traceback, WORKER_GIVE_UP_MS ends it by itself; and app.py, pointed at a port where a
broker (Tansu) comes up seconds later, turns 200 and consumes."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.testing._process import free_port
from aiokafka_lite.testing.helpers import create_topic, produce

from ._fastapi_app import get_or_none, health_until, running_worker, sigterm_and_wait

pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

APPS = ["app:app", "process_app:app", "share_app:app"]
# From SIGTERM to exit: the task notices within CONNECT_WAIT_SECONDS, and close() has nothing to
# close; 2 s is the bound the issue asks for (plus the close timeout, which a consumer that never
# connected does not use).
SIGTERM_BOUND = 2.0
# uvicorn raises the SIGTERM it handled again once it has shut down gracefully (-15); 0 otherwise.
CLEAN_EXIT = (0, -signal.SIGTERM)


def _env(bootstrap: str, topic: str, group: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "KAFKA_TOPICS": topic,
            "KAFKA_GROUP_ID": group, **extra}


@pytest.mark.parametrize("app", APPS)
@pytest.mark.asyncio
async def test_app_serves_503_with_the_reason_while_the_cluster_refuses_and_stops_on_sigterm(
        app: str, unique_topic: str, unique_group: str, tmp_path: Path) -> None:
    refused = f"127.0.0.1:{free_port()}"  # nothing listens there
    async with running_worker(_env(refused, unique_topic, unique_group), tmp_path, app=app) \
            as (server, http, log_path):
        response, took = await health_until(http, server, log_path, 503, 10.0,
                                            f"connecting: {refused} refused the connection")
        assert took < 5.0, f"/health answered only after {took:.1f} s"
        assert response.json()["status"] == "unavailable"
        assert (await http.get("/live")).status_code == 200  # liveness: the loop answers
        await asyncio.sleep(1.0)  # still trying, still serving
        response, _ = await health_until(http, server, log_path, 503, 2.0, "connecting: ")
        took = await sigterm_and_wait(server)
    log_text = log_path.read_text()
    assert took < SIGTERM_BOUND, f"SIGTERM took {took:.1f} s to end the process:\n{log_text}"
    assert server.returncode in CLEAN_EXIT, log_text
    assert "Traceback" not in log_text
    assert "Application shutdown complete" in log_text
    assert log_text.count("WARNING") == 1, log_text  # the consumer's "cannot reach the cluster yet"


@pytest.mark.asyncio
async def test_worker_gives_up_after_worker_give_up_ms(unique_topic: str, unique_group: str,
                                                       tmp_path: Path) -> None:
    refused = f"127.0.0.1:{free_port()}"
    env = _env(refused, unique_topic, unique_group, WORKER_GIVE_UP_MS="1500")
    async with running_worker(env, tmp_path) as (server, http, log_path):
        await health_until(http, server, log_path, 503, 5.0, "connecting: ")
        await asyncio.wait_for(server.wait(), 1.5 + SIGTERM_BOUND + 3.0)
    log_text = log_path.read_text()
    assert server.returncode in CLEAN_EXIT, log_text
    assert f"gave up reaching the cluster after WORKER_GIVE_UP_MS=1500: could not reach the bootstrap servers " \
           f"within 0.25 s: {refused} refused the connection" in log_text
    assert "Traceback" not in log_text


@pytest.mark.asyncio
async def test_worker_turns_healthy_and_consumes_once_a_late_cluster_comes_up(
        monkeypatch: pytest.MonkeyPatch, unique_topic: str, unique_group: str, tmp_path: Path) -> None:
    """The app starts pointed at a port nothing listens on; 3 s later Tansu starts on that port:
    /health goes from 503 (connecting) to 200 and every record is processed; SIGTERM then leaves."""
    from aiokafka_lite.testing import tansu

    port = free_port()
    records = 20
    env = _env(f"127.0.0.1:{port}", unique_topic, unique_group, KAFKA_AUTO_OFFSET_RESET="earliest",
               KAFKA_SESSION_TIMEOUT_MS="6000", KAFKA_HEARTBEAT_INTERVAL_MS="500")
    async with running_worker(env, tmp_path) as (server, http, log_path):
        await health_until(http, server, log_path, 503, 10.0, "refused the connection")
        await asyncio.sleep(3.0)
        monkeypatch.setattr(tansu, "free_port", lambda: port)  # the port the app was given
        broker = await asyncio.to_thread(tansu.TansuBroker().start)
        try:
            create_topic(broker, unique_topic)
            produce(broker, unique_topic, [(None, f"v{i}") for i in range(records)], enable_idempotence=True)
            response, _ = await health_until(http, server, log_path, 200, 60.0, "STABLE")
            assert response.json()["group_state"] == "STABLE"

            async def processed() -> Any:
                reply = await get_or_none(http, "/metrics.json")
                return None if reply is None else reply.json()["records_processed"]

            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30.0
            while (count := await processed()) != records:
                assert loop.time() < deadline, f"{count} of {records} processed:\n{log_path.read_text()}"
                await asyncio.sleep(0.2)
            took = await sigterm_and_wait(server)
        finally:
            await asyncio.to_thread(broker.stop)
    log_text = log_path.read_text()
    assert server.returncode in CLEAN_EXIT, log_text
    assert "INFO:fastapi_worker:connected to the cluster" in log_text
    assert "consumer closed: offsets committed, left the group" in log_text
    assert "Traceback" not in log_text
    assert took < 30.0 + SIGTERM_BOUND  # the close timeout (30 s) + the bound


@pytest.mark.parametrize("value", ["1.5s", "-100"], ids=["not-an-integer", "negative"])
@pytest.mark.parametrize("app", APPS)
@pytest.mark.asyncio
async def test_an_invalid_worker_give_up_ms_stops_the_app_at_start_up_in_one_line(
        app: str, value: str, tmp_path: Path) -> None:
    """Under uvicorn: the app does not start (no port, no 503 from a worker task that failed), and
    says why in one line naming the variable and its value."""
    refused = f"127.0.0.1:{free_port()}"
    env = _env(refused, "orders", "billing", WORKER_GIVE_UP_MS=value)
    async with running_worker(env, tmp_path, app=app) as (server, http, log_path):
        try:
            await asyncio.wait_for(server.wait(), 30.0)
        except TimeoutError:
            response = await get_or_none(http, "/health")
            said = None if response is None else (response.status_code, response.text)
            raise AssertionError(f"still running 30 s in; /health: {said}\n{log_path.read_text()}") from None
    lines = [line for line in log_path.read_text().splitlines() if line.strip()]
    assert server.returncode not in (0, None), lines
    assert len(lines) == 1, lines
    assert f"WORKER_GIVE_UP_MS={value!r}" in lines[0], lines
    assert "whole number of milliseconds" in lines[0], lines
