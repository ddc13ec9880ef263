"""OAuth sign-in without a client secret, against Apache Kafka 4.3.1 validating JWTs with its JWKS:
the jwt-bearer grant (KIP-1139) and the client-credentials grant with a client assertion (KIP-1258).

The loopback identity provider (``aiokafka_lite.testing.oauth.OAuthServer``) trusts one RSA and one
EC P-256 public key for assertions, checks each assertion's signature, ``iss``, ``sub``, ``aud`` (its
token URL), ``exp`` and ``jti``, and issues the RS256 tokens the broker verifies. A refused assertion
must fail the consumer at once with an ``AuthenticationError`` naming the endpoint's reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from aiokafka_lite import Consumer
from aiokafka_lite.errors import ConfigError
from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.oauth import (
    OAuthServer,
    allowed_urls_jvm_option,
    oauthbearer_listener_properties,
)
from aiokafka_lite.testing.plugin import started_or_skipped

from ._consumers import join_as_the_block_does, poll_until, refused_at_once
from ._doc_blocks import blocks_run_by

RECORDS = 10
AUDIENCE, ISSUER = "kafka-test", "aiokafka-lite-test-idp"
DOC_ADDRESS, DOC_IDP = "kafka.example.com:9093", "https://idp.example.com/oauth2/token"
DOC_PYTHON = blocks_run_by("docs/oauthbearer.md", "tests/integration/test_oauth_assertion.py")


class Setup:
    def __init__(self, broker: ApacheKafkaBroker, idp: OAuthServer, keys: Path) -> None:
        self.broker, self.idp, self.keys = broker, idp, keys

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.broker.listener_port('OAUTH_JWT')}"


def _pem(key: Any, path: Path, passphrase: bytes | None = None) -> Path:
    encryption = (serialization.BestAvailableEncryption(passphrase) if passphrase
                  else serialization.NoEncryption())
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    keys = tmp_path_factory.mktemp("assertion-keys")
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    _pem(rsa_key, keys / "service-rsa.pem", b"pass-phrase")
    _pem(ec_key, keys / "billing-ec.pem")
    _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048), keys / "stranger.pem")
    with OAuthServer(issuer=ISSUER, audience=AUDIENCE) as idp:
        idp.trust_assertion_key("batch-service", rsa_key.public_key())
        idp.trust_assertion_key("billing", ec_key.public_key())
        broker = ApacheKafkaBroker(
            extra_listeners={"OAUTH_JWT": "SASL_PLAINTEXT"},
            extra_properties=oauthbearer_listener_properties("OAUTH_JWT", jwks_url=idp.jwks_url,
                                                             audience=AUDIENCE, issuer=ISSUER),
            jvm_options=[allowed_urls_jvm_option(idp.jwks_url, idp.token_url)])
        with started_or_skipped(broker):
            yield Setup(broker, idp, keys)


@pytest.fixture
def topic(setup: Setup, unique_topic: str) -> str:
    create_topic(setup.broker.bootstrap_servers, unique_topic, partitions=1)
    produce(setup.broker.bootstrap_servers, unique_topic, [(None, f"v{i}".encode()) for i in range(RECORDS)])
    return unique_topic


async def _consume_all(setup: Setup, topic: str, **settings: Any) -> None:
    async with Consumer(topic, bootstrap_servers=setup.address, group_id=f"g-{topic}", auto_offset_reset="earliest",
                        session_timeout_ms=6000, heartbeat_interval_ms=500, security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="OAUTHBEARER", sasl_oauthbearer_token_endpoint_url=setup.idp.token_url,
                        **settings) as consumer:
        got = await poll_until(consumer, lambda records: len(records) >= RECORDS, timeout=60)
        assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(RECORDS))


async def _refused(setup: Setup, **settings: Any) -> str:
    return await refused_at_once(bootstrap_servers=setup.address, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="OAUTHBEARER",
                                 sasl_oauthbearer_token_endpoint_url=setup.idp.token_url, **settings)


def _signed_by(setup: Setup, key_file: str, **claims: Any) -> str:
    """An assertion as a sidecar would write it: signed elsewhere (here with our own signer)."""
    from aiokafka_lite._net.assertion import AssertionSource

    source = AssertionSource(private_key_file=str(setup.keys / key_file), algorithm="ES256")
    now = int(time.time())
    return source.sign({"iat": now, "exp": now + 300, **claims})


# ---------------------------------------------------------------- jwt-bearer grant (KIP-1139)

@pytest.mark.asyncio
async def test_the_jwt_bearer_grant_signs_in_with_an_rs256_assertion(setup: Setup, topic: str) -> None:
    before = setup.idp.token_requests.get("batch-service", 0)
    await _consume_all(setup, topic, sasl_oauthbearer_grant_type="jwt_bearer",
                       sasl_oauthbearer_assertion_private_key_file=str(setup.keys / "service-rsa.pem"),
                       sasl_oauthbearer_assertion_private_key_passphrase="pass-phrase",
                       sasl_oauthbearer_assertion_claim_iss="batch-service",
                       sasl_oauthbearer_assertion_claim_sub="batch-service",
                       sasl_oauthbearer_assertion_claim_aud=setup.idp.token_url,
                       sasl_oauthbearer_assertion_claim_jti_include=True)
    assert setup.idp.token_requests["batch-service"] == before + 1, "one token serves every connection"


@pytest.mark.asyncio
async def test_the_jwt_bearer_grant_reads_a_ready_assertion_file(setup: Setup, topic: str, tmp_path: Path) -> None:
    assertion = tmp_path / "assertion.jwt"
    assertion.write_text(_signed_by(setup, "billing-ec.pem", iss="billing", sub="billing", aud=setup.idp.token_url))
    await _consume_all(setup, topic, sasl_oauthbearer_grant_type="jwt_bearer",
                       sasl_oauthbearer_assertion_file=str(assertion))


@pytest.mark.parametrize(("claims", "key", "reason"), [
    ({}, "stranger.pem", "assertion signature (RS256) does not verify with 'batch-service''s key"),
    ({"aud": "https://elsewhere.example.com"}, "service-rsa.pem",
     "assertion audience (aud) 'https://elsewhere.example.com' is not"),
    ({"iss": "nobody"}, "service-rsa.pem", "assertion issuer (iss) 'nobody' is not trusted"),
], ids=["signature", "audience", "issuer"])
@pytest.mark.asyncio
async def test_a_bad_jwt_bearer_assertion_is_refused_with_its_reason(setup: Setup, claims: dict[str, Any],
                                                                     key: str, reason: str) -> None:
    claim = {"iss": "batch-service", "aud": setup.idp.token_url, **claims}
    message = await _refused(
        setup, sasl_oauthbearer_grant_type="jwt_bearer",
        sasl_oauthbearer_assertion_private_key_file=str(setup.keys / key),
        sasl_oauthbearer_assertion_private_key_passphrase="pass-phrase" if key == "service-rsa.pem" else None,
        sasl_oauthbearer_assertion_claim_iss=claim["iss"], sasl_oauthbearer_assertion_claim_sub="batch-service",
        sasl_oauthbearer_assertion_claim_aud=claim["aud"])
    assert "refused the request: HTTP 400: invalid_grant" in message, message
    assert reason in message, message
    assert reason in setup.idp.refusals[-1]


@pytest.mark.asyncio
async def test_an_expired_or_replayed_assertion_file_is_refused(setup: Setup, tmp_path: Path) -> None:
    expired = tmp_path / "expired.jwt"
    past = int(time.time()) - 600
    expired.write_text(_signed_by(setup, "billing-ec.pem", iss="billing", sub="billing", aud=setup.idp.token_url,
                                  iat=past, exp=past + 300))
    message = await _refused(setup, sasl_oauthbearer_grant_type="jwt_bearer",
                             sasl_oauthbearer_assertion_file=str(expired))
    assert "invalid_grant (assertion expired" in message, message
    replayed = tmp_path / "replayed.jwt"
    replayed.write_text(_signed_by(setup, "billing-ec.pem", iss="billing", sub="billing", aud=setup.idp.token_url,
                                   jti="once-only"))
    await _refused_after_one_success(setup, replayed)


async def _refused_after_one_success(setup: Setup, assertion: Path) -> None:
    settings: dict[str, Any] = {"sasl_oauthbearer_grant_type": "jwt_bearer",
                                "sasl_oauthbearer_assertion_file": str(assertion)}
    async with Consumer(bootstrap_servers=setup.address, security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="OAUTHBEARER", sasl_oauthbearer_token_endpoint_url=setup.idp.token_url,
                        **settings) as consumer:
        await consumer.list_topics(timeout=10.0)
    message = await _refused(setup, **settings)
    assert "assertion replayed (jti 'once-only' already used)" in message, message


# ---------------------------------------------------------------- client assertion (KIP-1258)

@pytest.mark.asyncio
async def test_client_credentials_with_an_es256_client_assertion_instead_of_a_secret(setup: Setup,
                                                                                    topic: str) -> None:
    before = setup.idp.token_requests.get("billing", 0)
    await _consume_all(setup, topic, sasl_oauthbearer_client_credentials_client_id="billing",
                       sasl_oauthbearer_assertion_private_key_file=str(setup.keys / "billing-ec.pem"),
                       sasl_oauthbearer_assertion_algorithm="ES256",
                       sasl_oauthbearer_assertion_claim_iss="billing", sasl_oauthbearer_assertion_claim_sub="billing",
                       sasl_oauthbearer_assertion_claim_aud=setup.idp.token_url,
                       sasl_oauthbearer_assertion_claim_jti_include=True, sasl_oauthbearer_scope="kafka")
    assert setup.idp.token_requests["billing"] == before + 1


@pytest.mark.asyncio
async def test_a_client_assertion_for_another_client_is_refused(setup: Setup) -> None:
    message = await _refused(setup, sasl_oauthbearer_client_credentials_client_id="billing",
                             sasl_oauthbearer_assertion_private_key_file=str(setup.keys / "billing-ec.pem"),
                             sasl_oauthbearer_assertion_algorithm="ES256",
                             sasl_oauthbearer_assertion_claim_iss="billing",
                             sasl_oauthbearer_assertion_claim_sub="someone-else",
                             sasl_oauthbearer_assertion_claim_aud=setup.idp.token_url)
    assert "refused the request: HTTP 401: invalid_client" in message, message
    assert "must both be the client id 'billing'" in message, message


@pytest.mark.asyncio
async def test_a_key_that_does_not_fit_the_algorithm_is_a_config_error(setup: Setup) -> None:
    with pytest.raises(ConfigError, match="ES256 needs an EC key on P-256"):
        async with Consumer(bootstrap_servers=setup.address, security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="OAUTHBEARER", sasl_oauthbearer_token_endpoint_url=setup.idp.token_url,
                            sasl_oauthbearer_client_credentials_client_id="billing",
                            sasl_oauthbearer_assertion_private_key_file=str(setup.keys / "stranger.pem"),
                            sasl_oauthbearer_assertion_algorithm="ES256"):
            pass



# ---------------------------------------------------------------- docs/oauthbearer.md, as written

@pytest.fixture(scope="module")
def doc_topic(setup: Setup) -> str:
    create_topic(setup.broker.bootstrap_servers, "orders", partitions=1)  # the blocks' topic
    return "orders"


@pytest.mark.parametrize("block", DOC_PYTHON, ids=[f"block-{i}" for i in range(len(DOC_PYTHON))])
@pytest.mark.asyncio
async def test_the_docs_assertion_blocks_sign_in_and_join_as_written(setup: Setup, doc_topic: str, block: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_SERVICE_KEY", str(setup.keys / "service-rsa.pem"))
    monkeypatch.setenv("KAFKA_KEY_PASSPHRASE", "pass-phrase")
    monkeypatch.setenv("KAFKA_CLIENT_KEY", str(setup.keys / "billing-ec.pem"))
    assert DOC_ADDRESS in block
    await join_as_the_block_does(block.replace(DOC_ADDRESS, setup.address).replace(DOC_IDP, setup.idp.token_url))


def test_the_docs_have_both_assertion_blocks() -> None:
    assert len(DOC_PYTHON) == 2
