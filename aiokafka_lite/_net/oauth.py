"""OAUTHBEARER tokens for a cluster's connections: one cache, refreshed before expiry.

Every connection of a consumer (pooled, coordinator, the heartbeat thread's) signs in with the same
token. ``OAuthTokens`` asks the provider (the user's ``sasl_oauth_token_provider`` or the built-in
client-credentials flow, ``oidc.py``) once, keeps the token, and asks again once about 80 % of its
lifetime has passed (with a little jitter, as Java's ``sasl.login.refresh.window.factor`` and
``.jitter``), so a connection opening or re-authenticating (KIP-368) gets a token with time left.
Concurrent askers share one call. A provider that fails while the old token is still valid is
said once (WARNING) and the old token is used until it expires.
"""

from __future__ import annotations

import asyncio
import logging
import math
import numbers
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..errors import AuthenticationError, KafkaError, KafkaTimeoutError
from ..structs import OAuthBearerToken

log = logging.getLogger("aiokafka_lite.net")

TokenProvider = Callable[[], Awaitable[OAuthBearerToken]]

REFRESH_WINDOW = 0.8  # Java's sasl.login.refresh.window.factor
REFRESH_JITTER = 0.05  # Java's sasl.login.refresh.window.jitter
# An expires_at above this (the year 5138 in seconds) is milliseconds (Java's unit) or finer: taken as
# seconds, the token would never be refreshed.
LATEST_EXPIRY = 1e11
# RFC 7628 3.1 kvpair: key = 1*(ALPHA); value = *(VCHAR / SP / HTAB / CR / LF), non-empty as Java asks.
EXTENSION_KEY = re.compile(r"[A-Za-z]+")
EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")


class _Abandoned(Exception):
    """The asker fetching a token was cancelled: whoever waited for its answer asks again."""


def _bad_field(token: OAuthBearerToken) -> str | None:
    """What is wrong with a token's ``token``, ``expires_at`` or ``extensions``, said without the token;
    None if nothing."""
    value: object = token.token
    if not isinstance(value, str):
        return f"token is {type(value).__name__}: expected a str (the access token)"
    if not _encodable(value):
        return "token holds a lone surrogate, which UTF-8 cannot encode: expected the access token as text"
    expires_at: object = token.expires_at
    if isinstance(expires_at, bool) or not isinstance(expires_at, numbers.Real):
        return (f"expires_at is {type(expires_at).__name__}: expected seconds since the epoch "
                "(a number, as time.time())")
    seconds = float(expires_at)
    if not math.isfinite(seconds):
        return f"expires_at is {seconds!r}: expected seconds since the epoch (a finite number, as time.time())"
    if seconds > LATEST_EXPIRY:
        return f"expires_at {seconds:g} looks like milliseconds; give seconds since the epoch (as time.time())"
    if "\x01" in value:
        return ("token holds \\x01, the SASL message's separator (RFC 7628), so it cannot be sent: "
                "expected the access token alone")
    return _bad_extensions(token.extensions)


def _bad_extensions(extensions: object) -> str | None:
    """What is wrong with a token's ``extensions`` (KIP-342), its values never said; None if nothing."""
    if not isinstance(extensions, Mapping):
        return f"extensions is {type(extensions).__name__}: expected a mapping of str to str"
    for key, value in extensions.items():
        if not isinstance(key, str):
            return f"extensions has a key of type {type(key).__name__}: expected a mapping of str to str"
        if key == "auth":
            return "extensions key 'auth' is reserved for the token (RFC 7628)"
        if not EXTENSION_KEY.fullmatch(key):
            return f"extensions key {key[:40]!r}: expected letters only (RFC 7628: 1*ALPHA)"
        if not isinstance(value, str):
            return f"extensions[{key!r}] is {type(value).__name__}: expected a str"
        if not EXTENSION_VALUE.fullmatch(value):
            return (f"extensions[{key!r}] is empty or holds a character other than printable ASCII, "
                    "space, tab, CR or LF (RFC 7628; \\x01 is the message's separator)")
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:  # its args hold the whole text: not raised on, not chained
        return False
    return True


class OAuthTokens:
    """The token cache. ``token()`` on the loop; ``token_blocking()`` from the heartbeat thread."""

    def __init__(self, provider: TokenProvider, *, timeout: float | None,
                 extensions: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time,
                 jitter: Callable[[], float] = lambda: random.uniform(0, REFRESH_JITTER)) -> None:
        self._provider = provider
        self._timeout = timeout
        self._extensions = dict(extensions or {})
        self._clock = clock
        self._jitter = jitter
        self._current: OAuthBearerToken | None = None
        self._refresh_at = 0.0
        self._fetching: asyncio.Future[OAuthBearerToken] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failing = False
        self.fetched = 0  # tokens obtained from the provider

    def valid(self) -> OAuthBearerToken | None:
        """The cached token while it has not expired, else None."""
        current = self._current
        return current if current is not None and current.expires_at > self._clock() else None

    async def token(self, min_remaining: float = 0.0) -> OAuthBearerToken:
        """A token with time left: the cached one until its refresh point (and while it has
        ``min_remaining`` seconds left), else a new one."""
        self._loop = asyncio.get_running_loop()
        if self._fresh(min_remaining):
            assert self._current is not None
            return self._current
        while self._fetching is not None:  # another asker is fetching: share its answer
            try:
                return await asyncio.shield(self._fetching)
            except _Abandoned:
                continue  # that asker was cancelled: one of us asks again
        self._fetching = self._loop.create_future()
        try:
            token = await self._fetch()
        except asyncio.CancelledError:
            self._settle(error=_Abandoned())
            raise
        except Exception as exc:
            fallback = self.valid()
            if fallback is not None:
                self._said_failing(exc)
                self._settle(result=fallback)
                return fallback
            self._settle(error=exc)
            raise
        self._settle(result=token)
        return token

    def _fresh(self, min_remaining: float) -> bool:
        current, now = self._current, self._clock()
        return current is not None and now < self._refresh_at and current.expires_at - now >= min_remaining

    def _settle(self, *, result: OAuthBearerToken | None = None, error: BaseException | None = None) -> None:
        waiting, self._fetching = self._fetching, None
        if waiting is None or waiting.done():
            return
        if result is not None:
            waiting.set_result(result)
        elif error is not None:
            waiting.set_exception(error)
            waiting.exception()  # retrieved: nobody else may be waiting

    async def _fetch(self) -> OAuthBearerToken:
        seconds = self._timeout
        try:
            async with asyncio.timeout(seconds):
                result: Any = await self._provider()
        except TimeoutError as exc:
            if isinstance(exc, KafkaError):
                raise
            raise KafkaTimeoutError(f"the OAUTHBEARER token provider gave no token within {seconds:g} s "
                                    "(request_timeout_ms)") from exc
        except KafkaError:
            raise
        except Exception as exc:
            raise AuthenticationError(f"the OAUTHBEARER token provider failed: {exc!r}") from exc
        token = self._checked(result)
        now = self._clock()
        self._current = token
        self._refresh_at = now + (token.expires_at - now) * (REFRESH_WINDOW + self._jitter())
        self.fetched += 1
        if self._failing:
            self._failing = False
            log.info("OAUTHBEARER token provider: a token again")
        return token

    def _checked(self, result: Any) -> OAuthBearerToken:
        """The provider's answer, its fields checked before anything encodes them; no error says the
        token itself (nor chains an exception that holds it)."""
        if not isinstance(result, OAuthBearerToken):
            raise AuthenticationError("the OAUTHBEARER token provider must return an OAuthBearerToken, "
                                      f"not {type(result).__name__}")
        bad = _bad_field(result)
        if bad is not None:
            raise AuthenticationError(f"the OAUTHBEARER token provider returned an OAuthBearerToken whose {bad}")
        if not result.token:
            raise AuthenticationError("the OAUTHBEARER token provider returned an empty token")
        if result.expires_at <= self._clock():
            raise AuthenticationError("the OAUTHBEARER token provider returned a token that has already "
                                      "expired (expires_at is seconds since the epoch, as time.time())")
        if self._extensions:
            return OAuthBearerToken(result.token, result.expires_at, {**self._extensions, **result.extensions})
        return result

    def _said_failing(self, exc: Exception) -> None:
        if not self._failing:
            self._failing = True
            log.warning("OAUTHBEARER token provider failed; using the current token until it expires: %s", exc)

    def token_blocking(self, timeout: float | None) -> OAuthBearerToken:
        """From a thread other than the loop's: the cached token while valid, else one fetched on the
        loop (a blocked loop means a token fetched earlier must do)."""
        if self._fresh(0.0):
            assert self._current is not None
            return self._current
        loop = self._loop
        if loop is None or loop.is_closed():
            valid = self.valid()
            if valid is None:
                raise AuthenticationError("no OAUTHBEARER token yet for the heartbeat thread")
            return valid
        future = asyncio.run_coroutine_threadsafe(self.token(), loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            valid = self.valid()
            if valid is None:
                raise KafkaTimeoutError("no OAUTHBEARER token within the heartbeat thread's timeout") from None
            return valid
