"""Amazon MSK IAM sign-in over SASL/OAUTHBEARER, with AWS's ``aws-msk-iam-sasl-signer-python``.

``MskIamTokenProvider(region)`` is a ``sasl_oauth_token_provider``: each call has the signer make a
token (a base64url presigned URL for the action ``kafka-cluster:Connect``, signed with SigV4 by
the AWS credentials it finds: the environment, a named profile, an assumed role, or the instance's
role) that expires in 15 minutes. The consumer's token cache asks again at about 80 % of that and
each connection signs in again before its session ends (KIP-368), as for any token provider::

    from aiokafka_lite.msk_iam import MskIamTokenProvider

    consumer = Consumer("orders", bootstrap_servers="b-1.mycluster.kafka.us-east-1.amazonaws.com:9098",
                        security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                        sasl_oauth_token_provider=MskIamTokenProvider("us-east-1"))

Install with ``pip install '.[msk-iam]'`` in the aiokafka-lite clone; only this module imports the signer (and
boto3), so the core does without it. Signing is local (no request to AWS with static credentials);
finding the credentials may ask STS or the instance metadata service, so it runs in a thread.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka_lite.errors import AuthenticationError, ConfigError, KafkaConnectionError
from aiokafka_lite.structs import OAuthBearerToken

__all__ = ["MskIamTokenProvider"]


def _signer() -> Any:
    try:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
    except ImportError:
        raise ConfigError("MSK IAM sign-in needs the aws-msk-iam-sasl-signer-python package: "
                          "pip install '.[msk-iam]' in the aiokafka-lite clone") from None
    return MSKAuthTokenProvider


class MskIamTokenProvider:
    """An async token provider for ``sasl_oauth_token_provider``: MSK IAM tokens for ``region``.

    ``profile``: a named AWS profile instead of the default credential chain; ``role_arn`` (with
    ``sts_session_name``): a role to assume for each token. At most one of the two.
    """

    def __init__(self, region: str, *, profile: str | None = None, role_arn: str | None = None,
                 sts_session_name: str | None = None) -> None:
        if not region:
            raise ConfigError("MskIamTokenProvider needs the cluster's AWS region, e.g. 'us-east-1'")
        if profile is not None and role_arn is not None:
            raise ConfigError("MskIamTokenProvider takes a profile or a role_arn, not both")
        self._signer = _signer()
        self.region, self.profile, self.role_arn = region, profile, role_arn
        self.sts_session_name = sts_session_name

    def __repr__(self) -> str:
        how = (f", profile={self.profile!r}" if self.profile
               else f", role_arn={self.role_arn!r}" if self.role_arn else "")
        return f"MskIamTokenProvider({self.region!r}{how})"

    async def __call__(self) -> OAuthBearerToken:
        token, expiry_ms = await asyncio.to_thread(self._generate)
        return OAuthBearerToken(token, expiry_ms / 1000.0)

    def _generate(self) -> tuple[str, int]:
        try:
            if self.profile is not None:
                result = self._signer.generate_auth_token_from_profile(self.region, self.profile)
            elif self.role_arn is not None:
                extra = (self.sts_session_name,) if self.sts_session_name else ()
                result = self._signer.generate_auth_token_from_role_arn(self.region, self.role_arn, *extra)
            else:
                result = self._signer.generate_auth_token(self.region)
        except Exception as exc:
            raise _typed(exc) from exc
        token, expiry_ms = result
        return str(token), int(expiry_ms)


def _typed(exc: Exception) -> Exception:
    """botocore's errors as ours: no or bad credentials are final, an unreachable AWS endpoint is not."""
    name = type(exc).__name__
    if name in ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError"):
        return KafkaConnectionError(f"MSK IAM: AWS unreachable while finding credentials: {exc}")
    # The signer meets no credentials as None (AttributeError) or as empty ones (ValueError).
    if (name == "NoCredentialsError" or "Credentials can not be empty" in str(exc)
            or (isinstance(exc, AttributeError) and "access_key" in str(exc))):
        return AuthenticationError("MSK IAM: no AWS credentials found (environment AWS_ACCESS_KEY_ID and "
                                   "AWS_SECRET_ACCESS_KEY, a profile, or a role)")
    return AuthenticationError(f"MSK IAM: signing the token failed: {name}: {exc}")
