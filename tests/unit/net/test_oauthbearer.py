"""SASL/OAUTHBEARER without a broker: the client message, the token cache, the client-credentials flow
against the loopback identity provider of aiokafka_lite.testing.oauth, and the settings."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from aiokafka_lite import Consumer, OAuthBearerToken
from aiokafka_lite._net.oauth import OAuthTokens
from aiokafka_lite._net.oidc import ClientCredentials
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite._net.sasl import OAuthBearer, next_request, sasl_exchange, session_lifetime, token_subject
from aiokafka_lite.config import ConsumerConfig
from aiokafka_lite.errors import AuthenticationError, ConfigError, KafkaConnectionError, KafkaTimeoutError
from aiokafka_lite.protocol.messages import SASL_AUTHENTICATE, SASL_HANDSHAKE
from aiokafka_lite.testing._process import free_port
from aiokafka_lite.testing.oauth import OAuthServer, unsecured_jws

SECRET = "s3cret-Zq8#unique"


# ---------------------------------------------------------------- the SASL message (RFC 7628, KIP-342)

def test_the_initial_response_carries_the_token_and_extensions() -> None:
    mechanism = OAuthBearer(OAuthBearerToken("abc.def.", 2e9, {"traceId": "t42", "logicalCluster": "lkc-1"}))
    assert mechanism.initial_response() == b"n,,\x01auth=Bearer abc.def.\x01traceId=t42\x01logicalCluster=lkc-1\x01\x01"
    assert mechanism.evaluate(b"") is None  # the broker's empty answer: signed in


@pytest.mark.parametrize("extensions", [{"auth": "x"}, {"trace-id": "x"}, {"ok": "\x00"}, {"ok": ""}])
def test_extensions_outside_rfc_7628_are_refused(extensions: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        OAuthBearer(OAuthBearerToken("t", 2e9, extensions))


def test_a_refused_token_is_acknowledged_and_the_error_names_the_broker_s_reason() -> None:
    options = ConnectionOptions(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                                sasl_oauth_token_provider=_provider(OAuthBearerToken("t", 2e9)))
    token = OAuthBearerToken(unsecured_jws("mallory", 60), 2e9)
    exchange = sasl_exchange(options, lambda api: {SASL_HANDSHAKE.key: 1}.get(api.key, 2), "broker b:1", token)
    handshake = next_request(exchange)
    assert handshake is not None
    assert handshake[0] is SASL_HANDSHAKE
    auth = next_request(exchange, {"error_code": 0, "mechanisms": ["OAUTHBEARER"]})
    assert auth is not None
    assert auth[0] is SASL_AUTHENTICATE
    challenge = b'{"status":"invalid_token"}'
    ack = next_request(exchange, {"error_code": 0, "error_message": None, "auth_bytes": challenge,
                                  "session_lifetime_ms": 0})
    assert ack is not None
    assert ack[2] == {"auth_bytes": b"\x01"}
    with pytest.raises(AuthenticationError) as caught:
        next_request(exchange, {"error_code": 58, "error_message": "Authentication failed", "auth_bytes": b"",
                                "session_lifetime_ms": 0})
    assert str(caught.value) == (
        "SASL OAUTHBEARER as 'mallory' with broker b:1 failed: SASL_AUTHENTICATION_FAILED (58): Authentication "
        "failed (the broker's challenge: {\"status\":\"invalid_token\"}): the broker refused the token (its log "
        "says why: expired, audience, signature...)")


def test_session_lifetime_and_token_subject() -> None:
    assert session_lifetime({"session_lifetime_ms": 8000}) == 8.0
    assert session_lifetime({"session_lifetime_ms": 0}) is None
    assert session_lifetime(None) is None
    assert token_subject(unsecured_jws("alice", 60)) == "alice"
    assert token_subject("opaque") is None


def test_the_token_is_kept_out_of_repr() -> None:
    assert "abc" not in repr(OAuthBearerToken("abc", 2e9))


# ---------------------------------------------------------------- the token cache

def _provider(*tokens: OAuthBearerToken | BaseException, calls: list[int] | None = None) -> Any:
    queue = list(tokens)

    async def provide() -> OAuthBearerToken:
        if calls is not None:
            calls.append(1)
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(item, BaseException):
            raise item
        return item
    return provide


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.asyncio
async def test_the_cached_token_is_replaced_at_80_percent_of_its_lifetime() -> None:
    clock, calls = Clock(), []
    first, second = OAuthBearerToken("one", 1100.0), OAuthBearerToken("two", 1300.0)
    tokens = OAuthTokens(_provider(first, second, calls=calls), timeout=1.0, clock=clock, jitter=lambda: 0.0)
    assert await tokens.token() is first
    clock.now = 1079.0
    assert await tokens.token() is first
    assert await tokens.token(min_remaining=30) is second, "too little left for a session: a new one"
    clock.now = 1255.0  # fetched at 1079 with 221 s to live: refreshed from 1079 + 0.8 * 221
    assert await tokens.token() is second
    clock.now = 1256.0
    assert (await tokens.token()).token == "two"  # the provider's last answer, asked again
    assert len(calls) == 3


@pytest.mark.asyncio
async def test_concurrent_askers_share_one_provider_call() -> None:
    calls: list[int] = []
    release = asyncio.Event()

    async def slow() -> OAuthBearerToken:
        calls.append(1)
        await release.wait()
        return OAuthBearerToken("t", 2e9)

    tokens = OAuthTokens(slow, timeout=5.0)
    waiting = [asyncio.create_task(tokens.token()) for _ in range(5)]
    await asyncio.sleep(0.01)
    release.set()
    assert {t.token for t in await asyncio.gather(*waiting)} == {"t"}
    assert calls == [1]


@pytest.mark.asyncio
async def test_an_asker_cancelled_while_fetching_leaves_the_others_to_ask_again() -> None:
    calls: list[int] = []
    first_call = asyncio.Event()

    async def provide() -> OAuthBearerToken:
        calls.append(1)
        if len(calls) == 1:
            first_call.set()
            await asyncio.Event().wait()  # never answers: its asker is cancelled
        return OAuthBearerToken("second", 2e9)

    tokens = OAuthTokens(provide, timeout=5.0)
    fetching = asyncio.create_task(tokens.token())
    await first_call.wait()
    waiting = asyncio.create_task(tokens.token())
    await asyncio.sleep(0)
    fetching.cancel()
    with pytest.raises(asyncio.CancelledError):
        await fetching
    assert (await asyncio.wait_for(waiting, 1.0)).token == "second"
    assert len(calls) == 2


@pytest.mark.asyncio
async def test_a_failing_refresh_keeps_the_valid_token_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    token = OAuthBearerToken("one", 1100.0)
    tokens = OAuthTokens(_provider(token, RuntimeError("idp down")), timeout=1.0, clock=clock, jitter=lambda: 0.0)
    await tokens.token()
    clock.now = 1090.0
    with caplog.at_level(logging.WARNING):
        assert await tokens.token() is token
        assert await tokens.token() is token
    assert [r.getMessage() for r in caplog.records] == [
        "OAUTHBEARER token provider failed; using the current token until it expires: "
        "the OAUTHBEARER token provider failed: RuntimeError('idp down')"]
    clock.now = 1101.0
    with pytest.raises(AuthenticationError, match="idp down"):
        await tokens.token()


@pytest.mark.parametrize(("answer", "error"), [
    ("a string", "must return an OAuthBearerToken, not str"),
    (OAuthBearerToken("", 2e9), "empty token"),
    (OAuthBearerToken("t", 10.0), "already expired"),
    (OAuthBearerToken("t", True), "expires_at is bool: expected seconds since the epoch"),
    (OAuthBearerToken("t", float("inf")), "expires_at is inf: expected seconds since the epoch"),
    (OAuthBearerToken("t", float("nan")), "expires_at is nan: expected seconds since the epoch"),
])
@pytest.mark.asyncio
async def test_a_provider_s_wrong_answer_is_a_clear_error(answer: Any, error: str) -> None:
    async def provide() -> Any:
        return answer

    with pytest.raises(AuthenticationError, match=error):
        await OAuthTokens(provide, timeout=1.0).token()


TOKEN_TEXT = "tok-Vq7-secret"  # what must never show in an error, its chain or a log line


@pytest.mark.parametrize(("answer", "field", "expected"), [
    (OAuthBearerToken(TOKEN_TEXT, None), "expires_at is None", "seconds since the epoch"),  # type: ignore[arg-type]
    (OAuthBearerToken(TOKEN_TEXT, "2000000000"), "expires_at is str", "seconds since the epoch"),  # type: ignore[arg-type]
    (OAuthBearerToken(TOKEN_TEXT.encode(), 2e9), "token is bytes", "a str"),  # type: ignore[arg-type]
    (OAuthBearerToken(TOKEN_TEXT + "\ud800", 2e9), "token holds a lone surrogate", "UTF-8"),
    (OAuthBearerToken(TOKEN_TEXT, 1.7e12), "expires_at 1.7e+12 looks like milliseconds",
     "give seconds since the epoch"),
], ids=["expires_at-None", "expires_at-str", "token-bytes", "token-lone-surrogate", "expires_at-milliseconds"])
@pytest.mark.asyncio
async def test_a_token_with_a_bad_field_is_an_authentication_error_without_the_token(
        answer: OAuthBearerToken, field: str, expected: str, caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    good = OAuthBearerToken("good", 1100.0)
    tokens = OAuthTokens(_provider(good, answer), timeout=1.0, clock=clock, jitter=lambda: 0.0)
    await tokens.token()
    clock.now = 1090.0  # time to refresh: the bad answer is said (WARNING) and the good token kept
    with caplog.at_level(logging.DEBUG, logger="aiokafka_lite"):
        assert await tokens.token() is good
        clock.now = 1101.0  # the good token has expired: the bad answer is the error
        with pytest.raises(AuthenticationError) as caught:
            await tokens.token()
    message = str(caught.value)
    assert field in message
    assert expected in message
    chain: list[BaseException] = []
    error: BaseException | None = caught.value
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__
    shown = [str(e) for e in chain] + [repr(e) for e in chain] + [repr(e.args) for e in chain]
    shown += [r.getMessage() for r in caplog.records] + [caplog.text]
    assert all(TOKEN_TEXT not in text for text in shown), shown
    assert any(field in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


@pytest.mark.parametrize(("answer", "field"), [
    (OAuthBearerToken(TOKEN_TEXT + "\x01auth=x", 2e9), "token holds \\x01"),
    (OAuthBearerToken(TOKEN_TEXT, 2e9, ["traceId"]), "extensions is list"),  # type: ignore[arg-type]
    (OAuthBearerToken(TOKEN_TEXT, 2e9, {1: "x"}), "extensions has a key of type int"),  # type: ignore[dict-item]
    (OAuthBearerToken(TOKEN_TEXT, 2e9, {"traceId": 7}), "extensions['traceId'] is int"),  # type: ignore[dict-item]
    (OAuthBearerToken(TOKEN_TEXT, 2e9, {"a=b": "x"}), "extensions key 'a=b'"),
    (OAuthBearerToken(TOKEN_TEXT, 2e9, {"trace\x01": "x"}), "extensions key 'trace\\x01'"),
    (OAuthBearerToken(TOKEN_TEXT, 2e9, {"trace-id": "x"}), "extensions key 'trace-id'"),
    (OAuthBearerToken(TOKEN_TEXT, 2e9, {"auth": "x"}), "extensions key 'auth' is reserved"),
    (OAuthBearerToken(TOKEN_TEXT, 2e9, {"traceId": "a\x01auth=x"}), "extensions['traceId']"),
    (OAuthBearerToken(TOKEN_TEXT, 2e9, {"traceId": ""}), "extensions['traceId']"),
], ids=["token-kvsep", "extensions-list", "extensions-int-key", "extensions-int-value", "key-equals",
        "key-kvsep", "key-dash", "key-auth", "value-kvsep", "value-empty"])
@pytest.mark.asyncio
async def test_a_token_or_extensions_that_would_break_the_sasl_message_are_refused_by_name(
        answer: OAuthBearerToken, field: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="aiokafka_lite"), pytest.raises(AuthenticationError) as caught:
        await OAuthTokens(_provider(answer), timeout=1.0).token()
    assert field in str(caught.value)
    chain: list[BaseException] = []
    error: BaseException | None = caught.value
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__
    shown = [str(e) for e in chain] + [repr(e) for e in chain] + [repr(e.args) for e in chain]
    shown += [caplog.text]
    assert all(TOKEN_TEXT not in text and "\x01" not in text for text in shown), shown


@pytest.mark.asyncio
async def test_extensions_with_an_equals_sign_in_the_value_are_sent() -> None:
    # RFC 7628: value = *(VCHAR / SP / HTAB / CR / LF); '=' is a VCHAR and the key ends at the first '='.
    token = OAuthBearerToken("t", 2e9, {"traceId": "a=b"})
    checked = await OAuthTokens(_provider(token), timeout=1.0).token()
    assert OAuthBearer(checked).initial_response() == b"n,,\x01auth=Bearer t\x01traceId=a=b\x01\x01"


@pytest.mark.asyncio
async def test_expires_at_in_seconds_far_ahead_is_still_taken() -> None:
    async def provide() -> OAuthBearerToken:
        return OAuthBearerToken("t", 9.9e10)  # the year 5107, in seconds

    assert (await OAuthTokens(provide, timeout=1.0).token()).expires_at == 9.9e10


@pytest.mark.asyncio
async def test_a_provider_is_bounded_by_the_request_timeout() -> None:
    async def never() -> OAuthBearerToken:
        await asyncio.Event().wait()
        raise AssertionError

    with pytest.raises(KafkaTimeoutError, match=r"gave no token within 0\.05 s"):
        await OAuthTokens(never, timeout=0.05).token()


@pytest.mark.asyncio
async def test_a_provider_that_hangs_while_connecting_is_named_not_the_broker() -> None:
    """The broker answered ApiVersions at once; the provider never returns: the connecting call's
    error names the provider and its bound (request_timeout_ms), not a broker that gave "no answer"."""
    from aiokafka_lite._net import Connection

    from .test_connection import FakeBroker, Peer, hold_open

    async def never() -> OAuthBearerToken:
        await asyncio.Event().wait()
        raise AssertionError

    async def answers_api_versions(peer: Peer) -> None:
        await peer.answer_api_versions()
        await hold_open(peer)

    options = ConnectionOptions(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                                sasl_oauth_token_provider=never, request_timeout=1.0)
    async with FakeBroker(answers_api_versions) as broker:
        with pytest.raises(KafkaTimeoutError) as caught:
            await Connection.open("127.0.0.1", broker.port, options)
    assert "no answer" not in str(caught.value), str(caught.value)
    assert str(caught.value) == "the OAUTHBEARER token provider gave no token within 1 s (request_timeout_ms)"


# ---------------------------------------------------------------- client credentials (KIP-768)

@pytest.mark.asyncio
async def test_client_credentials_against_a_loopback_token_endpoint() -> None:
    with OAuthServer(audience="kafka", token_lifetime=300) as idp:
        idp.add_client("svc account", SECRET)  # a space: form-encoded before Basic auth
        token = await ClientCredentials(idp.token_url, "svc account", SECRET, scope="kafka", timeout=5.0)()
        assert token_subject(token.token) == "svc account"
        assert 290 < token.expires_at - __import__("time").time() <= 300
        with pytest.raises(AuthenticationError, match="refused the request: HTTP 401: invalid_client") as caught:
            await ClientCredentials(idp.token_url, "svc account", "wrong", timeout=5.0)()
        assert SECRET not in str(caught.value)
        assert idp.token_requests == {"svc account": 1}


@pytest.mark.asyncio
async def test_an_unreachable_token_endpoint_is_a_connection_error() -> None:
    with pytest.raises(KafkaConnectionError, match="unreachable"):
        await ClientCredentials(f"http://127.0.0.1:{free_port()}/token", "id", SECRET, timeout=2.0)()


# ---------------------------------------------------------------- settings

def test_java_property_names_map_to_the_settings() -> None:
    config = ConsumerConfig.from_properties({
        "bootstrap.servers": "k:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/token",
        "sasl.oauthbearer.client.credentials.client.id": "billing",
        "sasl.oauthbearer.client.credentials.client.secret": SECRET,
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1, identityPoolId=pool-2",
    })
    assert config.sasl_oauthbearer_client_credentials_client_id == "billing"
    assert config.sasl_oauthbearer_extensions == {"logicalCluster": "lkc-1", "identityPoolId": "pool-2"}
    assert SECRET not in repr(config)
    options = ConnectionOptions.from_settings(config)
    assert options.oauth_tokens is not None
    assert SECRET not in repr(options)


def test_librdkafka_names_for_the_client_id_and_secret() -> None:
    config = ConsumerConfig.from_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/token",
        "sasl.oauthbearer.client.id": "billing", "sasl.oauthbearer.client.secret": SECRET})
    assert config.sasl_oauthbearer_client_credentials_client_secret == SECRET


@pytest.mark.parametrize(("settings", "error"), [
    ({}, "missing sasl_oauthbearer_token_endpoint_url: sasl_mechanism='OAUTHBEARER' needs sasl_oauth_token_provider"),
    ({"sasl_oauthbearer_token_endpoint_url": "https://idp/token",
      "sasl_oauthbearer_client_credentials_client_id": "id"},
     "missing sasl_oauthbearer_client_credentials_client_secret"),
    ({"sasl_oauthbearer_token_endpoint_url": "idp/token", "sasl_oauthbearer_client_credentials_client_id": "id",
      "sasl_oauthbearer_client_credentials_client_secret": SECRET}, "expected an https:// "),
    ({"sasl_oauth_token_provider": _provider(OAuthBearerToken("t", 2e9)),
      "sasl_oauthbearer_token_endpoint_url": "https://idp/token"}, "conflicting sasl_oauthbearer_token_endpoint_url"),
    ({"sasl_oauth_token_provider": "not callable"}, "invalid sasl_oauth_token_provider"),
    ({"sasl_oauth_token_provider": _provider(OAuthBearerToken("t", 2e9)),
      "sasl_oauthbearer_extensions": {"auth": "x"}}, "invalid sasl_oauthbearer_extensions"),
])
def test_oauthbearer_settings_that_cannot_work_are_refused(settings: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Consumer(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                 **settings)
    assert error in str(caught.value)
    assert SECRET not in str(caught.value)
