"""What a refused SaslHandshake says, for each answer brokers were seen to give (the bytes of each
answer are scripted here; tests/integration/test_security.py gets them from Apache Kafka and Tansu)."""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite._net.sasl import sasl_exchange
from aiokafka_lite.errors import AuthenticationError
from aiokafka_lite.protocol.api import Api
from aiokafka_lite.protocol.messages import SASL_HANDSHAKE

PEER = "127.0.0.1:9093"


def _handshake_answer(mechanism: str, answer: dict[str, Any]) -> str:
    options = ConnectionOptions(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                                sasl_plain_username="alice", sasl_plain_password="pw-Hn4!unique")

    def version_for(api: Api) -> int:
        return 1

    exchange = sasl_exchange(options, version_for, PEER)
    api, _, body = next(exchange)
    assert (api, body) == (SASL_HANDSHAKE, {"mechanism": mechanism})
    with pytest.raises(AuthenticationError) as info:
        exchange.send(answer)
    assert "pw-Hn4" not in str(info.value)
    return str(info.value)


def test_a_mechanism_the_listener_does_not_enable_names_the_ones_it_does() -> None:
    """Apache Kafka with SCRAM-SHA-512 only, asked for PLAIN."""
    said = _handshake_answer("PLAIN", {"error_code": 33, "mechanisms": ["SCRAM-SHA-512"]})
    assert said == f"{PEER} does not enable SASL mechanism PLAIN; it offers: SCRAM-SHA-512"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_refusal_that_lists_the_refused_mechanism_says_so_not_that_it_is_offered(mechanism: str) -> None:
    """Tansu without --authentication: UNSUPPORTED_SASL_MECHANISM, listing the mechanism asked for."""
    said = _handshake_answer(mechanism, {"error_code": 33, "mechanisms": [mechanism]})
    assert "it offers" not in said
    assert said.startswith(f"{PEER} refused SASL mechanism {mechanism} (UNSUPPORTED_SASL_MECHANISM) though "
                           f"its answer lists {mechanism} as enabled"), said
    assert "SASL authentication enabled on this listener" in said


def test_a_listener_without_sasl_says_so_and_which_protocol_fits() -> None:
    """Apache Kafka's PLAINTEXT listener answers a SaslHandshake with ILLEGAL_SASL_STATE."""
    said = _handshake_answer("PLAIN", {"error_code": 34, "mechanisms": []})
    assert said.startswith(f"{PEER} takes no SASL on this listener"), said
    assert "ILLEGAL_SASL_STATE" in said
    assert "security_protocol to PLAINTEXT or SSL" in said
