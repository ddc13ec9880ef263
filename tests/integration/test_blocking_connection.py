"""The heartbeat thread's blocking connection against real brokers."""

from __future__ import annotations

import pytest

from aiokafka_lite._net.blocking import BlockingConnection
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite.errors import KafkaConnectionError
from aiokafka_lite.protocol.messages import FIND_COORDINATOR, METADATA


def _address(broker) -> tuple[str, int]:
    host, _, port = broker.bootstrap_servers.split(",")[0].rpartition(":")
    return host, int(port)


def test_negotiates_and_answers_requests(any_broker):
    conn = BlockingConnection(*_address(any_broker), ConnectionOptions(), timeout=10.0)
    try:
        version = conn.version_for(METADATA, 12)
        response = conn.send(METADATA, version, {"topics": None, "allow_auto_topic_creation": False},
                             timeout=10.0)
        assert response["brokers"]
        version = conn.version_for(FIND_COORDINATOR)
        body = {"key": "g", "key_type": 0, "coordinator_keys": ["g"]}
        response = conn.send(FIND_COORDINATOR, version, body, timeout=10.0)
        assert "coordinators" in response or "node_id" in response
    finally:
        conn.close()
    with pytest.raises(KafkaConnectionError):
        conn.send(METADATA, 1, {"topics": None}, timeout=1.0)
