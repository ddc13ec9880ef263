"""``group_protocol``: run a group test once per group protocol, classic and consumer (KIP-848).

The fixture yields a :class:`GroupProtocol`; pass a test's consumer settings through
``group_protocol.settings(...)``. Under the consumer protocol the broker owns session_timeout_ms,
heartbeat_interval_ms and the assignor, and setting them is a ConfigError (as in Java), so they
are dropped; ``session_timeout`` says which session is in force either way.

The consumer protocol exists on Apache Kafka 4.x only: with ``any_broker`` (or any other broker)
the consumer case skips, saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

# What the broker owns under group_protocol="consumer" (KIP-848); Java refuses them too.
BROKER_OWNED = ("session_timeout_ms", "heartbeat_interval_ms", "partition_assignment_strategy")

# group.consumer.session.timeout.ms of the apache_kafka_broker fixture (aiokafka_lite.testing.apache_kafka).
KAFKA4_CONSUMER_SESSION_S = 10.0

# The broker fixtures that speak ConsumerGroupHeartbeat, and any_broker kinds that do.
_KIP848_FIXTURES = ("apache_kafka_broker",)
_KIP848_KINDS = ("kafka4",)


@dataclass(frozen=True)
class GroupProtocol:
    name: str  # "classic" | "consumer"

    @property
    def is_classic(self) -> bool:
        return self.name == "classic"

    def settings(self, base: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """``base`` plus ``extra`` with ``group_protocol`` set; the broker-owned ones dropped
        under the consumer protocol."""
        out = {**(base or {}), **extra, "group_protocol": self.name}
        if not self.is_classic:
            for name in BROKER_OWNED:
                out.pop(name, None)
        return out

    @property
    def lapsed_state(self) -> str:
        """metrics()["group_state"] after the poll watchdog left the group (the next poll rejoins).

        Classic: UNJOINED. KIP-848: STALE, the state Java's consumer-protocol member has then
        (MemberState.STALE, "left the group due to poll timer expiry", AbstractMembershipManager).
        """
        return "UNJOINED" if self.is_classic else "STALE"

    @property
    def idle_state(self) -> str:
        """metrics()["group_state"] of a member that never joined (assign() with a group_id).

        Classic: UNJOINED. KIP-848: UNSUBSCRIBED, as Java's MemberState.UNSUBSCRIBED.
        """
        return "UNJOINED" if self.is_classic else "UNSUBSCRIBED"

    def session_timeout(self, settings: dict[str, Any]) -> float:
        """Seconds after which a silent member is removed: the broker's under the consumer protocol."""
        if self.is_classic:
            return float(settings.get("session_timeout_ms", 45000)) / 1000
        return KAFKA4_CONSUMER_SESSION_S

    def __str__(self) -> str:
        return self.name


def _skip_unless_kip848(request: pytest.FixtureRequest) -> None:
    names = request.fixturenames
    if "any_broker" in names:
        broker = request.getfixturevalue("any_broker")
        if broker.kind not in _KIP848_KINDS:
            pytest.skip(f"group_protocol='consumer' (KIP-848) needs Apache Kafka 4.x; {broker.name} has "
                        "no ConsumerGroupHeartbeat")
    elif not any(name in names for name in _KIP848_FIXTURES):
        pytest.skip("group_protocol='consumer' (KIP-848) needs Apache Kafka 4.x (apache_kafka_broker)")


@pytest.fixture(params=["classic", "consumer"])
def group_protocol(request: pytest.FixtureRequest) -> GroupProtocol:
    """Each group protocol in turn (see the module docstring)."""
    if request.param == "consumer":
        _skip_unless_kip848(request)
    return GroupProtocol(request.param)
