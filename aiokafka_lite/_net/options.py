"""What the I/O shell needs to know, decoupled from the consumer's settings object."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from ..errors import ConfigError
from .assertion import AssertionClaims, AssertionSource
from .oauth import OAuthTokens, TokenProvider
from .oidc import ClientCredentials, JwtBearer


def _package_version() -> str:
    # Not ``from .. import __version__``: the package root imports this module (a cycle).
    try:
        return metadata.version("aiokafka-lite")
    except metadata.PackageNotFoundError:
        return "unknown"


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
RECOVERY_STRATEGIES = ("rebootstrap", "none")
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
ASSERTION_SETTINGS = (
    "sasl_oauthbearer_grant_type", "sasl_oauthbearer_assertion_file", "sasl_oauthbearer_assertion_private_key_file",
    "sasl_oauthbearer_assertion_private_key_passphrase", "sasl_oauthbearer_assertion_algorithm",
    "sasl_oauthbearer_assertion_claim_iss", "sasl_oauthbearer_assertion_claim_sub",
    "sasl_oauthbearer_assertion_claim_aud", "sasl_oauthbearer_assertion_claim_exp_seconds",
    "sasl_oauthbearer_assertion_claim_nbf_seconds", "sasl_oauthbearer_assertion_claim_jti_include")


@dataclass(frozen=True)
class ConnectionOptions:
    """Durations in seconds. Secrets are excluded from ``repr`` so they never reach a log line."""

    client_id: str | None = "aiokafka-lite"
    request_timeout: float | None = 30.0
    retry_backoff: float = 0.1
    retry_backoff_max: float = 1.0
    reconnect_backoff: float = 0.05
    reconnect_backoff_max: float = 1.0
    # KIP-909: 0 fails at once when no bootstrap name resolves; else retry this long.
    bootstrap_resolve_timeout: float = 0.0
    connections_max_idle: float | None = 540.0
    metadata_max_age: float = 300.0
    # KIP-899/KIP-1102: "rebootstrap" (Java's default since 4.0) or "none".
    metadata_recovery_strategy: str = "rebootstrap"
    metadata_recovery_rebootstrap_trigger: float = 300.0
    # KIP-1242: name the cluster and node meant in ApiVersions, and check Metadata's cluster id.
    metadata_cluster_check_enable: bool = True
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True
    sasl_mechanism: str = "PLAIN"
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = field(default=None, repr=False)
    # OAUTHBEARER: the user's token provider, or the client-credentials flow (oidc.py).
    sasl_oauth_token_provider: TokenProvider | None = field(default=None, repr=False)
    sasl_oauthbearer_token_endpoint_url: str | None = None
    sasl_oauthbearer_client_credentials_client_id: str | None = None
    sasl_oauthbearer_client_credentials_client_secret: str | None = field(default=None, repr=False)
    sasl_oauthbearer_scope: str | None = None
    sasl_oauthbearer_extensions: Mapping[str, str] | None = None
    # KIP-1139 (the jwt-bearer grant) and KIP-1258 (a client assertion instead of the secret).
    sasl_oauthbearer_grant_type: str = "client_credentials"
    sasl_oauthbearer_assertion_file: str | None = None
    sasl_oauthbearer_assertion_private_key_file: str | None = None
    sasl_oauthbearer_assertion_private_key_passphrase: str | None = field(default=None, repr=False)
    sasl_oauthbearer_assertion_algorithm: str = "RS256"
    sasl_oauthbearer_assertion_claim_iss: str | None = None
    sasl_oauthbearer_assertion_claim_sub: str | None = None
    sasl_oauthbearer_assertion_claim_aud: str | None = None
    sasl_oauthbearer_assertion_claim_exp_seconds: int = 300
    sasl_oauthbearer_assertion_claim_nbf_seconds: int = 60
    sasl_oauthbearer_assertion_claim_jti_include: bool = False
    # Built from the above in __post_init__: the one token cache every connection shares.
    oauth_tokens: OAuthTokens | None = field(default=None, repr=False, compare=False)
    # Metadata requests for named topics may create them, where the broker allows it (Java's
    # allow.auto.create.topics); requests for every topic never do.
    allow_auto_topic_creation: bool = False
    client_software_name: str = "aiokafka-lite"
    client_software_version: str = field(default_factory=_package_version)

    def __post_init__(self) -> None:
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"security_protocol={self.security_protocol!r}: expected one of "
                              f"{', '.join(SECURITY_PROTOCOLS)}")
        if self.uses_sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ConfigError(f"sasl_mechanism={self.sasl_mechanism!r}: expected one of "
                                  f"{', '.join(SASL_MECHANISMS)}")
            if self.sasl_mechanism == "OAUTHBEARER":
                if self.oauth_tokens is None:
                    object.__setattr__(self, "oauth_tokens", OAuthTokens(
                        self._token_provider(), timeout=self.request_timeout,
                        extensions=self.sasl_oauthbearer_extensions))
            elif self.sasl_plain_username is None or self.sasl_plain_password is None:
                raise ConfigError(f"security_protocol={self.security_protocol!r} needs "
                                  "sasl_plain_username and sasl_plain_password")
        if self.metadata_recovery_strategy not in RECOVERY_STRATEGIES:
            raise ConfigError(f"metadata_recovery_strategy={self.metadata_recovery_strategy!r}: expected "
                              f"one of {', '.join(RECOVERY_STRATEGIES)}")
        if self.max_frame_bytes < 8:
            raise ConfigError(f"max_frame_bytes={self.max_frame_bytes}: must be at least 8")

    def _token_provider(self) -> TokenProvider:
        if self.sasl_oauth_token_provider is not None:
            return self.sasl_oauth_token_provider
        url, client_id = self.sasl_oauthbearer_token_endpoint_url, self.sasl_oauthbearer_client_credentials_client_id
        secret = self.sasl_oauthbearer_client_credentials_client_secret
        assertion = self._assertion_source()
        if url is not None and self.sasl_oauthbearer_grant_type == "jwt_bearer" and assertion is not None:
            return JwtBearer(url, assertion, scope=self.sasl_oauthbearer_scope, timeout=self.request_timeout)
        if url is None or client_id is None or (secret is None and assertion is None):
            raise ConfigError("sasl_mechanism='OAUTHBEARER' needs sasl_oauth_token_provider, or "
                              "sasl_oauthbearer_token_endpoint_url with the client id and secret (or an "
                              "assertion), or with sasl_oauthbearer_grant_type='jwt_bearer' an assertion")
        return ClientCredentials(url, client_id, secret, assertion=assertion, scope=self.sasl_oauthbearer_scope,
                                 timeout=self.request_timeout)

    def _assertion_source(self) -> AssertionSource | None:
        if self.sasl_oauthbearer_assertion_file is None and self.sasl_oauthbearer_assertion_private_key_file is None:
            return None
        claims = AssertionClaims(
            self.sasl_oauthbearer_assertion_claim_iss, self.sasl_oauthbearer_assertion_claim_sub,
            self.sasl_oauthbearer_assertion_claim_aud, self.sasl_oauthbearer_assertion_claim_exp_seconds,
            self.sasl_oauthbearer_assertion_claim_nbf_seconds, self.sasl_oauthbearer_assertion_claim_jti_include)
        return AssertionSource(assertion_file=self.sasl_oauthbearer_assertion_file,
                               private_key_file=self.sasl_oauthbearer_assertion_private_key_file,
                               passphrase=self.sasl_oauthbearer_assertion_private_key_passphrase,
                               algorithm=self.sasl_oauthbearer_assertion_algorithm, claims=claims)

    @property
    def checks_cluster(self) -> bool:
        """Whether to detect misrouted connections (KIP-1242): as Java, only when a mismatch can
        lead somewhere, i.e. with metadata_recovery_strategy "rebootstrap"."""
        return self.metadata_cluster_check_enable and self.metadata_recovery_strategy == "rebootstrap"

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> ConnectionOptions:
        """Build from any object with the consumer's snake_case Kafka setting names (``*_ms`` in ms)."""
        values: dict[str, Any] = {}
        for name in ("client_id", "security_protocol", "ssl_context", "ssl_cafile", "ssl_certfile",
                     "ssl_keyfile", "ssl_password", "ssl_check_hostname", "sasl_mechanism",
                     "sasl_plain_username", "sasl_plain_password", "metadata_recovery_strategy",
                     "metadata_cluster_check_enable",
                     "sasl_oauth_token_provider", "sasl_oauthbearer_token_endpoint_url",
                     "sasl_oauthbearer_client_credentials_client_id",
                     "sasl_oauthbearer_client_credentials_client_secret", "sasl_oauthbearer_scope",
                     "sasl_oauthbearer_extensions", *ASSERTION_SETTINGS):
            if hasattr(settings, name):
                values[name] = getattr(settings, name)
        for name in ("request_timeout", "retry_backoff", "retry_backoff_max", "reconnect_backoff",
                     "reconnect_backoff_max", "bootstrap_resolve_timeout", "connections_max_idle", "metadata_max_age",
                     "metadata_recovery_rebootstrap_trigger"):
            ms = getattr(settings, name + "_ms", None)
            if ms is not None:
                values[name] = None if ms < 0 else ms / 1000.0
        if hasattr(settings, "allow_auto_create_topics"):
            values["allow_auto_topic_creation"] = settings.allow_auto_create_topics
        values.update(overrides)
        return cls(**values)
