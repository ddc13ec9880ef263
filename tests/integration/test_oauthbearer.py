"""SASL/OAUTHBEARER against Apache Kafka 4.3.1: a token provider, the client-credentials flow against a
loopback identity provider whose RS256 tokens the broker verifies against its JWKS, refused tokens,
and re-authentication (KIP-368) with nothing lost or read twice.

One broker for the module, with three OAUTHBEARER listeners (inter-broker and controller stay
PLAINTEXT):

* ``OAUTH``: the broker's unsecured validator (``alg: none`` tokens with a ``sub``);
* ``OAUTH_REAUTH``: the same with ``connections.max.reauth.ms`` of 8 s, so sessions end and clients
  must sign in again on every connection;
* ``OAUTH_JWT``: ``OAuthBearerValidatorCallbackHandler`` checking signature, audience and issuer
  against ``aiokafka_lite.testing.oauth.OAuthServer``'s JWKS.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite import Consumer, OAuthBearerToken
from aiokafka_lite.errors import AuthenticationError
from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.oauth import (
    OAuthServer,
    allowed_urls_jvm_option,
    oauthbearer_listener_properties,
    unsecured_jws,
)
from aiokafka_lite.testing.plugin import started_or_skipped

from ._consumers import join_as_the_block_does, poll_until
from ._doc_blocks import blocks_run_by
from ._steady import SteadyProducer

RECORDS = 20
AUDIENCE, ISSUER = "kafka-test", "aiokafka-lite-test-idp"
CLIENT_SECRET = "client-secret-Qw7!unique"
REAUTH_MS = 8000
DOC_ADDRESS, DOC_IDP = "kafka.example.com:9093", "https://idp.example.com/oauth2/token"


class OAuthKafka:
    def __init__(self, broker: ApacheKafkaBroker, idp: OAuthServer) -> None:
        self.broker = broker
        self.idp = idp

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.broker.listener_port(listener)}"


@pytest.fixture(scope="module")
def oauth_kafka() -> Iterator[OAuthKafka]:
    with OAuthServer(issuer=ISSUER, audience=AUDIENCE) as idp:
        idp.add_client("billing", CLIENT_SECRET)
        idp.add_client("elsewhere", CLIENT_SECRET, audience="another-service")
        idp.add_client("forger", CLIENT_SECRET, forged=True)
        broker = ApacheKafkaBroker(
            extra_listeners={"OAUTH": "SASL_PLAINTEXT", "OAUTH_REAUTH": "SASL_PLAINTEXT",
                             "OAUTH_JWT": "SASL_PLAINTEXT"},
            extra_properties={
                **oauthbearer_listener_properties("OAUTH"),
                **oauthbearer_listener_properties("OAUTH_REAUTH", max_reauth_ms=REAUTH_MS),
                **oauthbearer_listener_properties("OAUTH_JWT", jwks_url=idp.jwks_url, audience=AUDIENCE,
                                                  issuer=ISSUER),
            },
            jvm_options=[allowed_urls_jvm_option(idp.jwks_url, idp.token_url)])
        with started_or_skipped(broker):
            yield OAuthKafka(broker, idp)


@pytest.fixture
def topic_with_records(oauth_kafka: OAuthKafka, unique_topic: str) -> str:
    create_topic(oauth_kafka.broker.bootstrap_servers, unique_topic, partitions=2)
    produce(oauth_kafka.broker.bootstrap_servers, unique_topic,
            [(f"k{i}".encode(), f"v{i}".encode()) for i in range(RECORDS)])
    return unique_topic


def _unsecured_provider(subject: str, lifetime: float, calls: list[float] | None = None,
                        **extensions: str) -> Any:
    async def provider() -> OAuthBearerToken:
        if calls is not None:
            calls.append(time.monotonic())
        return OAuthBearerToken.with_lifetime(unsecured_jws(subject, lifetime), lifetime, extensions)
    return provider


async def _poll_repeatedly(consumer: Consumer) -> None:
    async with consumer:
        for _ in range(10):
            await consumer.poll(timeout=1.0)


async def _list_topics(consumer: Consumer) -> None:
    async with consumer:
        await consumer.list_topics(timeout=10.0)


async def _consume_all(topic: str, **settings: Any) -> None:
    async with Consumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", session_timeout_ms=6000,
                        heartbeat_interval_ms=500, security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="OAUTHBEARER", **settings) as consumer:
        got = await poll_until(consumer, lambda records: len(records) >= RECORDS, timeout=60)
        assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(RECORDS))
        await consumer.commit()


def _no_warning(caplog: pytest.LogCaptureFixture) -> None:
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("aiokafka_lite")]
    assert not warned, "\n".join(r.getMessage() for r in warned)


# ---------------------------------------------------------------- a token provider, unsecured validator

@pytest.mark.asyncio
async def test_a_token_provider_signs_a_group_in(oauth_kafka: OAuthKafka, topic_with_records: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    calls: list[float] = []
    await _consume_all(topic_with_records, bootstrap_servers=oauth_kafka.address("OAUTH"),
                       sasl_oauth_token_provider=_unsecured_provider("alice", 3600, calls, traceId="t42"))
    assert len(calls) == 1, "every connection shares one cached token"
    _no_warning(caplog)


@pytest.mark.asyncio
async def test_a_token_the_broker_refuses_fails_at_once_with_its_reason(oauth_kafka: OAuthKafka,
                                                                         topic_with_records: str) -> None:
    calls: list[float] = []

    async def expired() -> OAuthBearerToken:
        calls.append(time.monotonic())
        # The client believes it valid for a minute; its exp claim says it expired an hour ago.
        return OAuthBearerToken.with_lifetime(unsecured_jws("mallory", 60, now=time.time() - 3660), 60)

    consumer = Consumer(topic_with_records, bootstrap_servers=oauth_kafka.address("OAUTH"), group_id="g-refused",
                        security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                        sasl_oauth_token_provider=expired, default_api_timeout_ms=30000)
    began = time.monotonic()
    with pytest.raises(AuthenticationError) as caught:
        await _poll_repeatedly(consumer)
    assert time.monotonic() - began < 5.0, "a refused token is not retried"
    message = str(caught.value)
    assert "SASL OAUTHBEARER as 'mallory'" in message, message
    assert "invalid_token" in message, message  # the broker's challenge, in the error
    assert len(calls) == 1


@pytest.mark.asyncio
async def test_a_failing_provider_fails_the_start_with_its_error(oauth_kafka: OAuthKafka) -> None:
    async def broken() -> OAuthBearerToken:
        raise RuntimeError("vault sealed")

    consumer = Consumer(bootstrap_servers=oauth_kafka.address("OAUTH"), security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=broken)
    with pytest.raises(AuthenticationError, match="token provider failed: RuntimeError\\('vault sealed'\\)"):
        await _list_topics(consumer)


# ---------------------------------------------------------------- client credentials, JWT validation

@pytest.mark.asyncio
async def test_client_credentials_tokens_verified_against_the_jwks(oauth_kafka: OAuthKafka,
                                                                   topic_with_records: str,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    before = oauth_kafka.idp.token_requests.get("billing", 0)
    await _consume_all(topic_with_records, bootstrap_servers=oauth_kafka.address("OAUTH_JWT"),
                       sasl_oauthbearer_token_endpoint_url=oauth_kafka.idp.token_url,
                       sasl_oauthbearer_client_credentials_client_id="billing",
                       sasl_oauthbearer_client_credentials_client_secret=CLIENT_SECRET,
                       sasl_oauthbearer_scope="kafka")
    assert oauth_kafka.idp.token_requests["billing"] == before + 1
    assert oauth_kafka.idp.jwks_requests >= 1, "the broker fetched the JWKS"
    assert CLIENT_SECRET not in caplog.text
    _no_warning(caplog)


@pytest.mark.parametrize(("client", "reason"), [
    ("elsewhere", "Audience (aud) claim [another-service] doesn't contain an acceptable identifier"),
    ("forger", "JWT rejected due to invalid signature")])
@pytest.mark.asyncio
async def test_a_token_with_the_wrong_audience_or_signature_is_refused(oauth_kafka: OAuthKafka, client: str,
                                                                       reason: str) -> None:
    consumer = Consumer(bootstrap_servers=oauth_kafka.address("OAUTH_JWT"), security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="OAUTHBEARER", sasl_oauthbearer_token_endpoint_url=oauth_kafka.idp.token_url,
                        sasl_oauthbearer_client_credentials_client_id=client,
                        sasl_oauthbearer_client_credentials_client_secret=CLIENT_SECRET)
    began = time.monotonic()
    with pytest.raises(AuthenticationError) as caught:
        await _list_topics(consumer)
    assert time.monotonic() - began < 5.0
    message = str(caught.value)
    assert f"SASL OAUTHBEARER as {client!r}" in message, message
    assert "invalid_token" in message, message
    assert "the broker refused the token" in message, message
    # The broker tells the client only "invalid_token"; its log says why, and the why is the one meant.
    assert reason in oauth_kafka.broker.log_path.read_text()


@pytest.mark.asyncio
async def test_a_wrong_client_secret_is_refused_by_the_token_endpoint(oauth_kafka: OAuthKafka) -> None:
    consumer = Consumer(bootstrap_servers=oauth_kafka.address("OAUTH_JWT"), security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="OAUTHBEARER", sasl_oauthbearer_token_endpoint_url=oauth_kafka.idp.token_url,
                        sasl_oauthbearer_client_credentials_client_id="billing",
                        sasl_oauthbearer_client_credentials_client_secret="wrong-secret")
    with pytest.raises(AuthenticationError, match="refused the request: HTTP 401: invalid_client") as caught:
        await _list_topics(consumer)
    assert "wrong-secret" not in str(caught.value)


# ---------------------------------------------------------------- re-authentication (KIP-368)

@pytest.mark.parametrize("heartbeat_mode", ["task", "thread"])
@pytest.mark.asyncio
async def test_every_connection_reauthenticates_with_nothing_lost_or_repeated(
        oauth_kafka: OAuthKafka, unique_topic: str, caplog: pytest.LogCaptureFixture, heartbeat_mode: str) -> None:
    """10 s tokens, 8 s sessions, 15 s of consuming while records are produced: every connection
    (the heartbeat thread's too) signs in again (KIP-368) with a fresh token, and every record
    arrives once, with no WARNING."""
    caplog.set_level(logging.DEBUG, logger="aiokafka_lite")
    create_topic(oauth_kafka.broker.bootstrap_servers, unique_topic, partitions=2)
    calls: list[float] = []
    began = time.time()
    got: list[bytes] = []
    async with Consumer(unique_topic, bootstrap_servers=oauth_kafka.address("OAUTH_REAUTH"), group_id=unique_topic,
                        auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
                        heartbeat_mode=heartbeat_mode, security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="OAUTHBEARER",
                        sasl_oauth_token_provider=_unsecured_provider("reader", 10, calls)) as consumer:
        # 50 records/s whose values count up from 0; on leaving, flushed and every one acknowledged.
        async with SteadyProducer(oauth_kafka.broker.bootstrap_servers, unique_topic, 2, 50.0) as producer:
            loop = asyncio.get_running_loop()
            ends = loop.time() + 15
            while loop.time() < ends:
                got.extend(r.value for r in await consumer.poll(timeout=0.5))
        sent = producer.sent
        rest = await poll_until(consumer, lambda records: len(got) + len(records) >= sent, timeout=20)
        got.extend(r.value for r in rest)
        reauthentications = consumer.metrics()["sasl_reauthentications"]
    assert sent > 100
    assert sorted(got, key=int) == [str(i).encode() for i in range(sent)], "every record exactly once"
    # The pooled and the coordinator's connection at least, each 15 s in 8 s sessions (renewed at about 6 and 12 s).
    assert reauthentications >= 4, reauthentications
    assert len(calls) >= 3, f"fresh tokens: {len(calls)}"
    _no_warning(caplog)
    messages = [(r.created - began, r.getMessage()) for r in caplog.records if r.name == "aiokafka_lite.net"]
    opened = [at for at, message in messages if message.startswith("connected to")]
    assert opened
    assert max(opened) < 3.0, f"a connection was replaced (its session lapsed?): {messages}"
    if heartbeat_mode == "thread":  # the heartbeat thread's own connection signs in again too
        assert sum("(heartbeat thread): re-authenticated" in message for _, message in messages) >= 2, messages
    print(f"{heartbeat_mode}: re-authentications {reauthentications}, tokens {len(calls)}, records {sent}")


# ---------------------------------------------------------------- docs/oauthbearer.md, as written

# This module's blocks; those marked run-by=tests/integration/test_oauth_assertion.py are run there.
DOC_PYTHON = blocks_run_by("docs/oauthbearer.md", "tests/integration/test_oauthbearer.py")


@pytest.fixture(scope="module")
def doc_topic(oauth_kafka: OAuthKafka) -> str:
    create_topic(oauth_kafka.broker.bootstrap_servers, "orders", partitions=1)  # the blocks' topic
    return "orders"


@pytest.mark.parametrize("block", DOC_PYTHON, ids=[f"block-{i}" for i in range(len(DOC_PYTHON))])
@pytest.mark.asyncio
async def test_the_docs_python_blocks_sign_in_and_join_as_written(
        oauth_kafka: OAuthKafka, doc_topic: str, block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The custom provider's block runs against the unsecured listener (its token file holds an
    unsecured token), the client-credentials ones against the JWT listener and the test IdP."""
    token_file = tmp_path / "token"
    token_file.write_text(unsecured_jws("doc-reader", 600))
    monkeypatch.setenv("KAFKA_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("KAFKA_CLIENT_SECRET", CLIENT_SECRET)
    assert DOC_ADDRESS in block
    listener = "OAUTH" if "sasl_oauth_token_provider" in block else "OAUTH_JWT"
    await join_as_the_block_does(block.replace(DOC_ADDRESS, oauth_kafka.address(listener))
                                 .replace(DOC_IDP, oauth_kafka.idp.token_url))
    _no_warning(caplog)
