"""The example service (examples/fastapi_worker) under uvicorn on a free loopback port, for the
tests of app.py and process_app.py."""

from __future__ import annotations

import asyncio
import contextlib
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
