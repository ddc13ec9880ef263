"""SASL/OAUTHBEARER for test brokers: unsecured tokens, listener settings, and an identity provider.

* ``unsecured_jws(subject, lifetime)``: a token for the broker's default (unsecured) validator,
  a JWS with ``alg: none`` and the ``sub``, ``iat`` and ``exp`` claims;
* ``oauthbearer_listener_properties(listener, ...)``: the broker settings that turn an extra
  listener of ``ApacheKafkaBroker`` into an OAUTHBEARER one: the unsecured validator, or with
  ``jwks_url`` Kafka's ``OAuthBearerValidatorCallbackHandler`` checking signatures against it;
  ``allowed_urls_jvm_option(...)`` is the JVM system property Kafka 4.x wants for those URLs;
* ``OAuthServer``: a token endpoint and a JWKS on 127.0.0.1 (``http.server`` on a thread), issuing
  RS256 tokens signed with ``cryptography``, for the client-credentials grant (a secret in Basic auth,
  or a client assertion, KIP-1258) and the jwt-bearer grant (KIP-1139). Assertions must verify with
  a public key registered for their ``iss`` by ``trust_assertion_key``, name the token URL as ``aud``,
  not be expired, and not repeat a ``jti``; a refusal names the failed check in
  ``error_description``. A context manager: started and stopped
  by its user (a fixture). Clients it knows are registered with ``add_client``; one may be given a
  wrong audience or a key the JWKS does not hold, to see the broker refuse its tokens::

      with OAuthServer(issuer="test-idp", audience="kafka") as idp:
          idp.add_client("consumer", "secret")
          broker = ApacheKafkaBroker(extra_listeners={"OAUTH_JWT": "SASL_PLAINTEXT"},
                                     extra_properties=oauthbearer_listener_properties(
                                         "OAUTH_JWT", jwks_url=idp.jwks_url, audience="kafka",
                                         issuer="test-idp"),
                                     jvm_options=[allowed_urls_jvm_option(idp.jwks_url, idp.token_url)])

Nothing here is fit for anything but tests.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from aiokafka_lite.testing._assertion_check import (
    JWT_BEARER_CLIENT_ASSERTION,
    JWT_BEARER_GRANT,
    AssertionRefused,
    check_assertion,
)
from aiokafka_lite.testing._process import LOCALHOST, BrokerUnavailable

__all__ = ["OAuthServer", "allowed_urls_jvm_option", "oauthbearer_listener_properties", "unsecured_jws"]

_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _segment(value: dict[str, Any]) -> str:
    return _b64url(json.dumps(value, separators=(",", ":")).encode())


def unsecured_jws(subject: str, lifetime: float, *, now: float | None = None, **claims: Any) -> str:
    """An unsigned token (``alg: none``) that Kafka's unsecured validator accepts until it expires."""
    issued = time.time() if now is None else now
    payload = {"sub": subject, "iat": int(issued), "exp": int(issued + lifetime), **claims}
    return f"{_segment({'alg': 'none'})}.{_segment(payload)}."


def oauthbearer_listener_properties(listener: str, *, jwks_url: str | None = None,
                                    audience: str | None = None, issuer: str | None = None,
                                    max_reauth_ms: int | None = None) -> dict[str, str]:
    """Broker settings for an OAUTHBEARER listener named ``listener`` (SASL_PLAINTEXT or SASL_SSL).

    Without ``jwks_url`` the broker's unsecured validator accepts ``unsecured_jws`` tokens. With it,
    tokens must verify against that JWKS and name ``audience`` and ``issuer`` (broker-wide settings:
    one JWT listener per broker). ``max_reauth_ms``: ``connections.max.reauth.ms`` on this listener,
    the session lifetime that makes clients re-authenticate (KIP-368)."""
    prefix = f"listener.name.{listener.lower()}."
    props = {prefix + "sasl.enabled.mechanisms": "OAUTHBEARER",
             prefix + "oauthbearer.sasl.jaas.config": _LOGIN_MODULE}
    if max_reauth_ms is not None:
        props[prefix + "oauthbearer.connections.max.reauth.ms"] = str(max_reauth_ms)
    if jwks_url is not None:
        props[prefix + "oauthbearer.sasl.server.callback.handler.class"] = _VALIDATOR
        props["sasl.oauthbearer.jwks.endpoint.url"] = jwks_url
        if audience is not None:
            props["sasl.oauthbearer.expected.audience"] = audience
        if issuer is not None:
            props["sasl.oauthbearer.expected.issuer"] = issuer
    return props


def allowed_urls_jvm_option(*urls: str) -> str:
    """Kafka 4.x fetches OAuth URLs only when listed in this JVM system property (CVE-2025-27817)."""
    return "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=" + ",".join(urls)


@dataclass(frozen=True)
class _Client:
    secret: str
    audience: str | None  # None: the server's
    forged: bool  # signed with a key the JWKS does not hold
    lifetime: float


def _rsa() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BrokerUnavailable("OAuthServer signs tokens with the 'cryptography' package "
                                "(pip install '.[testing]' in the aiokafka-lite clone)") from exc
    return rsa


class _SigningKey:
    def __init__(self, kid: str) -> None:
        self.kid = kid
        self._key = _rsa().generate_private_key(public_exponent=65537, key_size=2048)

    def jwk(self) -> dict[str, str]:
        numbers = self._key.public_key().public_numbers()
        def as_bytes(n: int) -> bytes:
            return n.to_bytes((n.bit_length() + 7) // 8, "big")

        return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid,
                "n": _b64url(as_bytes(numbers.n)), "e": _b64url(as_bytes(numbers.e))}

    def sign(self, claims: dict[str, Any]) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        signed = f"{_segment({'alg': 'RS256', 'typ': 'JWT', 'kid': self.kid})}.{_segment(claims)}"
        signature = self._key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signed}.{_b64url(signature)}"


class OAuthServer:
    """A token endpoint (``token_url``, client-credentials grant) and a JWKS (``jwks_url``)."""

    def __init__(self, *, issuer: str = "aiokafka-lite-test-idp", audience: str = "kafka",
                 token_lifetime: float = 3600.0) -> None:
        self.issuer, self.audience, self.token_lifetime = issuer, audience, token_lifetime
        self._key = _SigningKey("test-key-1")
        self._forger = _SigningKey("test-key-1")  # same kid, other key: its signatures do not verify
        self._clients: dict[str, _Client] = {}
        self._lock = threading.Lock()
        self.token_requests: dict[str, int] = {}  # client id (or assertion subject) -> tokens issued
        self._assertion_keys: dict[str, Any] = {}  # iss -> public key
        self._seen_jti: set[str] = set()
        self.refusals: list[str] = []  # error_description of every refused assertion
        self.jwks_requests = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def add_client(self, client_id: str, secret: str, *, audience: str | None = None, forged: bool = False,
                   lifetime: float | None = None) -> None:
        with self._lock:
            self._clients[client_id] = _Client(secret, audience, forged, lifetime or self.token_lifetime)

    def trust_assertion_key(self, issuer: str, public_key: Any) -> None:
        """Assertions whose ``iss`` is ``issuer`` verify with ``public_key`` (a ``cryptography`` key)."""
        with self._lock:
            self._assertion_keys[issuer] = public_key

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("OAuthServer is not started")
        return int(self._server.server_address[1])

    @property
    def token_url(self) -> str:
        return f"http://{LOCALHOST}:{self.port}/token"

    @property
    def jwks_url(self) -> str:
        return f"http://{LOCALHOST}:{self.port}/jwks"

    def start(self) -> OAuthServer:
        if self._server is None:
            self._server = ThreadingHTTPServer((LOCALHOST, 0), _handler(self))
            self._server.daemon_threads = True
            self._thread = threading.Thread(target=self._server.serve_forever, name="oauth-test-idp",
                                            kwargs={"poll_interval": 0.1}, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OAuthServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- what the handler asks -------------------------------------------------------------------

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            self.jwks_requests += 1
        return {"keys": [self._key.jwk()]}

    def issue(self, client_id: str, secret: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) for a token request."""
        with self._lock:
            client = self._clients.get(client_id)
            if client is None or client.secret != secret:
                return 401, {"error": "invalid_client", "error_description": "unknown client or wrong secret"}
            if form.get("grant_type") != "client_credentials":
                return 400, {"error": "unsupported_grant_type"}
        return self._token(client_id, client.audience, client.lifetime, client.forged, form)

    def issue_for_assertion(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """The jwt-bearer grant (``assertion``), or the client-credentials grant with ``client_assertion``."""
        bearer = form.get("grant_type") == JWT_BEARER_GRANT
        if not bearer and form.get("client_assertion_type") != JWT_BEARER_CLIENT_ASSERTION:
            return 401, {"error": "invalid_client", "error_description": "client_assertion_type not jwt-bearer"}
        if not bearer and form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        error = "invalid_grant" if bearer else "invalid_client"
        with self._lock:
            try:
                claims = check_assertion(form.get("assertion" if bearer else "client_assertion", ""),
                                         self._assertion_keys, self.token_url, self._seen_jti)
                if not bearer and not claims["iss"] == claims["sub"] == form.get("client_id", claims["sub"]):
                    raise AssertionRefused(f"client assertion iss {claims['iss']!r} and sub {claims['sub']!r} "
                                           f"must both be the client id {form.get('client_id')!r}")
            except AssertionRefused as exc:
                self.refusals.append(str(exc))
                return (400 if bearer else 401), {"error": error, "error_description": str(exc)}
        return self._token(str(claims["sub"]), None, self.token_lifetime, False, form)

    def _token(self, subject: str, audience: str | None, lifetime: float, forged: bool,
               form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.token_requests[subject] = self.token_requests.get(subject, 0) + 1
        now = int(time.time())
        claims = {"sub": subject, "iss": self.issuer, "aud": audience or self.audience,
                  "iat": now, "exp": now + int(lifetime)}
        if form.get("scope"):  # Kafka's validator refuses an empty scope claim
            claims["scope"] = form["scope"]
        token = (self._forger if forged else self._key).sign(claims)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": int(lifetime)}


def _handler(server: OAuthServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read no access log
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/jwks":
                self._answer(200, server.jwks())
            else:
                self._answer(404, {"error": "not_found"})

        def do_POST(self) -> None:
            if self.path != "/token":
                self._answer(404, {"error": "not_found"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
            if "assertion" in form or "client_assertion" in form:
                self._answer(*server.issue_for_assertion(form))
                return
            scheme, _, encoded = (self.headers.get("Authorization") or "").partition(" ")
            try:
                client_id, _, secret = base64.b64decode(encoded).decode().partition(":")
            except ValueError:
                client_id = secret = ""
            if scheme != "Basic":
                self._answer(401, {"error": "invalid_client", "error_description": "Basic auth expected"})
                return
            unquote = urllib.parse.unquote_plus
            self._answer(*server.issue(unquote(client_id), unquote(secret), form))

    return Handler
