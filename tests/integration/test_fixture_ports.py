"""Why a broker fixture once exited at start with code 1 and an empty stdout (issue 40): its port,
picked free with bind(0) seconds before, was taken meanwhile as the local port of a client
connection. This test takes the port that way on purpose: the broker exits just so, and the fixture
now says why (the broker's log, not only its stdout). free_port() now picks outside the range the
OS takes client ports from (tests/unit/testing/test_free_port.py)."""

from __future__ import annotations

import socket

import pytest

from aiokafka_lite.testing._process import BrokerStartError
from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker, NodeRole

pytestmark = pytest.mark.broker("kafka")


def test_a_broker_whose_port_a_client_connection_holds_exits_and_says_why() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        with socket.create_connection(listener.getsockname()) as client:
            taken = client.getsockname()[1]  # an ephemeral port, as bind(0) hands out
            broker = ApacheKafkaBroker(node=NodeRole(ports={"PLAINTEXT": taken}), start_timeout=60)
            with pytest.raises(BrokerStartError) as caught:
                broker.start()
            broker.stop()
    message = str(caught.value)
    assert "process exited with code 1" in message, message
    assert "Address already in use" in message, message
