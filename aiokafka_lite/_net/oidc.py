"""OAuth 2 grants for a token from an identity provider's token endpoint (KIP-768, KIP-1139, KIP-1258).

``ClientCredentials``: ``POST <token endpoint>`` with ``grant_type=client_credentials`` (and
``scope``), the client id and secret in HTTP Basic auth (each form-encoded first, RFC 6749 2.3.1), as
Java's ``OAuthBearerLoginCallbackHandler`` does; or, given an assertion source instead of a secret
(KIP-1258), the client id in the form with ``client_assertion_type`` and a signed JWT as
``client_assertion`` (RFC 7523 2.2). ``JwtBearer``: ``grant_type=urn:ietf:params:oauth:grant-type:
jwt-bearer`` with the JWT as ``assertion`` (RFC 7523 2.1, KIP-1139's ``JwtBearerJwtRetriever``).

The answer's ``access_token`` and ``expires_in`` (else the
JWT's ``exp``) make the token. Plain ``urllib`` in a worker thread (no dependency), bounded by a
socket timeout there and by ``asyncio.timeout`` here; https is verified with the system's CAs.

A refusal (HTTP 400/401/403: wrong id or secret, unknown scope) is ``AuthenticationError`` at once;
anything else (unreachable, 5xx, a malformed answer) is ``KafkaConnectionError``, tried again when
a connection next signs in.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..errors import AuthenticationError, KafkaConnectionError, KafkaTimeoutError
from ..structs import OAuthBearerToken
from .assertion import AssertionSource

_REFUSALS = (400, 401, 403)
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
JWT_BEARER_CLIENT_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class _TokenEndpoint:
    """An async token provider for ``OAuthTokens``: one token request per call."""

    url: str
    timeout: float | None
    client_id: str | None = None

    async def __call__(self) -> OAuthBearerToken:
        try:
            async with asyncio.timeout(self.timeout):
                return await asyncio.to_thread(self._fetch)
        except TimeoutError as exc:
            if isinstance(exc, KafkaTimeoutError):
                raise
            raise KafkaTimeoutError(f"token endpoint {self.url}: no answer within {self.timeout:g} s") from exc

    def _request(self) -> urllib.request.Request:
        raise NotImplementedError

    def _post(self, form: dict[str, str], headers: dict[str, str] | None = None) -> urllib.request.Request:
        return urllib.request.Request(
            self.url, data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={**(headers or {}), "Accept": "application/json",
                     "Content-Type": "application/x-www-form-urlencoded"})

    def _fetch(self) -> OAuthBearerToken:
        where = f"token endpoint {self.url}" + (f" (client id {self.client_id!r})" if self.client_id else "")
        began = time.time()
        try:
            with urllib.request.urlopen(self._request(), timeout=self.timeout) as answer:
                body = answer.read(1 << 20)
        except urllib.error.HTTPError as exc:
            detail = _error_detail(exc.read(4096))
            error_type = AuthenticationError if exc.code in _REFUSALS else KafkaConnectionError
            raise error_type(f"{where} refused the request: HTTP {exc.code}{detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise KafkaConnectionError(f"{where} unreachable: {reason}") from None
        return _token_from(body, began, where)


class ClientCredentials(_TokenEndpoint):
    """The client-credentials grant, the client signed in by its secret or by an assertion."""

    def __init__(self, token_endpoint_url: str, client_id: str, client_secret: str | None = None, *,
                 assertion: AssertionSource | None = None, scope: str | None = None,
                 timeout: float | None = 30.0) -> None:
        if client_secret is None and assertion is None:
            raise ValueError("ClientCredentials needs a client secret or an assertion source")
        self.url = token_endpoint_url
        self.client_id = client_id
        self._client_secret = client_secret
        self._assertion = assertion
        self.scope = scope
        self.timeout = timeout

    def __repr__(self) -> str:
        how = ", client_assertion" if self._assertion is not None else ""
        return f"ClientCredentials({self.url!r}, client_id={self.client_id!r}{how})"

    def _request(self) -> urllib.request.Request:
        form = {"grant_type": "client_credentials"} | ({"scope": self.scope} if self.scope else {})
        if self._assertion is not None:  # KIP-1258: the assertion first, as Java prefers it to a secret
            form |= {"client_id": self.client_id or "", "client_assertion_type": JWT_BEARER_CLIENT_ASSERTION,
                     "client_assertion": self._assertion()}
            return self._post(form)
        quote = urllib.parse.quote_plus
        basic = base64.b64encode(f"{quote(self.client_id or '')}:{quote(self._client_secret or '')}".encode())
        return self._post(form, {"Authorization": f"Basic {basic.decode()}"})


class JwtBearer(_TokenEndpoint):
    """The jwt-bearer grant (KIP-1139): a signed JWT is the grant itself, no client secret."""

    def __init__(self, token_endpoint_url: str, assertion: AssertionSource, *, scope: str | None = None,
                 timeout: float | None = 30.0) -> None:
        self.url = token_endpoint_url
        self._assertion = assertion
        self.scope = scope
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"JwtBearer({self.url!r}, {self._assertion!r})"

    def _request(self) -> urllib.request.Request:
        form = {"grant_type": JWT_BEARER_GRANT, "assertion": self._assertion()}
        return self._post(form | ({"scope": self.scope} if self.scope else {}))


def _token_from(body: bytes, began: float, where: str) -> OAuthBearerToken:
    try:
        answer: Any = json.loads(body)
    except ValueError:
        raise KafkaConnectionError(f"{where} answered with something other than JSON") from None
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise KafkaConnectionError(f"{where} answered without an access_token")
    expires_in = answer.get("expires_in")
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) and expires_in > 0:
        return OAuthBearerToken(token, began + float(expires_in))
    expires_at = _jwt_expiry(token)
    if expires_at is None:
        raise KafkaConnectionError(f"{where} answered without expires_in, and the token has no exp claim")
    return OAuthBearerToken(token, expires_at)


def _jwt_expiry(token: str) -> float | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


def _error_detail(body: bytes) -> str:
    """The RFC 6749 5.2 error of a refusal, when the endpoint says it in JSON."""
    try:
        answer = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(answer, dict) or not isinstance(answer.get("error"), str):
        return ""
    description = answer.get("error_description")
    return f": {answer['error']}" + (f" ({description})" if isinstance(description, str) else "")
