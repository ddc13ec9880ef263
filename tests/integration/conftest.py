"""Integration fixtures: ``any_broker`` runs a test once per broker kind.

Brokers are session-scoped (each starts once per run and is shared), except the librdkafka mock
cluster, which is cheap and fresh per test. Select kinds with ``-m 'broker("tansu")'``-style
keywords, e.g. ``pytest tests/integration -k tansu``. Tests that need something a broker lacks
skip with a reason::

    def test_tls(any_broker):
        any_broker.require("tls")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from aiokafka_lite.testing.helpers import create_topic

# What each broker kind offers beyond produce/fetch/groups. "tls"/"sasl" join the Kafka sets once
# ApacheKafkaBroker grows those listeners.
CAPABILITIES: dict[str, frozenset[str]] = {
    # Apache Kafka: the reference behaviour.
    "kafka4": frozenset({"session_expiry", "transactions", "restart", "admin", "kill"}),
    "kafka39": frozenset({"session_expiry", "transactions", "restart", "admin", "kill"}),
    # Tansu: no TLS listener in our fixture, group sessions expire lazily (not on a timer), and
    # read_committed consumers are still handed aborted records (checked in test_brokers.py).
    "tansu": frozenset({"admin"}),
    # librdkafka mock: in-process, so no restart; no admin APIs; read_committed is not honoured
    # (aborted records are returned); error/latency injection instead.
    "mock": frozenset({"fault_injection"}),
}

_FIXTURE_FOR_KIND = {
    "kafka4": "apache_kafka_broker",
    "kafka39": "kafka39_broker",
    "tansu": "tansu_broker",
    "mock": "mock_cluster",
}


@dataclass
class BrokerUnderTest:
    """A running broker plus what it can do; ``broker`` is the underlying fixture object."""

    kind: str
    broker: Any
    capabilities: frozenset[str] = field(default_factory=frozenset)

    @property
    def name(self) -> str:
        return str(self.broker.name)

    @property
    def bootstrap_servers(self) -> str:
        return str(self.broker.bootstrap_servers)

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
        create_topic(self.broker, name, partitions=partitions, config=config)

    def require(self, *capabilities: str) -> None:
        """Skip the calling test unless this broker has every named capability."""
        missing = sorted(set(capabilities) - self.capabilities)
        if missing:
            pytest.skip(f"{self.name} lacks {', '.join(missing)}")


@pytest.fixture(params=[pytest.param(kind, marks=pytest.mark.broker(kind), id=kind)
                        for kind in _FIXTURE_FOR_KIND])
def any_broker(request: pytest.FixtureRequest) -> BrokerUnderTest:
    """Each broker kind in turn: Apache Kafka 4.3.1 and 3.9.1, Tansu, and the librdkafka mock."""
    kind: str = request.param
    broker = request.getfixturevalue(_FIXTURE_FOR_KIND[kind])
    return BrokerUnderTest(kind, broker, CAPABILITIES[kind])
