"""free_port() hands out ports a client connection cannot take before the broker binds them."""

from __future__ import annotations

import socket

import pytest

from aiokafka_lite.testing import _process
from aiokafka_lite.testing._process import free_port


def test_ports_come_from_below_the_ephemeral_range_and_bind() -> None:
    low, _high = _process._ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50  # never the same one twice
    assert all(low - 12_000 <= port < low for port in ports), (low, ports)
    for port in ports[:5]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_no_outgoing_connection_takes_such_a_port() -> None:
    # What the OS gives a client connection's local end is never one free_port() hands out.
    low, high = _process._ephemeral_range()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        clients = [socket.create_connection(listener.getsockname()) for _ in range(20)]
        try:
            assert all(low <= c.getsockname()[1] <= high for c in clients)
        finally:
            for client in clients:
                client.close()


@pytest.mark.parametrize("count", [2, 3])
def test_xdist_workers_get_disjoint_slices(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    ports = range(20_000, 32_000)
    slices = []
    for worker in range(count):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(count))
        slices.append(set(_process._this_workers_share(ports)))
    assert all(len(s) == len(ports) // count for s in slices)
    assert len(set().union(*slices)) == sum(len(s) for s in slices)
