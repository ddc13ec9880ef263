"""SASL authentication, sans-I/O: SaslHandshake v1, then SaslAuthenticate rounds for PLAIN or SCRAM.

This module owns the mechanisms and the exchange; it does no I/O and imports no connection. The
asyncio connection and the heartbeat thread's blocking one each drive ``sasl_exchange`` with their
own ``send`` (see ``next_request``), so one logic serves both.

SCRAM follows RFC 5802 (SHA-256/512 as in RFC 7677). Like Kafka's own client, the password is used
as UTF-8 without SASLprep. Passwords never appear in logs, reprs or error messages.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..errors import BROKER_ERRORS, AuthenticationError, ConfigError
from ..protocol.api import Api
from ..protocol.messages import SASL_AUTHENTICATE, SASL_HANDSHAKE

if TYPE_CHECKING:
    from .options import ConnectionOptions

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34


class SaslMechanism(Protocol):
    name: str
    username: str

    def initial_response(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The next token for the broker, or None when the exchange is complete."""


class Plain:
    """RFC 4616: one message, authzid empty."""

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self.username = username
        self._password = password

    def initial_response(self) -> bytes:
        return b"\0" + self.username.encode() + b"\0" + self._password.encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        return None

    def __repr__(self) -> str:
        return f"Plain(username={self.username!r})"


class Scram:
    """RFC 5802 client: client-first, client-final (with proof), then verify the server signature."""

    HASHES: ClassVar[dict[str, str]] = {
        "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512", "SCRAM-SHA-1": "sha1"}

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        if mechanism not in self.HASHES:
            raise ConfigError(f"sasl_mechanism={mechanism!r}: expected one of {', '.join(self.HASHES)}")
        self.name = mechanism
        self.username = username
        self._password = password
        self._hash = self.HASHES[mechanism]
        self._nonce = nonce or secrets.token_urlsafe(24)  # printable, and never contains ','
        self._client_first_bare = f"n={saslname(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self.done = False

    def initial_response(self) -> bytes:
        return b"n,," + self._client_first_bare.encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._server_signature is None:
            return self._client_final(challenge.decode("utf-8", "replace"))
        self._verify_server_final(challenge.decode("utf-8", "replace"))
        return None

    def _client_final(self, server_first: str) -> bytes:
        attrs = _parse_attributes(server_first)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if "m" in attrs:
            raise AuthenticationError(f"{self.name}: the broker requires an unsupported extension")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise AuthenticationError(f"{self.name}: the broker's nonce does not extend ours")
        if salt is None or not iterations.isdigit() or int(iterations) < 1:
            raise AuthenticationError(f"{self.name}: malformed server-first message")
        without_proof = f"c=biws,r={nonce}"  # biws = base64("n,,"): no channel binding
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        salted = hashlib.pbkdf2_hmac(self._hash, self._password.encode(), _b64decode(salt, self.name),
                                     int(iterations))
        client_key = self._hmac(salted, b"Client Key")
        client_signature = self._hmac(hashlib.new(self._hash, client_key).digest(), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final: str) -> None:
        attrs = _parse_attributes(server_final)
        if "e" in attrs:
            raise AuthenticationError(f"{self.name} authentication as {self.username!r} failed: {attrs['e']}")
        signature = _b64decode(attrs.get("v", ""), self.name)
        if self._server_signature is None or not hmac.compare_digest(signature, self._server_signature):
            raise AuthenticationError(f"{self.name}: the broker's signature does not verify "
                                      "(it does not know the password: possible impostor)")
        self.done = True

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self._hash).digest()

    def __repr__(self) -> str:
        return f"Scram({self.name!r}, username={self.username!r})"


def saslname(username: str) -> str:
    """RFC 5802 5.1: ',' and '=' in a user name are escaped as '=2C' and '=3D'."""
    return username.replace("=", "=3D").replace(",", "=2C")


def _parse_attributes(message: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if len(key) == 1 and sep:
            attrs.setdefault(key, value)
    return attrs


def _b64decode(text: str, mechanism: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise AuthenticationError(f"{mechanism}: the broker sent invalid base64") from exc


def mechanism_for(options: ConnectionOptions) -> SaslMechanism:
    username, password = options.sasl_plain_username or "", options.sasl_plain_password or ""
    if options.sasl_mechanism == "PLAIN":
        return Plain(username, password)
    return Scram(options.sasl_mechanism, username, password)


# One request of an exchange: (api, version, body); the driver sends the decoded response back.
Request = tuple[Api, int, dict[str, Any]]
Exchange = Generator[Request, dict[str, Any], None]


def sasl_exchange(options: ConnectionOptions, version_for: Callable[[Api], int], peer: str) -> Exchange:
    """The SASL exchange as a sans-I/O generator: it yields requests and receives responses, so
    the asyncio connection and the heartbeat thread's blocking one drive the same logic."""
    mechanism = mechanism_for(options)
    yield from _handshake(version_for, peer, mechanism.name)
    auth_version = version_for(SASL_AUTHENTICATE)
    token: bytes | None = mechanism.initial_response()
    while token is not None:
        response = yield (SASL_AUTHENTICATE, auth_version, {"auth_bytes": token})
        if response["error_code"]:
            raise AuthenticationError(_failure(peer, mechanism, response["error_code"],
                                               response["error_message"]))
        token = mechanism.evaluate(response["auth_bytes"] or b"")
    if isinstance(mechanism, Scram) and not mechanism.done:
        raise AuthenticationError(f"{mechanism.name}: the exchange with {peer} ended early")


def next_request(exchange: Exchange, response: dict[str, Any] | None = None) -> Request | None:
    """The exchange's next request, given the response to its last one (None to start it), or None
    when the exchange is complete. A driver loops: send the request, hand back its decoded response."""
    try:
        return next(exchange) if response is None else exchange.send(response)
    except StopIteration:
        return None


def _handshake(version_for: Callable[[Api], int], peer: str, name: str) -> Exchange:
    # v0 would switch to raw (unframed) SASL tokens; we speak only the framed v1 flow.
    version = version_for(SASL_HANDSHAKE)
    if version < 1:
        raise AuthenticationError(f"{peer} supports only SaslHandshake v0 (raw SASL tokens)")
    response = yield (SASL_HANDSHAKE, version, {"mechanism": name})
    code, offered = response["error_code"], list(response["mechanisms"] or ())
    if code == UNSUPPORTED_SASL_MECHANISM and name in offered:
        # The mechanisms list should be what the listener enables; a broker that names the one it
        # refuses leaves nothing to choose (Tansu without --authentication echoes the request).
        raise AuthenticationError(
            f"{peer} refused SASL mechanism {name} (UNSUPPORTED_SASL_MECHANISM) though its answer lists "
            f"{', '.join(offered)} as enabled; contradicting itself, it leaves no mechanism to choose: check "
            "that the broker has SASL authentication enabled on this listener")
    if code == UNSUPPORTED_SASL_MECHANISM:
        raise AuthenticationError(f"{peer} does not enable SASL mechanism {name}; it offers: "
                                  f"{', '.join(offered) or 'none'}")
    if code == ILLEGAL_SASL_STATE:
        # Apache Kafka's answer to a SaslHandshake on a listener without SASL.
        raise AuthenticationError(f"{peer} takes no SASL on this listener (its SaslHandshake answer: "
                                  "ILLEGAL_SASL_STATE); for a PLAINTEXT or SSL listener, set "
                                  "security_protocol to PLAINTEXT or SSL")
    if code:
        raise AuthenticationError(_failure(peer, None, code, None))


def _failure(peer: str, mechanism: SaslMechanism | None, code: int, message: str | None) -> str:
    spec = BROKER_ERRORS.get(code)
    who = f"SASL {mechanism.name} as {mechanism.username!r}" if mechanism else "SASL"
    text = f"{who} with {peer} failed: {spec.name if spec else code} ({code})"
    return text + (f": {message}" if message else "")
