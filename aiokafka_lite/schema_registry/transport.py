"""The registry's HTTP side: one request with retries, and every failure turned into a typed error.

``RegistryTransport`` sends a request on an ``httpx.AsyncClient`` and retries connection errors,
request timeouts, 429 and 5xx with capped exponential back-off for as long as the caller's deadline
allows another try; a 4xx is never retried. What the answer means is ``answers.py``'s business.
A failure that repeats is said once at WARNING with its count; a single retry only at DEBUG.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiokafka_lite._net.backoff import Backoff
from aiokafka_lite.schema_registry.answers import Answer
from aiokafka_lite.schema_registry.errors import (
    InvalidSchemaError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
)

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("aiokafka_lite.schema_registry")

BearerToken = str | Callable[[], Awaitable[str] | str]
# Confluent's codes for a 404: which thing was missing.
NOT_FOUND_CODES = {40401: "subject not found", 40402: "version not found", 40403: "schema not found"}
_RETRIABLE_STATUSES = frozenset({408, 429})
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
# A failure seen this many times in a row (over calls), for this long, is logged at WARNING, once per
# streak. A shorter streak is a call's own error to tell (said again in a log, it is a second line).
WARN_AFTER_FAILURES = 2
WARN_AFTER_SECONDS = 2.0


def import_httpx() -> Any:
    """httpx, imported only when a client is made, so the package imports without the extra."""
    try:
        import httpx
    except ImportError as exc:
        raise ImportError("the schema registry client needs httpx, the extra aiokafka-lite[schema-registry]: "
                          "pip install '.[schema-registry]' in the aiokafka-lite clone") from exc
    return httpx


class _Retriable(Exception):
    """One attempt failed in a way another attempt may not (connection, timeout, 429, 5xx)."""


class Attempts:
    """How one request's tries went so far: read by a caller whose time ran out, to tell a
    registry that kept failing (unavailable) from one that was merely slow to answer (timeout)."""

    def __init__(self) -> None:
        self.count = 0
        self.last_failure: str | None = None
        self.last_cause: BaseException | None = None

    def unavailable(self, what: str, url: str) -> SchemaRegistryUnavailableError:
        return SchemaRegistryUnavailableError(
            f"{what}: schema registry {url} unavailable after {self.count} attempt{'s' if self.count != 1 else ''}; "
            f"last: {self.last_failure}", url=url)


class RegistryTransport:
    """Requests to one registry (``url``, the Confluent-compatible base) through ``http``."""

    def __init__(self, http: httpx.AsyncClient, url: str, *, bearer_token: BearerToken | None,
                 backoff: float, backoff_max: float) -> None:
        self._http, self.url, self._bearer_token = http, url, bearer_token
        self._backoff, self._backoff_max = backoff, backoff_max
        self._streak = 0  # retriable failures in a row, across calls
        self._streak_began = 0.0  # loop time of the streak's first failure
        self._warned = False
        self.requests_sent = 0  # HTTP requests, retries included (the client's metrics())

    async def request(self, method: str, path: str, what: str, deadline: Callable[[], float], attempts: Attempts,
                      body: dict[str, Any] | None = None) -> Answer:
        """The decoded JSON answer of a 2xx; ``deadline()`` (loop time) says whether to retry again."""
        loop = asyncio.get_running_loop()
        backoff = Backoff(self._backoff, self._backoff_max)  # the consumer's retry_backoff_ms rules
        while True:
            attempts.count += 1
            try:
                answer = await self._attempt(method, path, what, body)
            except _Retriable as failure:
                attempts.last_failure, attempts.last_cause = str(failure), failure.__cause__
                backoff.failed(loop.time())
                pause = backoff.delay()
                self._failed(what, failure, attempts.count)
                if loop.time() + pause >= deadline():
                    raise attempts.unavailable(what, self.url) from failure.__cause__
                await asyncio.sleep(pause)
                continue
            self._reached()
            return answer

    async def _attempt(self, method: str, path: str, what: str, body: dict[str, Any] | None) -> Answer:
        httpx = import_httpx()
        headers = {"Content-Type": _CONTENT_TYPE} if body is not None else {}
        if self._bearer_token is not None:
            headers["Authorization"] = f"Bearer {await self._token(what)}"
        self.requests_sent += 1
        try:
            response = await self._http.request(method, path, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise _Retriable(f"no answer within the request timeout ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise _Retriable(f"{type(exc).__name__}: {exc or 'connection failed'}") from exc
        return self._meaning(response, what)

    def _meaning(self, response: httpx.Response, what: str) -> Answer:
        status = response.status_code
        if status in _RETRIABLE_STATUSES or status >= 500:
            raise _Retriable(f"HTTP {status}{_message_part(response)}")
        if 200 <= status < 300:
            try:
                return Answer(response.json(), what, self.url)
            except ValueError as exc:
                raise InvalidSchemaError(f"{what}: {self.url} answered HTTP {status} with a body that is not "
                                         f"JSON: {response.text[:200]!r}", url=self.url, status=status) from exc
        code, message = _error_fields(response)
        if status == 404 and code in NOT_FOUND_CODES:
            raise SchemaNotFoundError(f"{what}: {NOT_FOUND_CODES[code]} in the schema registry {self.url} "
                                      f"({message})", url=self.url, status=status, error_code=code)
        hint = " (no Confluent error code: is the URL the Confluent-compatible API's base?)" if status == 404 else ""
        raise SchemaRegistryError(f"{what}: schema registry {self.url} refused with HTTP {status}"
                                  f"{f' error_code {code}' if code is not None else ''}: {message}{hint}",
                                  url=self.url, status=status, error_code=code)

    async def _token(self, what: str) -> str:
        token = self._bearer_token
        if isinstance(token, str):
            return token
        assert token is not None
        try:
            produced = token()
            value = await produced if inspect.isawaitable(produced) else produced
        except Exception as exc:  # the application's callable: its failure, named
            raise SchemaRegistryError(f"{what}: the bearer_token callable raised {exc!r}", url=self.url) from exc
        if not isinstance(value, str) or not value:
            raise SchemaRegistryError(f"{what}: the bearer_token callable returned {value!r}, not a token string",
                                      url=self.url)
        return value

    def _failed(self, what: str, failure: _Retriable, attempts: int) -> None:
        now = asyncio.get_running_loop().time()
        self._streak += 1
        if self._streak == 1:
            self._streak_began = now
        if (self._streak >= WARN_AFTER_FAILURES and now - self._streak_began >= WARN_AFTER_SECONDS
                and not self._warned):
            self._warned = True
            log.warning("schema registry %s: %s (%s); %d failures in a row over %.1f s, retrying while the "
                        "call's time lasts", self.url, failure, what, self._streak, now - self._streak_began)
        else:
            log.debug("schema registry %s: %s (%s), attempt %d; %d failures in a row",
                      self.url, failure, what, attempts, self._streak)

    def _reached(self) -> None:
        if self._warned:
            log.info("schema registry %s answers again after %d failures", self.url, self._streak)
        self._streak, self._warned = 0, False


def _error_fields(response: httpx.Response) -> tuple[int | None, str]:
    """Confluent's ``{"error_code": ..., "message": ...}``, or the body's start when it is not that."""
    try:
        body = response.json()
    except ValueError:
        return None, response.text[:200] or response.reason_phrase
    if not isinstance(body, dict):
        return None, repr(body)[:200]
    code = body.get("error_code")
    message = body.get("message")
    return (code if isinstance(code, int) and not isinstance(code, bool) else None,
            message if isinstance(message, str) else repr(body)[:200])


def _message_part(response: httpx.Response) -> str:
    _code, message = _error_fields(response)
    return f" ({message})" if message else ""
