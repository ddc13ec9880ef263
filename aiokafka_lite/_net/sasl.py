"""SASL authentication, sans-I/O: SaslHandshake v1, then SaslAuthenticate rounds for PLAIN, SCRAM or
OAUTHBEARER.

This module owns the mechanisms and the exchange; it does no I/O and imports no connection. The
asyncio connection and the heartbeat thread's blocking one each drive ``sasl_exchange`` with their
own ``send`` (see ``next_request``), so one logic serves both.

OAUTHBEARER follows RFC 7628 as Kafka uses it (KIP-255, extensions KIP-342); the token is fetched
by the driver (``oauth.py``) and handed in, so this module stays free of I/O.

SCRAM follows RFC 5802 (SHA-256/512 as in RFC 7677). Like Kafka's own client, the password is used
as UTF-8 without SASLprep. Passwords never appear in logs, reprs or error messages.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..errors import BROKER_ERRORS, AuthenticationError, ConfigError
from ..protocol.api import Api
from ..protocol.messages import SASL_AUTHENTICATE, SASL_HANDSHAKE
from ..structs import OAuthBearerToken

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


class OAuthBearer:
    """RFC 7628 client: one message, ``n,,^Aauth=Bearer <token>^A[key=value^A...]^A`` (^A is 0x01).

    A broker that refuses the token answers with an error challenge (JSON); the client acknowledges
    it with a lone ^A, and the broker then fails the exchange. The challenge is kept for the error."""

    name = "OAUTHBEARER"
    _EXTENSION_KEY = re.compile(r"[A-Za-z]+")
    _EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")

    def __init__(self, token: OAuthBearerToken) -> None:
        self._token = token
        self.username = token_subject(token.token) or "a token"
        self.server_error: str | None = None
        for key, value in token.extensions.items():
            if key == "auth" or not self._EXTENSION_KEY.fullmatch(key):
                raise ConfigError(f"SASL extension name {key!r}: expected letters only, and not 'auth'")
            if not self._EXTENSION_VALUE.fullmatch(value):
                raise ConfigError(f"SASL extension {key!r}: its value must be printable ASCII (RFC 7628)")

    def initial_response(self) -> bytes:
        pairs = [f"auth=Bearer {self._token.token}"] + [f"{k}={v}" for k, v in self._token.extensions.items()]
        return ("n,,\x01" + "".join(pair + "\x01" for pair in pairs) + "\x01").encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if not challenge:
            return None
        self.server_error = challenge.decode("utf-8", "replace")
        return b"\x01"

    def __repr__(self) -> str:
        return f"OAuthBearer(subject={self.username!r})"


def token_subject(token: str) -> str | None:
    """The ``sub`` claim of a JWT, unverified (for messages only), or None if it is no JWT."""
    parts = token.split(".")
    if len(parts) < 2:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    subject = claims.get("sub") if isinstance(claims, dict) else None
    return subject if isinstance(subject, str) else None


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


def mechanism_for(options: ConnectionOptions, token: OAuthBearerToken | None = None) -> SaslMechanism:
    if options.sasl_mechanism == "OAUTHBEARER":
        if token is None:
            raise AuthenticationError("SASL OAUTHBEARER needs a token, and none was given")
        return OAuthBearer(token)
    username, password = options.sasl_plain_username or "", options.sasl_plain_password or ""
    if options.sasl_mechanism == "PLAIN":
        return Plain(username, password)
    return Scram(options.sasl_mechanism, username, password)


# One request of an exchange: (api, version, body); the driver sends the decoded response back.
Request = tuple[Api, int, dict[str, Any]]
Exchange = Generator[Request, dict[str, Any], None]


def sasl_exchange(options: ConnectionOptions, version_for: Callable[[Api], int], peer: str,
                  token: OAuthBearerToken | None = None) -> Exchange:
    """The SASL exchange as a sans-I/O generator: it yields requests and receives responses, so
    the asyncio connection and the heartbeat thread's blocking one drive the same logic.
    ``token``: OAUTHBEARER's, fetched by the driver. The last response the driver receives carries
    the session lifetime (``session_lifetime``)."""
    mechanism = mechanism_for(options, token)
    yield from _handshake(version_for, peer, mechanism.name)
    auth_version = version_for(SASL_AUTHENTICATE)
    message: bytes | None = mechanism.initial_response()
    while message is not None:
        response = yield (SASL_AUTHENTICATE, auth_version, {"auth_bytes": message})
        if response["error_code"]:
            failure = _failure(peer, mechanism, response["error_code"], response["error_message"])
            if isinstance(mechanism, OAuthBearer) and mechanism.server_error:
                if mechanism.server_error not in failure:
                    failure += f" (the broker's challenge: {mechanism.server_error})"
                failure += ": the broker refused the token (its log says why: expired, audience, signature...)"
            raise AuthenticationError(failure)
        message = mechanism.evaluate(response["auth_bytes"] or b"")
    if isinstance(mechanism, Scram) and not mechanism.done:
        raise AuthenticationError(f"{mechanism.name}: the exchange with {peer} ended early")


def session_lifetime(last_response: dict[str, Any] | None) -> float | None:
    """Seconds until the broker ends the session unless the client re-authenticates (KIP-368),
    from the exchange's last SaslAuthenticate response; None when it sets no limit."""
    lifetime_ms = (last_response or {}).get("session_lifetime_ms") or 0
    return lifetime_ms / 1000 if lifetime_ms > 0 else None


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
