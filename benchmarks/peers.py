"""Group members for the liveness benchmarks: one in another process (``Member``), one in this
process behind a tiny adapter (``InProcess``) so the same scenario drives aiokafka-lite or aiokafka.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

from aiokafka_lite.testing.helpers import create_topic, produce

PARTITIONS = 6
SESSION_MS = 6000
HEARTBEAT_MS = 1000


def group_settings(max_poll_interval_ms: int = 60000, **extra: Any) -> dict[str, Any]:
    return {"session_timeout_ms": SESSION_MS, "heartbeat_interval_ms": HEARTBEAT_MS,
            "max_poll_interval_ms": max_poll_interval_ms, "auto_offset_reset": "earliest",
            "enable_auto_commit": False, **extra}


def new_topic(bootstrap: str, prefix: str) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    produce(bootstrap, topic, [{"value": b"x", "partition": p} for p in range(PARTITIONS)])
    return topic


class Member:
    """``benchmarks.member`` in a subprocess; ``changes`` fills with (monotonic time, partitions owned)."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, settings: dict[str, Any]) -> None:
        spec = {"client": client, "bootstrap": bootstrap, "topic": topic, "group": group, "settings": settings}
        self.proc = subprocess.Popen([sys.executable, "-m", "benchmarks.member", json.dumps(spec)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.changes: list[tuple[float, int]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            self.changes.append((event["t"], event["owned"]))

    @property
    def owned(self) -> int:
        return self.changes[-1][1] if self.changes else -1

    def first_time_owning(self, owned: int, since: float) -> float | None:
        return next((t for t, n in self.changes if n == owned and t >= since), None)

    async def wait_owning(self, owned: int, since: float, timeout: float) -> float | None:
        """When this member first owned ``owned`` partitions at or after ``since`` (None: not in time)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.first_time_owning(owned, since)
            if found is not None:
                return found
            await asyncio.sleep(0.02)
        return None

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(5)


class InProcess:
    """A member on this process's event loop: aiokafka-lite or aiokafka behind one small interface."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, settings: dict[str, Any]) -> None:
        self.client = client
        if client == "lite":
            from aiokafka_lite import Consumer

            self.consumer: Any = Consumer(topic, bootstrap_servers=bootstrap, group_id=group, **settings)
        else:
            import aiokafka

            self.consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, **settings)

    async def start(self) -> None:
        await self.consumer.start()

    async def poll(self, timeout: float) -> int:
        if self.client == "lite":
            return len(await self.consumer.poll(timeout=timeout))
        batches = await self.consumer.getmany(timeout_ms=int(timeout * 1000))
        return sum(map(len, batches.values()))

    def owned(self) -> int:
        return len(self.consumer.assignment())

    async def close(self) -> None:
        if self.client == "lite":
            await self.consumer.close()
        else:
            await self.consumer.stop()

    def metrics(self) -> dict[str, Any]:
        return dict(self.consumer.metrics()) if self.client == "lite" else {}


async def settle(a: InProcess, b: Member, timeout: float = 60.0) -> bool:
    """Poll ``a`` until it and ``b`` each own half the partitions."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await a.poll(0.1)
        if a.owned() == PARTITIONS // 2 and b.owned == PARTITIONS // 2:
            return True
    return False
