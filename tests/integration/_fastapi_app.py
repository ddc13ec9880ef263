"""The example service (examples/fastapi_worker) under uvicorn on a free loopback port, for the
tests of app.py, process_app.py and share_app.py."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiokafka_lite.testing._process import free_port

APP_DIR = Path(__file__).resolve().parents[2] / "examples" / "fastapi_worker"


@contextlib.asynccontextmanager
async def running_worker(env: dict[str, str], tmp_path: Path, app: str = "app:app") -> AsyncIterator[Any]:
    """``app`` under uvicorn with an HTTP client for it; the server is killed at the end if it is
    still running. Yields (server, http, log path)."""
    import httpx

    port = free_port()
    log_path = tmp_path / "uvicorn.log"
    with log_path.open("w") as log:
        server = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "uvicorn", app, "--app-dir", str(APP_DIR), "--host", "127.0.0.1",
            "--port", str(port), env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5.0) as http:
            yield server, http, log_path
    finally:
        if server.returncode is None:
            server.kill()
        await server.wait()


async def get_or_none(http: Any, path: str) -> Any:
    """The response, or None while the server is not listening yet."""
    import httpx

    try:
        return await http.get(path)
    except httpx.TransportError:
        return None


async def health_until(http: Any, server: Any, log_path: Path, status: int, timeout: float,
                       reason: str = "") -> tuple[Any, float]:
    """Poll /health until it answers ``status`` with ``reason`` in its reason: (the response, the
    seconds it took); an AssertionError naming the last answer (and the log) otherwise."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    last = None
    while loop.time() - began < timeout:
        if server.returncode is not None:
            raise AssertionError(f"the app exited with {server.returncode}:\n{_text(log_path)}")
        response = await get_or_none(http, "/health")
        if response is not None:
            last = response.status_code, response.text
            if response.status_code == status and reason in response.json()["reason"]:
                return response, loop.time() - began
        await asyncio.sleep(0.05)
    raise AssertionError(f"/health did not answer {status} ({reason!r}) within {timeout} s; last: {last}\n"
                         f"{_text(log_path)}")


def _text(path: Path) -> str:
    return path.read_text()


async def sigterm_and_wait(server: Any) -> float:
    """SIGTERM the server; the seconds until it exited."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    server.send_signal(signal.SIGTERM)
    await asyncio.wait_for(server.wait(), 60.0)
    return loop.time() - began
