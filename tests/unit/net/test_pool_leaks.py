"""The connection pool leaves no connection open that nobody holds (no socket, no reader thread),
however a caller's cancellation or a concurrent (re)bootstrap falls; against the fake broker."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aiokafka_lite._net import Connection, ConnectionOptions
from aiokafka_lite._net.metadata import MetadataCache
from aiokafka_lite._net.monitor import ConnectionMonitor
from aiokafka_lite._net.pool import ConnectionPool

from .test_connection import FakeBroker, Peer, hold_open

OPTIONS = ConnectionOptions(request_timeout=5.0)


class Peers:
    """A fake broker's script that answers ApiVersions (each answer only once ``gate`` is set)
    and counts the client connections still open on the broker's side."""

    def __init__(self) -> None:
        self.live = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.asked = asyncio.Event()  # an ApiVersions request is waiting at the gate

    async def script(self, peer: Peer) -> None:
        self.live += 1
        try:
            if not self.gate.is_set():
                self.asked.set()
                await self.gate.wait()
            await peer.answer_api_versions()
            await hold_open(peer)  # until the client closes its end
        finally:
            self.live -= 1

    async def none_open(self) -> bool:
        """Whether the client closed every connection (its closes given time to arrive)."""
        for _ in range(100):
            if self.live == 0:
                return True
            await asyncio.sleep(0.02)
        return False


def _pool_with_broker_at(port: int) -> ConnectionPool:
    metadata = MetadataCache()
    metadata.update({"brokers": [{"node_id": 1, "host": "127.0.0.1", "port": port, "rack": None}],
                     "cluster_id": "fake-cluster", "controller_id": 1, "topics": []}, [], time.monotonic())
    return ConnectionPool(OPTIONS, metadata, ConnectionMonitor())


@pytest.mark.asyncio
async def test_a_caller_cancelled_as_its_connection_opens_leaves_no_connection_open(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller of ``open()`` is cancelled in the very loop iteration in which the connection it
    waits for finished opening (the result not yet taken, so the cancellation is raised instead):
    the connection is closed, not left with its socket open and nobody to close it."""
    opened: list[Connection] = []
    real_open = Connection.open

    async def open_then_cancel_the_caller(*args: Any, **kwargs: Any) -> Connection:
        conn = await real_open(*args, **kwargs)
        opened.append(conn)
        # Scheduled before the caller's wake-up: the caller is cancelled with the result ready.
        asyncio.get_running_loop().call_soon(caller.cancel)
        return conn

    monkeypatch.setattr(Connection, "open", open_then_cancel_the_caller)
    peers = Peers()
    async with asyncio.timeout(10), FakeBroker(peers.script) as broker:
        pool = _pool_with_broker_at(broker.port)
        caller = asyncio.create_task(pool.open("127.0.0.1", broker.port, None))
        try:
            await asyncio.wait([caller])
            assert caller.cancelled()
            assert len(opened) == 1
            assert await peers.none_open()  # before the fix: the connection stayed open
            assert opened[0].closed
        finally:
            for conn in opened:
                await conn.close()
            await pool.close()


@pytest.mark.asyncio
async def test_a_connection_adopted_while_the_pool_opened_its_own_is_not_dropped() -> None:
    """A (re)bootstrap adopts its connection to broker 1 while ``connection(1)`` is opening another:
    the pool keeps one of them and closes the other, rather than overwrite the adopted one and
    leave it open with nobody to close it."""
    peers = Peers()
    async with asyncio.timeout(10), FakeBroker(peers.script) as broker:
        pool = _pool_with_broker_at(broker.port)
        adopted = await Connection.open("127.0.0.1", broker.port, OPTIONS)
        try:
            peers.gate.clear()
            pooled = asyncio.create_task(pool.connection(1, 5.0))
            await peers.asked.wait()  # the pool's own connection waits for its ApiVersions answer
            assert await pool.adopt(adopted, "127.0.0.1", broker.port)
            peers.gate.set()
            assert await pooled is adopted
            assert await pool.connection(1, 5.0) is adopted
            await asyncio.sleep(0.1)
            assert peers.live == 1  # the pool's own, not needed, is closed
        finally:
            await pool.close()
            await adopted.close()
        assert await peers.none_open()  # before the fix: the adopted connection stayed open
