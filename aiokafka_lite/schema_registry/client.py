"""``SchemaRegistryClient``: an asyncio client of a Confluent-compatible schema registry's REST API.

Schemas are cached by id (a bounded LRU; a failed lookup is not cached), and concurrent lookups of
one id share one request: the first caller starts it as a task the client owns, later callers wait
for the same task, and a caller that is cancelled or times out leaves it running for the others.
Every request runs in such an owned task, so ``aclose()`` ends them all and each waiting caller
gets ``SchemaRegistryClosedError``. Retries and error mapping are in ``transport.py``, the answers'
shapes in ``answers.py``.

Timeouts, as the consumers' (KIP-266): each method's ``timeout`` bounds the whole call, retries
included; omitted it is ``request_timeout_ms``, None (or ``math.inf``) is no bound, NaN or a negative
number is ``InvalidArgumentError``. ``request_timeout_ms`` also bounds each HTTP request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import ssl
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Literal, Self, TypeVar
from urllib.parse import quote, urlsplit

from aiokafka_lite.errors import ConfigError, InvalidArgumentError, KafkaTimeoutError
from aiokafka_lite.liveness.deadlines import DEFAULT, Timeout
from aiokafka_lite.schema_registry.answers import (
    SCHEMA_TYPES,
    Answer,
    RegisteredSchema,
    SchemaReference,
    SchemaType,
    reference_json,
    registered_id,
    schema_by_id,
    schema_version,
)
from aiokafka_lite.schema_registry.errors import SchemaRegistryClosedError
from aiokafka_lite.schema_registry.transport import Attempts, RegistryTransport, import_httpx

T = TypeVar("T")
_ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"


class SchemaRegistryClient:
    """A client of the registry at ``url``, the Confluent-compatible API's base (Apicurio's is
    ``http://host:port/apis/ccompat/v7``). Use ``async with`` or call ``aclose()``."""

    def __init__(self, url: str, *, basic_auth: tuple[str, str] | None = None,
                 bearer_token: str | Callable[[], Awaitable[str] | str] | None = None,
                 ssl_context: ssl.SSLContext | None = None, request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 1000, cache_capacity: int = 1000) -> None:
        self.url = _checked_url(url, ssl_context)
        _check_int("request_timeout_ms", request_timeout_ms, 1)
        _check_int("retry_backoff_ms", retry_backoff_ms, 0)
        _check_int("retry_backoff_max_ms", retry_backoff_max_ms, 0)
        _check_int("cache_capacity", cache_capacity, 0)
        if retry_backoff_max_ms < retry_backoff_ms:
            raise ConfigError(f"retry_backoff_max_ms={retry_backoff_max_ms} is less than retry_backoff_ms="
                              f"{retry_backoff_ms}")
        _check_auth(basic_auth, bearer_token)
        httpx = import_httpx()
        self._http = httpx.AsyncClient(
            base_url=self.url + "/", timeout=request_timeout_ms / 1000, follow_redirects=False,
            verify=ssl_context if ssl_context is not None else True, headers={"Accept": _ACCEPT},
            auth=httpx.BasicAuth(*basic_auth) if basic_auth is not None else None)
        self._transport = RegistryTransport(self._http, self.url, bearer_token=bearer_token,
                                            backoff=retry_backoff_ms / 1000, backoff_max=retry_backoff_max_ms / 1000)
        self._default_timeout = request_timeout_ms / 1000
        self._cache: OrderedDict[int, RegisteredSchema] = OrderedDict()
        self._cache_capacity = cache_capacity
        self._lookups: dict[int, _Lookup] = {}  # schema id -> the one request in flight for it
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    # -- the API -----------------------------------------------------------------------------

    async def get_schema(self, schema_id: int, *, timeout: Timeout = DEFAULT) -> RegisteredSchema:
        """The schema registered under ``schema_id`` (from the cache when it was seen before)."""
        if isinstance(schema_id, bool) or not isinstance(schema_id, int) or schema_id < 0:
            raise InvalidArgumentError(f"schema_id must be a non-negative int, not {schema_id!r}")
        what = f"looking up schema id {schema_id}"
        seconds = self.time_limit(timeout)
        self._check_open(what)
        cached = self._cache.get(schema_id)
        if cached is not None:
            self._cache.move_to_end(schema_id)
            return cached
        deadline = asyncio.get_running_loop().time() + seconds
        lookup = self._lookups.get(schema_id)
        if lookup is None or lookup.task.done():  # done: a failure whose callbacks have not run yet
            lookup = _Lookup(deadline)
            lookup.task = self._spawn(what, self._fetch_schema(schema_id, what, lookup))
            self._lookups[schema_id] = lookup
            lookup.task.add_done_callback(functools.partial(self._lookup_done, schema_id, lookup))
        else:  # the shared request retries for as long as its most patient caller waits
            lookup.deadline = max(lookup.deadline, deadline)
        async with self._bounded(what, seconds, lookup.attempts):
            return await asyncio.shield(lookup.task)  # leaving, a caller leaves the request to the others

    async def get_subjects(self, *, timeout: Timeout = DEFAULT) -> list[str]:
        """Every subject the registry has."""
        answer = await self._call("GET", "subjects", "listing the subjects", timeout)
        return answer.strings()

    async def get_versions(self, subject: str, *, timeout: Timeout = DEFAULT) -> list[int]:
        """The version numbers registered under ``subject``."""
        answer = await self._call("GET", f"subjects/{_subject_path(subject)}/versions",
                                  f"listing the versions of subject {subject!r}", timeout)
        return answer.integers()

    async def get_version(self, subject: str, version: int | Literal["latest"], *,
                          timeout: Timeout = DEFAULT) -> RegisteredSchema:
        """The schema registered under ``subject`` as ``version`` (a number, or "latest")."""
        if version != "latest" and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
            raise InvalidArgumentError(f"version must be an int >= 1 or 'latest', not {version!r}")
        answer = await self._call("GET", f"subjects/{_subject_path(subject)}/versions/{version}",
                                  f"looking up version {version} of subject {subject!r}", timeout)
        found = schema_version(answer)
        self._remember(dataclasses.replace(found, subject=None, version=None))
        return found

    async def register(self, subject: str, schema: str, schema_type: SchemaType = "AVRO",
                       references: Iterable[SchemaReference | tuple[str, str, int]] = (), *,
                       timeout: Timeout = DEFAULT) -> int:
        """Register ``schema`` under ``subject``; its id (the existing one when it is registered
        already). For tests and tools: an application's consumer only reads."""
        if schema_type not in SCHEMA_TYPES:
            raise InvalidArgumentError(f"schema_type must be one of {', '.join(SCHEMA_TYPES)}, not {schema_type!r}")
        if not isinstance(schema, str) or not schema:
            raise InvalidArgumentError(f"schema must be a non-empty str, not {schema!r}")
        body: dict[str, Any] = {"schema": schema, "schemaType": schema_type,
                                "references": [reference_json(reference) for reference in references]}
        answer = await self._call("POST", f"subjects/{_subject_path(subject)}/versions",
                                  f"registering a {schema_type} schema under subject {subject!r}", timeout, body)
        return registered_id(answer)

    def metrics(self) -> dict[str, int]:
        """``requests``: HTTP requests sent so far, retries included (a schema id seen before is
        answered from the cache: none); ``cached``: schemas in the cache now."""
        return {"requests": self._transport.requests_sent, "cached": len(self._cache)}

    async def aclose(self) -> None:
        """End every request in flight (their callers get ``SchemaRegistryClosedError``) and close
        the connections. Idempotent."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        try:
            if tasks:
                await asyncio.wait(tasks)
        finally:  # cancelled while waiting for them: the connections are still closed
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    # -- internals ---------------------------------------------------------------------------

    async def _call(self, method: str, path: str, what: str, timeout: Timeout,
                    body: dict[str, Any] | None = None) -> Answer:
        seconds = self.time_limit(timeout)
        self._check_open(what)
        deadline = asyncio.get_running_loop().time() + seconds
        attempts = Attempts()
        task = self._spawn(what, self._transport.request(method, path, what, lambda: deadline, attempts, body))
        async with self._bounded(what, seconds, attempts):
            return await task  # a caller cancelled (or out of time) cancels its own request

    async def _fetch_schema(self, schema_id: int, what: str, lookup: _Lookup) -> RegisteredSchema:
        answer = await self._transport.request("GET", f"schemas/ids/{schema_id}", what, lambda: lookup.deadline,
                                               lookup.attempts)
        schema = schema_by_id(answer, schema_id)
        self._remember(schema)
        return schema

    def _lookup_done(self, schema_id: int, lookup: _Lookup, _task: asyncio.Task[RegisteredSchema]) -> None:
        if self._lookups.get(schema_id) is lookup:  # not a newer lookup of the same id
            del self._lookups[schema_id]

    def _spawn(self, what: str, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(self._owned(what, work))
        self._tasks.add(task)
        task.add_done_callback(_forget(self._tasks))
        return task

    async def _owned(self, what: str, work: Coroutine[Any, Any, T]) -> T:
        try:
            return await work
        except asyncio.CancelledError:
            if self._closed:  # our own aclose(): its waiters hear that, not a cancellation of theirs
                raise SchemaRegistryClosedError(f"{what}: the schema registry client was closed",
                                                url=self.url) from None
            raise

    def _remember(self, schema: RegisteredSchema) -> None:
        if self._cache_capacity == 0:
            return
        self._cache[schema.schema_id] = schema
        self._cache.move_to_end(schema.schema_id)
        while len(self._cache) > self._cache_capacity:
            self._cache.popitem(last=False)

    def time_limit(self, timeout: Timeout) -> float:
        """A call's bound in seconds under this client's rules: omitted, request_timeout_ms; None,
        no bound (inf); NaN or negative, InvalidArgumentError. For callers that share one limit
        among several calls."""
        if timeout is DEFAULT:
            return self._default_timeout
        if timeout is None:
            return math.inf
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or math.isnan(timeout) or timeout < 0:
            raise InvalidArgumentError(f"timeout must be a non-negative number of seconds or None, not {timeout!r}")
        return float(timeout)

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise SchemaRegistryClosedError(f"{what}: the schema registry client is closed", url=self.url)

    @asynccontextmanager
    async def _bounded(self, what: str, seconds: float, attempts: Attempts) -> AsyncIterator[None]:
        """The call's time limit. Lapsed after failed tries (the last one still under way), the
        registry is unavailable, as when the retries stop for lack of time; else it is a timeout."""
        scope = asyncio.timeout(None if math.isinf(seconds) else seconds)
        try:
            async with scope:
                yield
        except TimeoutError as exc:
            if not scope.expired():
                raise
            if attempts.last_failure is not None:
                raise attempts.unavailable(what, self.url) from attempts.last_cause
            raise KafkaTimeoutError(f"{what}: no answer from the schema registry {self.url} within "
                                    f"{seconds:g} s") from exc


class _Lookup:
    """One schema id's request in flight, and how long it may go on retrying (loop time)."""

    task: asyncio.Task[RegisteredSchema]

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.attempts = Attempts()


def _forget(tasks: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
    def done(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a failure every caller left is not "never retrieved"
    return done


def _subject_path(subject: str) -> str:
    if not isinstance(subject, str) or not subject:
        raise InvalidArgumentError(f"subject must be a non-empty str, not {subject!r}")
    return quote(subject, safe="")


def _checked_url(url: str, ssl_context: ssl.SSLContext | None) -> str:
    if not isinstance(url, str):
        raise ConfigError(f"url must be a str such as 'http://127.0.0.1:8080/apis/ccompat/v7', not {url!r}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"url {url!r}: a schema registry's URL is http:// or https:// with a host")
    if parts.query or parts.fragment:
        raise ConfigError(f"url {url!r}: the registry's base URL takes no query or fragment")
    if ssl_context is not None and parts.scheme != "https":
        raise ConfigError(f"ssl_context given but url {url!r} is not https://")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise ConfigError(f"url {url!r}: {exc}") from None
    return url.rstrip("/")


def _check_int(name: str, value: int, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{name}={value!r}: must be an int >= {least}")


def _check_auth(basic_auth: tuple[str, str] | None, bearer_token: object) -> None:
    if basic_auth is not None and bearer_token is not None:
        raise ConfigError("basic_auth and bearer_token are both given: a registry takes one or the other")
    if basic_auth is not None and (not isinstance(basic_auth, tuple) or len(basic_auth) != 2
                                   or not all(isinstance(part, str) for part in basic_auth)):
        raise ConfigError("basic_auth must be a (user, password) tuple of two str")
    if bearer_token is not None and not ((isinstance(bearer_token, str) and bearer_token) or callable(bearer_token)):
        raise ConfigError(f"bearer_token must be a non-empty str or a callable returning one, not {bearer_token!r}")
