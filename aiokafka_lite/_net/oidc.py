"""The OAuth 2 client-credentials grant (KIP-768): a token from an identity provider's token endpoint.

``POST <token endpoint>`` with ``grant_type=client_credentials`` (and ``scope``), the client id and
secret in HTTP Basic auth (each form-encoded first, RFC 6749 2.3.1), as Java's
``OAuthBearerLoginCallbackHandler`` does. The answer's ``access_token`` and ``expires_in`` (else the
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

_REFUSALS = (400, 401, 403)


class ClientCredentials:
    """An async token provider for ``OAuthTokens``: one token request per call."""

    def __init__(self, token_endpoint_url: str, client_id: str, client_secret: str, *,
                 scope: str | None = None, timeout: float | None = 30.0) -> None:
        self.url = token_endpoint_url
        self.client_id = client_id
        self._client_secret = client_secret
        self.scope = scope
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"ClientCredentials({self.url!r}, client_id={self.client_id!r})"

    async def __call__(self) -> OAuthBearerToken:
        try:
            async with asyncio.timeout(self.timeout):
                return await asyncio.to_thread(self._fetch)
        except TimeoutError as exc:
            if isinstance(exc, KafkaTimeoutError):
                raise
            raise KafkaTimeoutError(f"token endpoint {self.url}: no answer within {self.timeout:g} s") from exc

    def _request(self) -> urllib.request.Request:
        form = {"grant_type": "client_credentials"} | ({"scope": self.scope} if self.scope else {})
        quote = urllib.parse.quote_plus
        basic = base64.b64encode(f"{quote(self.client_id)}:{quote(self._client_secret)}".encode()).decode()
        return urllib.request.Request(
            self.url, data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                     "Content-Type": "application/x-www-form-urlencoded"})

    def _fetch(self) -> OAuthBearerToken:
        where = f"token endpoint {self.url} (client id {self.client_id!r})"
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
