"""SchemaRegistryClient against a scripted HTTP server (scripted_registry.py): the cache, one
request shared by concurrent lookups, retries, timeouts, typed errors, auth headers, aclose()."""

from __future__ import annotations

import asyncio
import base64
import logging
import math
import socket
import time
from collections.abc import Callable

import pytest

from aiokafka_lite.errors import ConfigError, InvalidArgumentError, KafkaTimeoutError
from aiokafka_lite.schema_registry import (
    InvalidSchemaError,
    RegisteredSchema,
    SchemaNotFoundError,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryClosedError,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
    transport,
)
from tests.unit.schema_registry.scripted_registry import Reply, SeenRequest, schema_answer, scripted_registry

pytestmark = pytest.mark.asyncio


def by_id(request: SeenRequest) -> Reply:
    if "/versions/" in request.path:
        return 200, {"subject": "s", "version": 3, "id": 30, "schema": "{}"}
    return schema_answer(int(request.path.rsplit("/", 1)[-1]))


def in_turn(*replies: Reply) -> Callable[[SeenRequest], Reply]:
    """Answers the requests with ``replies`` in order, the last one for ever after."""
    pending = list(replies)

    def answer(_request: SeenRequest) -> Reply:
        return pending.pop(0) if len(pending) > 1 else pending[0]
    return answer


def client_of(url: str, **settings: object) -> SchemaRegistryClient:
    return SchemaRegistryClient(url, retry_backoff_ms=10, retry_backoff_max_ms=50, **settings)  # type: ignore[arg-type]


async def test_a_cached_schema_needs_no_second_request() -> None:
    async with scripted_registry(by_id) as server, client_of(server.url) as client:
        first = await client.get_schema(5)
        again = await client.get_schema(5)
    assert first == again == RegisteredSchema(5, "AVRO", '{"type": "record", "name": "R5", "fields": []}')
    assert [r.path for r in server.requests] == ["/apis/ccompat/v7/schemas/ids/5"]


async def test_concurrent_lookups_of_one_id_share_one_request() -> None:
    async with scripted_registry(by_id, delay=0.2) as server, client_of(server.url) as client:
        found = await asyncio.gather(*(client.get_schema(7) for _ in range(10)))
        await client.get_schema(7)  # from the cache
        assert client.metrics() == {"requests": 1, "cached": 1}
    assert {schema.schema_id for schema in found} == {7}
    assert len(server.requests) == 1


async def test_503_twice_then_200_is_retried_and_succeeds(caplog: pytest.LogCaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transport, "WARN_AFTER_SECONDS", 0.0)  # the count alone decides here
    answer = in_turn((503, {"error_code": 50301, "message": "busy"}), (503, "busy"), schema_answer(3))
    async with scripted_registry(answer) as server, client_of(server.url) as client:
        with caplog.at_level(logging.DEBUG, "aiokafka_lite.schema_registry"):
            schema = await client.get_schema(3, timeout=5)
    assert schema.schema_id == 3
    assert len(server.requests) == 3
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings  # the second failure in a row is said once, with its count
    assert "2 failures in a row" in warnings[0]
    assert "HTTP 503" in warnings[0]


async def test_a_streak_the_call_reports_itself_within_seconds_is_not_also_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    """The call's SchemaRegistryUnavailableError says it: a log line too would be a second line
    (the CLI prints both). A streak of WARN_AFTER_SECONDS or more is said, once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}"
    async with client_of(down) as client:
        with caplog.at_level(logging.DEBUG, "aiokafka_lite.schema_registry"):
            with pytest.raises(SchemaRegistryUnavailableError):
                await client.get_schema(3, timeout=0.5)
            assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
            with pytest.raises(SchemaRegistryUnavailableError):
                await client.get_schema(3, timeout=transport.WARN_AFTER_SECONDS + 0.5)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "failures in a row over" in warnings[0]


async def test_a_single_retry_is_not_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    async with scripted_registry(in_turn((500, "oops"), schema_answer(3))) as server, client_of(server.url) as client:
        with caplog.at_level(logging.DEBUG, "aiokafka_lite.schema_registry"):
            await client.get_schema(3, timeout=5)
    assert len(server.requests) == 2
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert any("HTTP 500" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)


async def test_429_is_retried() -> None:
    async with scripted_registry(in_turn((429, "slow down"), schema_answer(4))) as server, \
            client_of(server.url) as client:
        assert (await client.get_schema(4, timeout=5)).schema_id == 4
    assert len(server.requests) == 2


async def test_a_silent_server_times_out_within_the_calls_timeout() -> None:
    async with scripted_registry(lambda _: None) as server, client_of(server.url) as client:
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=r"looking up schema id 11: no answer .* within 1 s") as caught:
            await client.get_schema(11, timeout=1.0)
        elapsed = time.monotonic() - started
        assert server.url in str(caught.value)
        with pytest.raises(KafkaTimeoutError, match="listing the subjects"):
            await client.get_subjects(timeout=0.3)
    assert 1.0 <= elapsed < 1.5


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_a_closed_port_is_unavailable_within_the_timeout(closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}/apis/ccompat/v7"
    async with client_of(url) as client:
        started = time.monotonic()
        with pytest.raises(SchemaRegistryUnavailableError) as caught:
            await client.get_schema(1, timeout=1.0)
        elapsed = time.monotonic() - started
    message = str(caught.value)
    for part in (url, "looking up schema id 1", "ConnectError", "attempts"):
        assert part in message
    assert elapsed < 1.5


async def test_unknown_id_is_not_found_and_not_retried() -> None:
    answer = in_turn((404, {"error_code": 40403, "message": "Schema 99 not found."}))
    async with scripted_registry(answer) as server, client_of(server.url) as client:
        with pytest.raises(SchemaNotFoundError) as caught:
            await client.get_schema(99, timeout=5)
    assert "schema id 99" in str(caught.value)
    assert server.url in str(caught.value)
    assert (caught.value.status, caught.value.error_code) == (404, 40403)
    assert len(server.requests) == 1


@pytest.mark.parametrize(("code", "meaning"), [(40401, "subject not found"), (40402, "version not found")])
async def test_unknown_subject_or_version_is_not_found(code: int, meaning: str) -> None:
    async with scripted_registry(in_turn((404, {"error_code": code, "message": "no"}))) as server, \
            client_of(server.url) as client:
        with pytest.raises(SchemaNotFoundError, match=f"version 3 of subject 'orders-value': {meaning}"):
            await client.get_version("orders-value", 3)


async def test_a_404_without_a_confluent_code_suggests_the_base_url() -> None:
    async with scripted_registry(in_turn((404, "<html>no</html>"))) as server, client_of(server.url) as client:
        with pytest.raises(SchemaRegistryError, match="Confluent-compatible API's base") as caught:
            await client.get_schema(1)
    assert not isinstance(caught.value, SchemaNotFoundError)


async def test_other_4xx_carries_the_registrys_message_and_is_not_retried() -> None:
    answer = in_turn((422, {"error_code": 42201, "message": "Invalid schema"}))
    async with scripted_registry(answer) as server, client_of(server.url) as client:
        with pytest.raises(SchemaRegistryError, match="HTTP 422 error_code 42201: Invalid schema") as caught:
            await client.register("s", "not avro")
    assert type(caught.value) is SchemaRegistryError
    assert len(server.requests) == 1


@pytest.mark.parametrize("reply", [
    (200, "{not json"), (200, ["a list"]), (200, {"schemaType": "AVRO"}),
    (200, {"schema": "x", "schemaType": "XML"}), (200, {"schema": "x", "references": 3}),
])
async def test_a_malformed_answer_is_invalid_schema(reply: Reply) -> None:
    async with scripted_registry(in_turn(reply)) as server, client_of(server.url) as client:
        with pytest.raises(InvalidSchemaError, match=r"looking up schema id 2: .* answered"):
            await client.get_schema(2)
        with pytest.raises(InvalidSchemaError):  # a failed lookup is not cached: asked again
            await client.get_schema(2)
    assert len(server.requests) == 2


async def test_a_failed_lookup_is_not_cached() -> None:
    answer = in_turn((404, {"error_code": 40403, "message": "not yet"}), schema_answer(8))
    async with scripted_registry(answer) as server, client_of(server.url) as client:
        with pytest.raises(SchemaNotFoundError):
            await client.get_schema(8)
        assert (await client.get_schema(8)).schema_id == 8
    assert len(server.requests) == 2


async def test_basic_auth_header_is_sent() -> None:
    async with scripted_registry(by_id) as server, client_of(server.url, basic_auth=("user", "pa:ss")) as client:
        await client.get_schema(1)
    assert server.requests[0].headers["authorization"] == "Basic " + base64.b64encode(b"user:pa:ss").decode()


async def test_bearer_tokens_are_sent_from_a_string_or_a_callable() -> None:
    tokens = iter(["t1", "t2"])

    async def next_token() -> str:
        return next(tokens)

    async with scripted_registry(by_id) as server:
        async with client_of(server.url, bearer_token="fixed") as client:
            await client.get_schema(1)
        async with client_of(server.url, bearer_token=next_token) as client:
            await client.get_schema(1)
            await client.get_schema(2)
        async with client_of(server.url, bearer_token=lambda: "plain") as client:
            await client.get_schema(1)
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer fixed", "Bearer t1", "Bearer t2", "Bearer plain"]


async def test_cancelling_one_waiter_leaves_the_others_result() -> None:
    async with scripted_registry(by_id, delay=0.3) as server, client_of(server.url) as client:
        first = asyncio.create_task(client.get_schema(6))
        second = asyncio.create_task(client.get_schema(6))
        await asyncio.sleep(0.1)
        first.cancel()
        assert (await second).schema_id == 6
        assert first.cancelled()
    assert len(server.requests) == 1


async def test_a_waiter_that_times_out_leaves_the_shared_request_to_the_patient_one() -> None:
    async with scripted_registry(by_id, delay=0.5) as server, client_of(server.url) as client:
        hasty = asyncio.create_task(client.get_schema(6, timeout=0.1))
        patient = asyncio.create_task(client.get_schema(6, timeout=5))
        with pytest.raises(KafkaTimeoutError):
            await hasty
        assert (await patient).schema_id == 6
    assert len(server.requests) == 1


async def test_aclose_ends_the_requests_in_flight_and_leaves_no_task() -> None:
    async with scripted_registry(lambda _: None) as server:
        client = client_of(server.url)
        shared = asyncio.create_task(client.get_schema(1, timeout=30))
        listing = asyncio.create_task(client.get_subjects(timeout=30))
        await server.wait_for_requests(2)
        await client.aclose()
        for waiter in (shared, listing):
            with pytest.raises(SchemaRegistryClosedError, match="closed"):
                await waiter
        # Only the scripted server's connection handlers remain (closed with the server).
        assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()
                and "ScriptedRegistry._serve" not in repr(t.get_coro())] == []
        with pytest.raises(SchemaRegistryClosedError):
            await client.get_schema(1)
        await client.aclose()  # idempotent


async def test_the_cache_is_bounded() -> None:
    async with scripted_registry(by_id) as server, client_of(server.url, cache_capacity=2) as client:
        for schema_id in (1, 2, 3):
            await client.get_schema(schema_id)
        await client.get_schema(3)
        await client.get_schema(2)
        assert len(server.requests) == 3  # 2 and 3 still cached
        await client.get_schema(1)  # the oldest, dropped when 3 came
    assert [r.path.rsplit("/", 1)[-1] for r in server.requests] == ["1", "2", "3", "1"]


async def test_subjects_versions_and_register() -> None:
    def answer(request: SeenRequest) -> Reply:
        return {
            ("GET", "/apis/ccompat/v7/subjects"): (200, ["a/b", "c"]),
            ("GET", "/apis/ccompat/v7/subjects/a%2Fb/versions"): (200, [1, 2]),
            ("GET", "/apis/ccompat/v7/subjects/a%2Fb/versions/latest"): (
                200, {"subject": "a/b", "version": 2, "id": 12, "schema": "syntax = 'proto3';",
                      "schemaType": "PROTOBUF", "references": [{"name": "x.proto", "subject": "x", "version": 1}]}),
            ("POST", "/apis/ccompat/v7/subjects/a%2Fb/versions"): (200, {"id": 12}),
        }.get((request.method, request.path), (404, {"error_code": 40401, "message": "unexpected"}))

    async with scripted_registry(answer) as server, client_of(server.url) as client:
        assert await client.get_subjects() == ["a/b", "c"]
        assert await client.get_versions("a/b") == [1, 2]
        latest = await client.get_version("a/b", "latest")
        assert latest == RegisteredSchema(12, "PROTOBUF", "syntax = 'proto3';", [SchemaReference("x.proto", "x", 1)],
                                          subject="a/b", version=2)
        assert await client.register("a/b", "syntax = 'proto3';", "PROTOBUF", [("x.proto", "x", 1)]) == 12
        by_id_now = await client.get_schema(12)  # remembered from get_version: no request
    assert (by_id_now.subject, by_id_now.schema_type) == (None, "PROTOBUF")
    assert len(server.requests) == 4
    posted = server.requests[-1]
    assert posted.headers["content-type"] == "application/vnd.schemaregistry.v1+json"
    assert posted.body == (b'{"schema":"syntax = \'proto3\';","schemaType":"PROTOBUF",'
                           b'"references":[{"name":"x.proto","subject":"x","version":1}]}')


@pytest.mark.parametrize(("url", "settings", "message"), [
    ("ftp://h/x", {}, "http:// or https://"),
    ("http:///x", {}, "http:// or https://"),
    ("http://h:99999/x", {}, "(?i)port"),
    ("http://h/x?a=1", {}, "no query"),
    ("http://h", {"request_timeout_ms": 0}, "request_timeout_ms=0: must be an int >= 1"),
    ("http://h", {"retry_backoff_ms": -1}, "retry_backoff_ms=-1"),
    ("http://h", {"retry_backoff_ms": 500, "retry_backoff_max_ms": 100}, "less than retry_backoff_ms"),
    ("http://h", {"cache_capacity": -1}, "cache_capacity=-1"),
    ("http://h", {"basic_auth": ("u", "p"), "bearer_token": "t"}, "both given"),
    ("http://h", {"basic_auth": ("u",)}, "basic_auth must be"),
    ("http://h", {"bearer_token": ""}, "bearer_token must be"),
])
async def test_bad_settings_are_config_errors(url: str, settings: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SchemaRegistryClient(url, **settings)  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [-1.0, float("nan")])
async def test_a_bad_timeout_is_refused_before_any_request(timeout: float) -> None:
    async with scripted_registry(by_id) as server, client_of(server.url) as client:
        with pytest.raises(InvalidArgumentError, match="timeout"):
            await client.get_schema(1, timeout=timeout)
        with pytest.raises(InvalidArgumentError, match="schema_id"):
            await client.get_schema(-1)
        with pytest.raises(InvalidArgumentError, match="version"):
            await client.get_version("s", 0)
    assert server.requests == []



async def test_a_shared_failure_reaches_every_waiter_from_one_request() -> None:
    answer = in_turn((404, {"error_code": 40403, "message": "Schema 4 not found."}))
    async with scripted_registry(answer, delay=0.2) as server, client_of(server.url) as client:
        outcomes = await asyncio.gather(*(client.get_schema(4) for _ in range(5)), return_exceptions=True)
    assert all(isinstance(outcome, SchemaNotFoundError) for outcome in outcomes), outcomes
    assert len(server.requests) == 1


async def test_a_failure_no_caller_waits_for_any_more_is_not_left_unretrieved() -> None:
    # The caller gives up; the shared request then fails. asyncio must not report "exception was
    # never retrieved" (tests/conftest.py fails the test if it does).
    answer = in_turn((404, {"error_code": 40403, "message": "gone"}))
    async with scripted_registry(answer, delay=0.3) as server, client_of(server.url) as client:
        with pytest.raises(KafkaTimeoutError):
            await client.get_schema(4, timeout=0.05)
        await server.wait_for_requests(1)
        await asyncio.sleep(0.5)  # the answer arrives and the shared request fails, unwatched
        with pytest.raises(SchemaNotFoundError):  # and the failure was not cached
            await client.get_schema(4)
    assert len(server.requests) == 2


@pytest.mark.parametrize("unbounded", [None, math.inf])
async def test_none_or_an_infinite_timeout_is_no_bound(unbounded: float | None) -> None:
    """As the consumers' calls: omitted, a call is bounded by request_timeout_ms (0.3 s here, less
    than twelve busy answers and their backoffs); None (or inf) waits as long as the retries take."""
    busy = (503, {"error_code": 50301, "message": "busy"})
    async with scripted_registry(in_turn(*[busy] * 12, schema_answer(1))) as server, \
            client_of(server.url, request_timeout_ms=300) as client:
        with pytest.raises(SchemaRegistryUnavailableError):
            await client.get_schema(1)
    async with scripted_registry(in_turn(*[busy] * 12, schema_answer(1))) as server, \
            client_of(server.url, request_timeout_ms=300) as client:
        assert (await client.get_schema(1, timeout=unbounded)).schema_id == 1
        assert len(server.requests) == 13


async def test_time_running_out_after_failures_is_unavailable_not_a_timeout() -> None:
    # A 503, then no answer to the retry: the deadline falls during an attempt, after a failure.
    failed_once: set[str] = set()

    def answer(request: SeenRequest) -> Reply:
        if request.path in failed_once:
            return None
        failed_once.add(request.path)
        return 503, {"error_code": 50301, "message": "busy"}

    async with scripted_registry(answer) as server, client_of(server.url) as client:
        started = time.monotonic()
        with pytest.raises(SchemaRegistryUnavailableError, match=r"after 2 attempts; last: HTTP 503 \(busy\)"):
            await client.get_schema(2, timeout=1.0)
        with pytest.raises(SchemaRegistryUnavailableError, match="listing the subjects"):
            await client.get_subjects(timeout=1.0)
    assert time.monotonic() - started < 2.5
