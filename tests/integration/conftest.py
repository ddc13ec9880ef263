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

from aiokafka_lite.testing import tansu
from aiokafka_lite.testing.helpers import create_topic

from ._protocols import group_protocol

__all__ = ["group_protocol"]  # a fixture: each group test under the classic and the consumer protocol

# What Apache Kafka answers as Kafka does: "end_offsets" (ListOffsets latest is the log end),
# "offsets_for_times" (ListOffsets by record timestamp), "session_expiry" (a silent member is
# removed after session.timeout.ms), "transactions" (read_committed skips aborted records), "admin".
KAFKA_ANSWERS = frozenset({"end_offsets", "offsets_for_times", "session_expiry", "transactions", "admin"})

# What each broker kind offers beyond produce/fetch/groups. "tls"/"sasl" join the Kafka sets once
# ApacheKafkaBroker grows those listeners.
CAPABILITIES: dict[str, frozenset[str]] = {
    # Apache Kafka: the reference behaviour; its fixture can also be restarted and killed.
    "kafka4": KAFKA_ANSWERS | {"restart", "kill"},
    "kafka39": KAFKA_ANSWERS | {"restart", "kill"},
    # Tansu: what its deviations (aiokafka_lite.testing.tansu.DEVIATIONS) leave; no TLS listener.
    "tansu": KAFKA_ANSWERS - tansu.capabilities_lacking(),
    # librdkafka mock: in-process, so no restart; no admin APIs; read_committed is not honoured
    # (aborted records are returned); no timestamp index; error/latency injection instead.
    "mock": frozenset({"end_offsets", "fault_injection"}),
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
        """Skip the calling test unless this broker has every named capability (saying why not)."""
        missing = sorted(set(capabilities) - self.capabilities)
        if missing:
            pytest.skip(f"{self.name} lacks {', '.join(missing)}{self._why(missing)}")

    def _why(self, missing: list[str]) -> str:
        if self.kind != "tansu":
            return ""
        reasons = [f"{d.differs} (DEVIATIONS[{d.name!r}])" for d in tansu.DEVIATIONS.values()
                   if d.lacks in missing]
        return ": " + "; ".join(reasons) if reasons else ""


@pytest.fixture(params=[pytest.param(kind, marks=pytest.mark.broker(kind), id=kind)
                        for kind in _FIXTURE_FOR_KIND])
def any_broker(request: pytest.FixtureRequest) -> BrokerUnderTest:
    """Each broker kind in turn: Apache Kafka 4.3.1 and 3.9.1, Tansu, and the librdkafka mock."""
    kind: str = request.param
    broker = request.getfixturevalue(_FIXTURE_FOR_KIND[kind])
    return BrokerUnderTest(kind, broker, CAPABILITIES[kind])
