"""KIP-1242, misrouted connections, on a fake broker whose cluster id the test switches: the address
the client knew now answers for another cluster. ``Cluster`` notices (the broker refuses ApiVersions
v5 naming our cluster, or its Metadata names another one), rebootstraps, and says it once."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import pytest

from aiokafka_lite._net import Cluster, ConnectionOptions
from aiokafka_lite.errors import KafkaConnectionError
from aiokafka_lite.protocol.messages import API_VERSIONS, METADATA

from .test_connection import BROKER_RANGES, FakeBroker, Peer

pytestmark = pytest.mark.asyncio

REBOOTSTRAP_REQUIRED = 129


class SwitchedAddress:
    """One address whose broker (node 1) belongs to ``cluster``, which the test changes. With
    ``checks`` it refuses ApiVersions v5 naming another cluster, as a Kafka 4.4 broker does. It
    answers every version asked, listing ApiVersions up to ``api_versions_max``."""

    def __init__(self, *, checks: bool, api_versions_max: int = 5) -> None:
        self.cluster = "A"
        self.checks = checks
        self.ranges = {**BROKER_RANGES, API_VERSIONS.key: (0, api_versions_max)}
        self.asked: list[tuple[int, str | None, int]] = []  # ApiVersions: version, cluster id, node id
        self.port = 0
        self._peers: list[Peer] = []

    async def script(self, peer: Peer) -> None:
        api, version, cid, body = await peer.read_request()
        assert api is API_VERSIONS
        self.asked.append((version, body.get("cluster_id"), body.get("node_id", -1)))
        if self.checks and body.get("cluster_id") not in (None, self.cluster):
            await peer.respond(API_VERSIONS, version, cid, {"error_code": REBOOTSTRAP_REQUIRED, "api_keys": []})
            return
        keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in self.ranges.items()]
        await peer.respond(API_VERSIONS, version, cid, {"error_code": 0, "api_keys": keys})
        self._peers.append(peer)
        while True:
            api, version, cid, _ = await peer.read_request()
            assert api is METADATA
            brokers = [{"node_id": 1, "host": "127.0.0.1", "port": self.port, "rack": None}]
            await peer.respond(METADATA, version, cid, {"brokers": brokers, "cluster_id": self.cluster,
                                                        "controller_id": 1, "topics": []})

    async def hand_over(self, cluster: str, client: Cluster) -> None:
        """The address now leads to ``cluster``'s broker: the old connections end."""
        self.cluster = cluster
        conn = await client.connection(1)
        for peer in self._peers:
            peer.writer.transport.abort()
        self._peers.clear()
        with contextlib.suppress(KafkaConnectionError):  # waits until the client sees the end
            await conn.send(METADATA, conn.version_for(METADATA), {"topics": []}, timeout=5.0)
        assert conn.closed


async def _cluster_at(address: SwitchedAddress, broker: FakeBroker, **options: Any) -> Cluster:
    address.port = broker.port
    cluster = Cluster(ConnectionOptions(request_timeout=5.0, reconnect_backoff=0.01, **options),
                      [("127.0.0.1", broker.port)])
    await cluster.bootstrap()
    assert cluster.metadata.cluster_id == "A"
    return cluster


def _loud(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_rebootstrap_required_to_apiversions_v5_rebootstraps_with_one_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aiokafka_lite")
    address = SwitchedAddress(checks=True)
    async with FakeBroker(address.script) as broker:
        cluster = await _cluster_at(address, broker)
        try:
            await address.hand_over("B", cluster)
            await cluster.refresh_metadata(timeout=5.0)
            assert (cluster.metadata.cluster_id, cluster.recovery.rebootstraps) == ("B", 1)
            # The connection to the known node 1 named cluster A (refused); bootstrap ones name none.
            assert address.asked == [(5, None, -1), (5, "A", 1), (5, None, -1)]
            # Handed back: the same news again, a rebootstrap again, said at DEBUG with a count.
            await address.hand_over("A", cluster)
            await cluster.refresh_metadata(timeout=5.0)
            assert (cluster.metadata.cluster_id, cluster.recovery.rebootstraps) == ("A", 2)
        finally:
            await cluster.close()
    port = broker.port
    assert _loud(caplog) == [
        f"misrouted connection: broker 127.0.0.1:{port} (node 1) is not of cluster 'A': it answered ApiVersions "
        f"with REBOOTSTRAP_REQUIRED (KIP-1242); rebootstrapped: the bootstrap servers lead to cluster 'B'"]
    repeat = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG
              and r.getMessage().startswith("misrouted connection: ")]
    assert len(repeat) == 1
    assert "is not of cluster 'B'" in repeat[0]
    assert "(2 failures in a row" in repeat[0]


async def test_metadata_naming_another_cluster_rebootstraps_where_the_broker_does_not_check(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    address = SwitchedAddress(checks=False)  # as a broker before 4.4, whose ApiVersions has no ids
    async with FakeBroker(address.script) as broker:
        cluster = await _cluster_at(address, broker)
        try:
            await address.hand_over("B", cluster)
            await cluster.refresh_metadata(timeout=5.0)
            assert (cluster.metadata.cluster_id, cluster.recovery.rebootstraps) == ("B", 1)
        finally:
            await cluster.close()
    assert _loud(caplog) == [
        f"misrouted connection: broker 127.0.0.1:{broker.port} (node 1) is not of cluster 'A': it answered "
        "Metadata for cluster 'B'; rebootstrapped: the bootstrap servers lead to cluster 'B'"]


@pytest.mark.parametrize("options", [{"metadata_cluster_check_enable": False},
                                     {"metadata_recovery_strategy": "none"}])
async def test_with_the_check_off_no_ids_are_sent_and_the_other_cluster_is_taken_silently(
        options: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    # As Java: metadata.cluster.check.enable=false, or no rebootstrap to lead anywhere, sends no ids.
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    address = SwitchedAddress(checks=True)
    async with FakeBroker(address.script) as broker:
        cluster = await _cluster_at(address, broker, **options)
        try:
            await address.hand_over("B", cluster)
            await cluster.refresh_metadata(timeout=5.0)
            assert (cluster.metadata.cluster_id, cluster.recovery.rebootstraps) == ("B", 0)
        finally:
            await cluster.close()
    assert address.asked == [(5, None, -1), (5, None, -1)]
    assert _loud(caplog) == []


async def test_brokers_that_do_not_list_apiversions_v5_are_not_sent_the_names() -> None:
    # Tansu 0.6 lists v4, answers v5, and closes a connection whose v5 names a cluster
    # (aiokafka_lite.testing.tansu.DEVIATIONS["api_versions_v5"]); Metadata's cluster id still counts.
    address = SwitchedAddress(checks=False, api_versions_max=4)
    async with FakeBroker(address.script) as broker:
        cluster = await _cluster_at(address, broker)
        try:
            await address.hand_over("B", cluster)
            await cluster.refresh_metadata(timeout=5.0)
            assert (cluster.metadata.cluster_id, cluster.recovery.rebootstraps) == ("B", 1)
        finally:
            await cluster.close()
    assert address.asked == [(5, None, -1), (5, None, -1), (5, None, -1)]
