"""OAuth assertions without a broker (KIP-1139 jwt-bearer, KIP-1258 client assertion): signing, the
requests the token endpoint gets (the loopback identity provider of aiokafka_lite.testing.oauth
checks them), and the settings, including Java's property names."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("cryptography")

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from aiokafka_lite._net.assertion import AssertionClaims, AssertionSource
from aiokafka_lite._net.oidc import ClientCredentials, JwtBearer
from aiokafka_lite.config import ConsumerConfig
from aiokafka_lite.errors import AuthenticationError, ConfigError
from aiokafka_lite.testing._assertion_check import AssertionRefused, check_assertion
from aiokafka_lite.testing.oauth import OAuthServer

AUD = "https://idp.example.com/token"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def _pem(key: object, path: Path, passphrase: bytes | None = None) -> str:
    encryption = (serialization.BestAvailableEncryption(passphrase) if passphrase
                  else serialization.NoEncryption())
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,  # type: ignore[attr-defined]
                                       serialization.PrivateFormat.PKCS8, encryption))
    return str(path)


@pytest.mark.parametrize(("key", "algorithm"), [(RSA_KEY, "RS256"), (EC_KEY, "ES256")])
def test_a_signed_assertion_verifies_with_the_public_key_and_carries_the_claims(
        tmp_path: Path, key: object, algorithm: str) -> None:
    source = AssertionSource(private_key_file=_pem(key, tmp_path / "k.pem", b"pw"), passphrase="pw",
                             algorithm=algorithm,
                             claims=AssertionClaims("svc", "svc", AUD, exp_seconds=120, jti_include=True))
    seen: set[str] = set()
    first = check_assertion(source(), {"svc": key.public_key()}, AUD, seen)  # type: ignore[attr-defined]
    assert (first["iss"], first["sub"], first["aud"]) == ("svc", "svc", AUD)
    assert first["exp"] - first["iat"] == 120
    assert first["iat"] - first["nbf"] == 60
    second = check_assertion(source(), {"svc": key.public_key()}, AUD, seen)  # type: ignore[attr-defined]
    assert second["jti"] != first["jti"], "a fresh jti per assertion"


def test_an_assertion_signed_with_another_key_does_not_verify(tmp_path: Path) -> None:
    source = AssertionSource(private_key_file=_pem(RSA_KEY, tmp_path / "k.pem"),
                             claims=AssertionClaims("svc", "svc", AUD))
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(AssertionRefused, match="does not verify"):
        check_assertion(source(), {"svc": other.public_key()}, AUD, set())


@pytest.mark.parametrize(("setup", "match"), [
    ({"passphrase": "wrong"}, "is not a PEM private key this passphrase opens"),
    ({"algorithm": "ES256"}, "ES256 needs an EC key on P-256"),
    ({"algorithm": "HS256"}, "expected RS256 or ES256"),
])
def test_a_key_or_algorithm_that_cannot_sign_is_a_config_error(tmp_path: Path, setup: dict[str, str],
                                                               match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        AssertionSource(private_key_file=_pem(RSA_KEY, tmp_path / "k.pem", b"right"),
                        **{"passphrase": "right", **setup})


def test_without_cryptography_signing_says_which_extra_to_install(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    key_file = _pem(RSA_KEY, tmp_path / "k.pem")
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.serialization", None)
    with pytest.raises(ConfigError, match=r"pip install '\.\[oauth-assertion\]' in the aiokafka-lite clone"):
        AssertionSource(private_key_file=key_file)


def test_an_assertion_file_is_read_for_every_request(tmp_path: Path) -> None:
    path = tmp_path / "assertion.jwt"
    source = AssertionSource(assertion_file=str(path))
    with pytest.raises(AuthenticationError, match="cannot read the assertion file"):
        source()
    path.write_text("a.b.c\n")
    assert source() == "a.b.c"
    path.write_text("not a jwt")
    with pytest.raises(AuthenticationError, match="does not hold a JWT"):
        source()


def test_both_grants_get_tokens_from_the_endpoint_and_a_refusal_names_the_cause(tmp_path: Path) -> None:
    with OAuthServer() as idp:
        idp.trust_assertion_key("svc", RSA_KEY.public_key())
        idp.trust_assertion_key("billing", EC_KEY.public_key())
        bearer = JwtBearer(idp.token_url, AssertionSource(
            private_key_file=_pem(RSA_KEY, tmp_path / "r.pem"), claims=AssertionClaims("svc", "svc", idp.token_url)))
        client = ClientCredentials(idp.token_url, "billing", assertion=AssertionSource(
            private_key_file=_pem(EC_KEY, tmp_path / "e.pem"), algorithm="ES256",
            claims=AssertionClaims("billing", "billing", idp.token_url)))
        for provider in (bearer, client):
            token = asyncio.run(provider())
            assert token.expires_at > time.time() + 3000
        assert idp.token_requests == {"svc": 1, "billing": 1}
        late = JwtBearer(idp.token_url, AssertionSource(
            private_key_file=_pem(RSA_KEY, tmp_path / "r.pem"), claims=AssertionClaims("svc", "svc", "elsewhere")))
        with pytest.raises(AuthenticationError, match=r"HTTP 400: invalid_grant \(assertion audience"):
            asyncio.run(late())


def test_java_property_names_choose_the_grant_and_the_assertion(tmp_path: Path) -> None:
    key_file = _pem(RSA_KEY, tmp_path / "k.pem")
    config = ConsumerConfig.from_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": AUD,
        "sasl.oauthbearer.jwt.retriever.class": "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever",
        "sasl.oauthbearer.assertion.private.key.file": key_file,
        "sasl.oauthbearer.assertion.algorithm": "RS256",
        "sasl.oauthbearer.assertion.claim.iss": "svc", "sasl.oauthbearer.assertion.claim.sub": "svc",
        "sasl.oauthbearer.assertion.claim.aud": AUD, "sasl.oauthbearer.assertion.claim.exp.seconds": "120",
        "sasl.oauthbearer.assertion.claim.nbf.seconds": "30", "sasl.oauthbearer.assertion.claim.jti.include": "true",
    })
    assert config.sasl_oauthbearer_grant_type == "jwt_bearer"
    assert (config.sasl_oauthbearer_assertion_claim_exp_seconds, config.sasl_oauthbearer_assertion_claim_nbf_seconds,
            config.sasl_oauthbearer_assertion_claim_jti_include) == (120, 30, True)


@pytest.mark.parametrize(("settings", "match"), [
    ({"sasl_oauthbearer_grant_type": "jwt_bearer"},
     r"missing sasl_oauthbearer_assertion_private_key_file \(or sasl_oauthbearer_assertion_file\)"),
    ({"sasl_oauthbearer_client_credentials_client_id": "billing"},
     r"missing sasl_oauthbearer_client_credentials_client_secret \(or an assertion"),
    ({"sasl_oauthbearer_assertion_file": "/a.jwt"}, "missing sasl_oauthbearer_client_credentials_client_id"),
])
def test_an_incomplete_grant_says_what_is_missing(settings: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ConsumerConfig(security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                       sasl_oauthbearer_token_endpoint_url=AUD, **settings)
