"""connect_failure.explain: what a low-level failure at each step of Connection.open means."""

from __future__ import annotations

import socket
import ssl

from aiokafka_lite._net.connect_failure import ClosedInTlsHandshake, Step, explain, fails_for_good
from aiokafka_lite._net.exceptions import translate
from aiokafka_lite._net.frames import frame_size_error
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite.errors import AuthenticationError, KafkaConnectionError, ProtocolDecodeError

PLAIN = ConnectionOptions()
TLS = ConnectionOptions(security_protocol="SSL")


def _alert(reason: str) -> ssl.SSLError:
    exc = ssl.SSLError(1, f"[SSL: {reason}] tlsv13 alert ({reason})")
    exc.reason = reason  # as OpenSSL sets it
    return exc


def test_every_address_of_a_name_refusing_is_refused() -> None:
    # localhost as ::1 and 127.0.0.1: asyncio joins the two errors into one OSError.
    joined = OSError("Multiple exceptions: [Errno 111] Connect call failed ('::1', 1, 0, 0), "
                     "[Errno 111] Connect call failed ('127.0.0.1', 1)")
    said = explain(translate(joined, "connecting"), Step.CONNECT, "localhost:1", PLAIN, 5.0)
    assert str(said) == "localhost:1 refused the connection"


def test_a_name_that_does_not_exist_fails_for_good_but_a_dns_outage_does_not() -> None:
    missing = translate(socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "connecting")
    assert fails_for_good(explain(missing, Step.CONNECT, "x.invalid:9092", PLAIN, 5.0))
    outage = translate(socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"), "connecting")
    said = explain(outage, Step.CONNECT, "kafka:9092", PLAIN, 5.0)
    assert str(said) == "kafka:9092: the name could not be resolved (Temporary failure in name resolution)"
    assert not fails_for_good(said)


def test_a_certificate_alert_after_the_handshake_is_an_authentication_error() -> None:
    # TLS 1.3: the server's verdict on the client certificate arrives with the first read.
    lost = translate(_alert("TLSV13_ALERT_CERTIFICATE_REQUIRED"), "reading")
    said = explain(lost, Step.API_VERSIONS, "b:9093", TLS, 5.0)
    assert isinstance(said, AuthenticationError)
    assert str(said) == ("b:9093 requires a TLS client certificate and none is configured (ssl_certfile, "
                         "ssl_keyfile): TLS alert TLSV13_ALERT_CERTIFICATE_REQUIRED")


def test_other_tls_failures_are_retried_with_their_reason() -> None:
    said = explain(translate(_alert("SSLV3_ALERT_HANDSHAKE_FAILURE"), "connecting"), Step.CONNECT, "b:9093", TLS,
                   5.0)
    assert type(said) is KafkaConnectionError
    assert str(said) == "b:9093: TLS handshake failed (SSLV3_ALERT_HANDSHAKE_FAILURE)"


def test_a_tls_alert_read_as_a_frame_size_is_a_listener_that_speaks_tls() -> None:
    # 15 03 03 00: a TLS 1.2 alert record's header, the answer of a TLS listener to our plaintext request.
    alert = frame_size_error("broker b:9093", 0x15030300, 100 * 1024 * 1024)
    said = explain(alert, Step.API_VERSIONS, "b:9093", PLAIN, 5.0)
    assert isinstance(said, AuthenticationError)
    assert "set security_protocol to SSL (or SASL_SSL if the listener takes SASL), not PLAINTEXT" in str(said)
    # Any other size too large is a server that is not Kafka, retried as before.
    other = explain(frame_size_error("broker b:9093", 0x48545450, 100 * 1024 * 1024), Step.API_VERSIONS, "b:9093",
                    PLAIN, 5.0)
    assert type(other) is ProtocolDecodeError
    assert str(other).startswith("b:9093 is not a Kafka broker")


def test_a_tls_handshake_ended_without_an_answer_is_left_to_the_probe() -> None:
    # An end of stream is no proof the server does not speak TLS (a broker going away does that too).
    eof = _alert("UNEXPECTED_EOF_WHILE_READING")
    said = explain(translate(eof, "connecting"), Step.CONNECT, "b:9093", TLS, 5.0)
    assert isinstance(said, ClosedInTlsHandshake)
    assert not fails_for_good(said)
    wrong = explain(translate(_alert("WRONG_VERSION_NUMBER"), "connecting"), Step.CONNECT, "b:9093", TLS, 5.0)
    assert isinstance(wrong, AuthenticationError)
    assert str(wrong).endswith("set security_protocol to PLAINTEXT, not SSL")
