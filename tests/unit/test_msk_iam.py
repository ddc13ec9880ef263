"""aiokafka_lite.msk_iam without a broker: the signer's token and expiry, the refresh before expiry
through the consumer's token cache, and the errors (static test credentials, no network)."""

from __future__ import annotations

import asyncio
import base64
import sys
import time

import pytest

pytest.importorskip("aws_msk_iam_sasl_signer")

from aiokafka_lite import OAuthBearerToken
from aiokafka_lite._net.oauth import REFRESH_JITTER, REFRESH_WINDOW, OAuthTokens
from aiokafka_lite.errors import AuthenticationError, ConfigError
from aiokafka_lite.msk_iam import MskIamTokenProvider

REGION = "xx-test-1"


@pytest.fixture(autouse=True)
def static_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAUNITTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "unit-test-secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_a_token_is_a_presigned_connect_url_good_for_15_minutes() -> None:
    token = asyncio.run(MskIamTokenProvider(REGION)())
    url = base64.urlsafe_b64decode(token.token + "=" * (-len(token.token) % 4)).decode()
    assert url.startswith(f"https://kafka.{REGION}.amazonaws.com/?Action=kafka-cluster%3AConnect&")
    assert "X-Amz-Expires=900&" in url
    assert "X-Amz-Credential=AKIAUNITTEST%2F" in url
    assert "unit-test-secret" not in url
    assert 880 < token.expires_at - time.time() <= 900


def test_the_token_cache_asks_for_a_new_token_before_the_old_one_expires() -> None:
    now = [time.time()]
    calls: list[float] = []
    provider = MskIamTokenProvider(REGION)

    async def counted() -> OAuthBearerToken:
        calls.append(now[0])
        return await provider()

    async def run() -> None:
        tokens = OAuthTokens(counted, timeout=10.0, clock=lambda: now[0], jitter=lambda: REFRESH_JITTER)
        first = await tokens.token()
        lifetime = first.expires_at - now[0]
        now[0] += lifetime * (REFRESH_WINDOW + REFRESH_JITTER) - 1  # just before the refresh point
        assert await tokens.token() is first
        now[0] += 2  # just after it: well before the token expires
        assert first.expires_at - now[0] > lifetime * 0.1
        second = await tokens.token()
        assert second is not first
        assert len(calls) == 2

    asyncio.run(run())


def test_no_credentials_is_an_authentication_error_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(AuthenticationError, match="MSK IAM: no AWS credentials found"):
        asyncio.run(MskIamTokenProvider(REGION)())


def test_without_the_signer_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aws_msk_iam_sasl_signer", None)
    with pytest.raises(ConfigError, match=r"pip install '\.\[msk-iam\]' in the aiokafka-lite clone"):
        MskIamTokenProvider(REGION)


@pytest.mark.parametrize(("kwargs", "match"), [({"region": ""}, "needs the cluster's AWS region"),
                                               ({"region": REGION, "profile": "p", "role_arn": "arn"}, "not both")])
def test_bad_arguments_are_config_errors(kwargs: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        MskIamTokenProvider(**kwargs)


def test_java_s_msk_iam_handler_property_says_what_to_use_instead() -> None:
    from aiokafka_lite.config import ConsumerConfig

    with pytest.raises(ConfigError, match=r"sasl_oauth_token_provider=aiokafka_lite.msk_iam.MskIamTokenProvider"):
        ConsumerConfig.from_properties({
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.login.callback.handler.class": "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"})
