"""What a listener speaks, asked once the first try suggests that security_protocol does not match it.

Two mismatches show only as a closed connection: a TLS client's handshake that a plaintext Kafka
listener ends (it reads the ClientHello as a frame too large to take), and a client without SASL
whose first request after ApiVersions a SASL listener ends (before authentication it takes nothing
but ApiVersions and SASL). A closed connection can also be a broker going away or a connection limit,
so one more connection asks, with TLS or not as the listener seems to want and without SASL:
ApiVersions, then a SaslHandshake for a mechanism no broker enables, which a SASL listener answers
with the mechanisms it enables (UNSUPPORTED_SASL_MECHANISM) and a listener without SASL with
ILLEGAL_SASL_STATE. Only such a Kafka answer makes the mismatch final: an AuthenticationError naming
the setting to change. Anything else (no answer, not Kafka, a broker that echoes the mechanism back)
leaves the failure as it was, to be retried.
"""

from __future__ import annotations

import dataclasses
import logging

from ..errors import AuthenticationError, KafkaError
from ..protocol.messages import SASL_HANDSHAKE
from .connect_failure import ClosedInTlsHandshake
from .connection import Connection
from .options import ConnectionOptions
from .sasl import ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM

log = logging.getLogger("aiokafka_lite.net")

PROBE_TIMEOUT = 5.0  # seconds for the whole probe: a listener that answers does so in milliseconds
PROBE_MECHANISM = "AIOKAFKA-LITE-PROBE"  # enabled nowhere: the answer lists those that are


@dataclasses.dataclass(frozen=True)
class Listener:
    """What the probe found: Kafka, with TLS or not, and the SASL mechanisms it enables (None: no SASL)."""

    tls: bool
    sasl_mechanisms: tuple[str, ...] | None


async def probe(host: str, port: int, options: ConnectionOptions, *, tls: bool) -> Listener | None:
    """What ``host:port`` answers a connection with TLS (``tls``) and without SASL, or None if that
    is not a Kafka answer telling whether the listener takes SASL."""
    asking = dataclasses.replace(options, security_protocol="SSL" if tls else "PLAINTEXT",
                                 request_timeout=PROBE_TIMEOUT)
    try:
        conn = await Connection.open(host, port, asking, timeout=PROBE_TIMEOUT)
    except KafkaError as exc:
        log.debug("probing %s:%s (TLS %s): no Kafka answer: %s", host, port, tls, exc)
        return None
    try:
        response = await conn.send(SASL_HANDSHAKE, conn.version_for(SASL_HANDSHAKE),
                                   {"mechanism": PROBE_MECHANISM}, timeout=PROBE_TIMEOUT)
    except KafkaError as exc:
        log.debug("probing %s:%s (TLS %s): no SaslHandshake answer: %s", host, port, tls, exc)
        return None
    finally:
        await conn.close()
    code, offered = response["error_code"], tuple(response["mechanisms"] or ())
    if code == ILLEGAL_SASL_STATE:
        return Listener(tls, None)
    if code == UNSUPPORTED_SASL_MECHANISM and offered and PROBE_MECHANISM not in offered:
        return Listener(tls, offered)
    return None  # e.g. Tansu without authentication echoes the mechanism back: no telling


async def plaintext_listener(error: KafkaError, host: str, port: int,
                             options: ConnectionOptions) -> AuthenticationError | None:
    """For a TLS client whose handshake ``host:port`` closed (``error``): the error to fail with for
    good if the listener answers Kafka requests without TLS; None to go on retrying."""
    if not isinstance(error, ClosedInTlsHandshake):
        return None
    listener = await probe(host, port, options, tls=False)
    if listener is None:
        return None
    said = f"{host}:{port} closed the connection during the TLS handshake, and answers Kafka requests without TLS"
    if listener.sasl_mechanisms is None:
        return AuthenticationError(f"{said} (a PLAINTEXT listener): set security_protocol to PLAINTEXT, "
                                   f"not {options.security_protocol}")
    return AuthenticationError(f"{said} (a SASL_PLAINTEXT listener; its SASL mechanisms: "
                               f"{', '.join(listener.sasl_mechanisms)}): set security_protocol to SASL_PLAINTEXT, "
                               f"not {options.security_protocol}")


async def sasl_listener(host: str, port: int, options: ConnectionOptions) -> AuthenticationError | None:
    """For a client without SASL whose connection ``host:port`` closed at the first request after
    ApiVersions: the error to fail with for good if the listener takes SASL; None to go on retrying."""
    if options.uses_sasl:
        return None
    listener = await probe(host, port, options, tls=options.uses_tls)
    if listener is None or listener.sasl_mechanisms is None:
        return None
    wanted = "SASL_SSL" if options.uses_tls else "SASL_PLAINTEXT"
    return AuthenticationError(
        f"{host}:{port} takes SASL authentication (a {wanted} listener; its SASL mechanisms: "
        f"{', '.join(listener.sasl_mechanisms)}) and closed the connection at our first request after "
        f"ApiVersions: set security_protocol to {wanted}, not {options.security_protocol}, and sasl_mechanism "
        "with its credentials")
