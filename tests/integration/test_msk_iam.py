"""Amazon MSK IAM sign-in (aiokafka_lite.msk_iam, the signer aws-msk-iam-sasl-signer-python) against
Apache Kafka 4.3.1, offline.

MSK's own IAM check cannot run here, so the broker of this module validates OAUTHBEARER tokens with
``tests/integration/java/MskIamTestValidator.java``, compiled by the fixture with javac against the
broker's jars and put on its class path: it decodes the signer's token (a presigned URL), checks
the action is ``kafka-cluster:Connect``, that ``X-Amz-Date`` + ``X-Amz-Expires`` has not passed, and
recomputes the SigV4 signature with the same static test secret, so a tampered token is refused.
The client signs with static credentials from the environment and a made-up region: no request
leaves the machine.
"""

from __future__ import annotations

import base64
import datetime
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aws_msk_iam_sasl_signer")

from aiokafka_lite import Consumer, OAuthBearerToken
from aiokafka_lite.msk_iam import MskIamTokenProvider
from aiokafka_lite.testing._kafka_jars import kafka_jars, require_tool
from aiokafka_lite.testing.apache_kafka import DEFAULT_VERSION, ApacheKafkaBroker
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.plugin import started_or_skipped

from ._consumers import join_as_the_block_does, poll_until, refused_at_once
from ._doc_blocks import blocks_run_by

RECORDS = 10
REGION = "xx-test-1"  # no such region: nothing could reach AWS even if it tried
ACCESS_KEY, SECRET_KEY = "AKIAAIOKAFKALITETEST", "aiokafka-lite/static/test/secret/key+0123456789"
VALIDATOR = Path(__file__).parent / "java" / "MskIamTestValidator.java"
LISTENER = "MSK_IAM"
DOC_PYTHON = blocks_run_by("docs/oauthbearer.md", "tests/integration/test_msk_iam.py")


def _jaas(access_key: str, secret_key: str) -> str:
    # The broker signs itself in on this listener's login module too (unsecured, so it needs a sub).
    return ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="broker" '
            f'awsAccessKeyId="{access_key}" awsSecretAccessKey="{secret_key}" awsRegion="{REGION}";')


@pytest.fixture(scope="module")
def aws_env() -> Iterator[None]:
    """Static credentials only: no profile, no config file, no instance metadata."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
            patch.delenv(name, raising=False)
        patch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        patch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        patch.setenv("AWS_CONFIG_FILE", "/dev/null")
        patch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        patch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        yield


@pytest.fixture(scope="module")
def broker(aws_env: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafkaBroker]:
    from aiokafka_lite.testing._process import BrokerUnavailable

    try:
        javac = require_tool("javac", "compile the broker-side MSK IAM test validator")
        jars = kafka_jars(DEFAULT_VERSION)
    except BrokerUnavailable as exc:
        pytest.skip(str(exc))
    classes = tmp_path_factory.mktemp("msk-iam-validator")
    compiled = subprocess.run([javac, "-d", str(classes), "-cp", f"{jars}/*", str(VALIDATOR)],
                              capture_output=True, text=True, timeout=120, check=False)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    prefix = f"listener.name.{LISTENER.lower()}."
    kafka = ApacheKafkaBroker(
        extra_listeners={LISTENER: "SASL_PLAINTEXT"},
        extra_properties={prefix + "sasl.enabled.mechanisms": "OAUTHBEARER",
                          prefix + "oauthbearer.sasl.jaas.config": _jaas(ACCESS_KEY, SECRET_KEY),
                          prefix + "oauthbearer.sasl.server.callback.handler.class": "MskIamTestValidator"},
        extra_classpath=[classes])
    with started_or_skipped(kafka):
        yield kafka


def _address(broker: ApacheKafkaBroker) -> str:
    return f"127.0.0.1:{broker.listener_port(LISTENER)}"


def _validator_said(broker: ApacheKafkaBroker, reason: str) -> int:
    """How often the validator refused a token for ``reason`` (it writes to the broker's stderr)."""
    said = (broker.log_path.parent / "stdout.log").read_text()
    return said.count(f"MskIamTestValidator refused a token: {reason}")


async def _refused(broker: ApacheKafkaBroker, provider: Any) -> str:
    return await refused_at_once(bootstrap_servers=_address(broker), security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=provider)


def _url(token: str) -> str:
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()


def _token(url: str) -> str:
    return base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def _tampered(change: tuple[str, str]) -> Any:
    signer = MskIamTokenProvider(REGION)

    async def provider() -> OAuthBearerToken:
        token = await signer()
        url = _url(token.token)
        assert change[0] in url, url
        return OAuthBearerToken(_token(url.replace(*change)), token.expires_at)
    return provider


@pytest.mark.asyncio
async def test_the_signer_s_token_signs_a_group_in_and_reads(broker: ApacheKafkaBroker, unique_topic: str) -> None:
    create_topic(broker.bootstrap_servers, unique_topic, partitions=2)
    produce(broker.bootstrap_servers, unique_topic, [(None, f"v{i}".encode()) for i in range(RECORDS)])
    calls: list[OAuthBearerToken] = []
    signer = MskIamTokenProvider(REGION)

    async def counted() -> OAuthBearerToken:
        calls.append(await signer())
        return calls[-1]

    async with Consumer(unique_topic, bootstrap_servers=_address(broker), group_id=unique_topic,
                        auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=500,
                        security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                        sasl_oauth_token_provider=counted) as consumer:
        got = await poll_until(consumer, lambda records: len(records) >= RECORDS, timeout=60)
    assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(RECORDS))
    assert len(calls) == 1, "one token serves every connection"
    assert 880 < calls[0].expires_at - time.time() <= 900, "the signer's 15 minutes"
    url = _url(calls[0].token)
    assert url.startswith(f"https://kafka.{REGION}.amazonaws.com/?Action=kafka-cluster%3AConnect&")
    assert f"X-Amz-Credential={ACCESS_KEY}%2F" in url


@pytest.mark.parametrize(("change", "reason"), [
    (("X-Amz-Expires=900", "X-Amz-Expires=90000"), "signature does not match"),
    (("Action=kafka-cluster%3AConnect", "Action=kafka-cluster%3AAlterCluster"),
     "Action is kafka-cluster:AlterCluster, not kafka-cluster:Connect"),
], ids=["lifetime", "action"])
@pytest.mark.asyncio
async def test_a_tampered_token_is_refused_at_once(broker: ApacheKafkaBroker, change: tuple[str, str],
                                                   reason: str) -> None:
    before = _validator_said(broker, reason)
    message = await _refused(broker, _tampered(change))
    assert "SASL OAUTHBEARER" in message, message
    assert "invalid_token" in message, message
    assert _validator_said(broker, reason) == before + 1


@pytest.mark.asyncio
async def test_another_secret_s_token_is_refused(broker: ApacheKafkaBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY + "-not")
    before = _validator_said(broker, "signature does not match")
    message = await _refused(broker, MskIamTokenProvider(REGION))
    assert "invalid_token" in message, message
    assert _validator_said(broker, "signature does not match") == before + 1


@pytest.mark.asyncio
async def test_an_expired_token_is_refused(broker: ApacheKafkaBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    import botocore.auth

    # Signed 20 minutes ago: its 15 minutes are over, though the client is told it has a minute left.
    past = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(minutes=20)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: past)
    signer = MskIamTokenProvider(REGION)

    async def stale() -> OAuthBearerToken:
        token = await signer()
        return OAuthBearerToken(token.token, time.time() + 60)

    message = await _refused(broker, stale)
    assert "invalid_token" in message, message
    assert _validator_said(broker, "expired at") == 1


# ---------------------------------------------------------------- docs/oauthbearer.md, as written

@pytest.mark.parametrize("block", DOC_PYTHON, ids=[f"block-{i}" for i in range(len(DOC_PYTHON))])
@pytest.mark.asyncio
async def test_the_docs_msk_block_signs_in_and_joins(broker: ApacheKafkaBroker, block: str) -> None:
    create_topic(broker.bootstrap_servers, "orders", partitions=1)
    address = re.search(r'bootstrap_servers="([^"]+)"', block)
    assert address is not None
    ours = (block.replace(address.group(1), _address(broker)).replace('"us-east-1"', f'"{REGION}"')
            .replace('"SASL_SSL"', '"SASL_PLAINTEXT"'))
    assert ours.count(REGION) == 1
    await join_as_the_block_does(ours)


def test_the_docs_have_the_msk_block() -> None:
    assert len(DOC_PYTHON) == 1
