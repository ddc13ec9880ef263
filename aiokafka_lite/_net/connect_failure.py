"""Why a connection to a broker could not be opened, in the words a user needs.

Connection.open knows which step failed (the TCP or TLS connect, ApiVersions, SASL), and the step
decides what a low-level error means: a reset during ApiVersions is a server that is not Kafka (or a
listener that expects TLS); the same reset later is a broker going away. The error keeps its kind
(the caller's retry rules depend on it) and gets a message naming the address and the cause.
Whether waiting can help is decided here too: a name that does not resolve, a certificate the
other side rejects, or a security_protocol the listener beyond doubt does not speak (a TLS alert
answering our plaintext ApiVersions, bytes that are not TLS answering our ClientHello) will not get
better by retrying. A listener that only closes the connection on our ClientHello may be plaintext
Kafka or a server going away: ClosedInTlsHandshake, which listener_probe asks about.
"""

from __future__ import annotations

import enum
import errno
import socket
import ssl

from ..errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProtocolDecodeError,
)
from .exceptions import MisroutedConnectionError
from .frames import FrameSizeError
from .options import ConnectionOptions

# A TLS handshake takes well under a second; a peer silent for this long is most likely a plaintext
# listener waiting for the rest of what it took for a huge frame (Java's connection setup default).
TLS_HANDSHAKE_TIMEOUT = 10.0

# getaddrinfo's answers for a name that does not exist (EAI_AGAIN, a DNS server not answering, can
# get better by waiting, so it is not one of them).
_NO_SUCH_HOST = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}

# OpenSSL reasons meaning the peer answered the ClientHello with something that is not TLS.
_NOT_TLS_REASONS = ("WRONG_VERSION_NUMBER", "UNEXPECTED_EOF", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG",
                    "HTTP_REQUEST", "UNKNOWN_PROTOCOL")
# Those of them meaning the peer sent bytes, and the bytes are not TLS (an end of stream is not one).
_NOT_TLS_BYTES = tuple(reason for reason in _NOT_TLS_REASONS if reason != "UNEXPECTED_EOF")


class ClosedInTlsHandshake(KafkaConnectionError):
    """The server closed the connection on our ClientHello: a plaintext Kafka listener does (it reads
    the ClientHello as a frame too large to take), and so may a server going away."""


class Step(enum.Enum):
    """What Connection.open was doing when it failed."""

    CONNECT = "connecting"  # TCP, and the TLS handshake on TLS listeners
    API_VERSIONS = "asking for the API versions"
    TOKEN = "getting an OAUTHBEARER token"  # from the provider or the token endpoint, not the broker
    SASL = "authenticating (SASL)"


def explain(error: KafkaError, step: Step, address: str, options: ConnectionOptions,
            seconds: float | None) -> KafkaError:
    """``error`` from opening a connection to ``address`` ("host:port") at ``step`` within
    ``seconds``, said plainly, and chained to it."""
    explained = _explained(error, step, address, options, seconds)
    if explained is not error:
        explained.__cause__ = error  # fails_for_good and the traceback read the low-level cause
    return explained


def _explained(error: KafkaError, step: Step, address: str, options: ConnectionOptions,
               seconds: float | None) -> KafkaError:
    uses_tls = options.uses_tls
    if isinstance(error, AuthenticationError | MisroutedConnectionError) or step is Step.TOKEN:
        return error  # already says why (certificate verification, SASL, the token's source, KIP-1242)
    root = _low_level_cause(error)
    if isinstance(error, KafkaTimeoutError):
        return KafkaTimeoutError(f"{address} timed out {step.value} (no answer within {seconds} s)"
                                 + _timeout_hint(step))
    if isinstance(root, ssl.SSLError) and _rejects_our_certificate(root):
        # With TLS 1.3 the server's verdict on our certificate arrives after the handshake.
        return _certificate_rejected(address, root, options)
    if step is Step.CONNECT:
        return _connect_failure(error, root, address, options)
    if step is Step.API_VERSIONS:
        if not uses_tls and isinstance(error, FrameSizeError) and _tls_alert(error.size):
            return AuthenticationError(
                f"{address} speaks TLS: it answered our ApiVersions request with a TLS alert; set "
                f"security_protocol to SSL (or SASL_SSL if the listener takes SASL), not "
                f"{options.security_protocol}")
        if isinstance(error, ProtocolDecodeError):
            return ProtocolDecodeError(f"{address} is not a Kafka broker: it answered ApiVersions with "
                                       f"something that is not a Kafka response ({error})")
        if isinstance(error, KafkaConnectionError):
            expects_tls = "" if uses_tls else ", or a listener that expects TLS (security_protocol SSL)"
            return KafkaConnectionError(f"{address} closed the connection when asked for its API versions: "
                                        f"not a Kafka broker{expects_tls}?")
    if isinstance(error, KafkaConnectionError) and step is Step.SASL:
        return KafkaConnectionError(f"{address} closed the connection during SASL authentication ({error})")
    return error


def api_versions_unanswered(address: str, silent_for: float, seconds: float | None) -> str:
    """What to say when ``address`` took the connection and has not answered ApiVersions for
    ``silent_for`` seconds, while Connection.open keeps waiting up to ``seconds``."""
    waiting = "" if seconds is None else f"; waiting up to {seconds:g} s for it (request_timeout_ms)"
    return (f"{address} accepted the connection but has not answered ApiVersions for {silent_for:g} s "
            f"(not a Kafka broker?){waiting}")


def tls_handshake_unanswered(address: str, silent_for: float, seconds: float | None) -> str:
    """What to say when ``address`` took the TCP connection and has not answered our ClientHello for
    ``silent_for`` seconds, while Connection.open keeps waiting up to ``seconds``."""
    waiting = TLS_HANDSHAKE_TIMEOUT if seconds is None else min(seconds, TLS_HANDSHAKE_TIMEOUT)
    why = "the TLS handshake's timeout" if waiting == TLS_HANDSHAKE_TIMEOUT else "request_timeout_ms"
    return (f"{address} accepted the connection but has not answered the TLS handshake for {silent_for:g} s "
            f"(not a TLS listener?); waiting up to {waiting:g} s for it ({why})")


def fails_for_good(error: BaseException) -> bool:
    """Whether retrying the same address cannot help: a host name that does not resolve."""
    root = _low_level_cause(error)
    return isinstance(root, socket.gaierror) and root.errno in _NO_SUCH_HOST


def _connect_failure(error: KafkaError, root: BaseException | None, address: str,
                     options: ConnectionOptions) -> KafkaError:
    uses_tls = options.uses_tls
    if isinstance(root, socket.gaierror):
        if root.errno in _NO_SUCH_HOST:
            return KafkaConnectionError(f"{address}: no such host (the name does not resolve)")
        return KafkaConnectionError(f"{address}: the name could not be resolved ({root.strerror})")
    if _refused(root):
        return KafkaConnectionError(f"{address} refused the connection")
    if uses_tls and isinstance(root, ssl.SSLError):
        if any(reason in _reason(root) for reason in _NOT_TLS_BYTES):
            plain = "SASL_PLAINTEXT" if options.uses_sasl else "PLAINTEXT"
            return AuthenticationError(f"{address}: TLS handshake failed ({_reason(root)}): the server answered "
                                       f"our ClientHello with something that is not TLS; for a plaintext Kafka "
                                       f"listener, set security_protocol to {plain}, not {options.security_protocol}")
        if "UNEXPECTED_EOF" in _reason(root):  # the only one of _NOT_TLS_REASONS left: listener_probe asks
            return ClosedInTlsHandshake(f"{address}: TLS handshake failed ({_reason(root)}): the server does not "
                                        "speak TLS on this port?")
        return KafkaConnectionError(f"{address}: TLS handshake failed ({_reason(root)})")
    if uses_tls and isinstance(root, ConnectionAbortedError) and "handshake is taking longer" in str(root):
        return KafkaConnectionError(f"{address} did not answer the TLS handshake within {TLS_HANDSHAKE_TIMEOUT:g} s: "
                                    "the server does not speak TLS on this port?")
    if uses_tls and isinstance(root, ConnectionError | EOFError):
        # A plaintext Kafka listener reads the ClientHello as a huge frame size and hangs up.
        return ClosedInTlsHandshake(f"{address} closed the connection during the TLS handshake: the server "
                                    "does not speak TLS on this port?")
    if isinstance(root, OSError) and root.strerror:
        return KafkaConnectionError(f"{address}: cannot connect: {root.strerror}")
    return error


def _certificate_rejected(address: str, exc: ssl.SSLError, options: ConnectionOptions) -> AuthenticationError:
    if options.ssl_certfile is None and options.ssl_context is None:
        return AuthenticationError(f"{address} requires a TLS client certificate and none is configured "
                                   f"(ssl_certfile, ssl_keyfile): TLS alert {_reason(exc)}")
    return AuthenticationError(f"{address} rejected our TLS client certificate: TLS alert {_reason(exc)}")


def _low_level_cause(error: BaseException) -> BaseException | None:
    """The first exception in the ``__cause__`` chain that is not one of ours."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if not isinstance(cause, KafkaError):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__
    return None


def _refused(root: BaseException | None) -> bool:
    if isinstance(root, ConnectionRefusedError):
        return True
    # Several addresses for one name (::1 and 127.0.0.1): asyncio joins their errors into one text.
    text = str(root)
    return (isinstance(root, OSError) and text.startswith("Multiple exceptions")
            and text.count("[Errno") == text.count(f"[Errno {errno.ECONNREFUSED}]"))


def _rejects_our_certificate(exc: ssl.SSLError) -> bool:
    # TLS alerts the server sends when it does not accept the client's certificate (or its absence).
    reason = _reason(exc)
    return "ALERT" in reason and any(word in reason for word in ("CERTIFICATE", "UNKNOWN_CA"))


def _tls_alert(size: int) -> bool:
    """Whether a frame size's four bytes are the header of a TLS alert record: content type 21,
    version 3.0-3.4, and the high byte of a length that an alert (2 bytes) keeps at 0."""
    header = size.to_bytes(4, "big", signed=True)
    return header[0] == 0x15 and header[1] == 0x03 and header[2] <= 0x04 and header[3] == 0x00


def _reason(exc: ssl.SSLError) -> str:
    return str(getattr(exc, "reason", None) or exc)


def _timeout_hint(step: Step) -> str:
    if step is Step.API_VERSIONS:
        return ": it accepted the connection but did not answer ApiVersions (not a Kafka broker?)"
    return ""
