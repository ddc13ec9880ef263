"""The settings table: every consumer setting with its type, default, check and one-line description.

Names are Kafka's consumer settings in snake_case (``max.poll.interval.ms`` -> ``max_poll_interval_ms``)
and defaults are the Java KafkaConsumer's (KIP-735: 45 s session timeout). Each field carries its own
check and its description in its metadata, so validation and the documentation's settings table
(:func:`settings_table`) come from the same place. :class:`ConsumerConfig` is these fields, validated.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from aiokafka_lite.config.checks import (
    DEFAULT_PORT,
    INT64_MAX,
    Assignors,
    Bool,
    Check,
    Choice,
    GroupInstanceId,
    Int,
    IntOrWord,
    OffsetReset,
    OptionalCallable,
    OptionalSslContext,
    Ratio,
    RemoteAssignor,
    SaslExtensions,
    Servers,
    Text,
    TokenProvider,
)

__all__ = ["DEFAULT_ASSIGNORS", "DEFAULT_SERVERS", "FIELD_CHECKS", "FIELD_NAMES", "SETTINGS_TABLE",
           "SETTING_DEFAULTS", "Deserializer", "SettingFields", "SettingRow", "settings_table"]

Deserializer = Callable[[bytes | None], Any]

DEFAULT_SERVERS = (("localhost", DEFAULT_PORT),)
# Java's default since 3.0 (KIP-726): range, with cooperative-sticky listed for a later rolling upgrade.
DEFAULT_ASSIGNORS = ("range", "cooperative-sticky")


def _meta(check: Check, doc: str) -> dict[str, Any]:
    return {"check": check, "doc": doc}


@dataclass(frozen=True, slots=True, repr=False)
class SettingFields:
    """The settings as dataclass fields, unchecked; :class:`ConsumerConfig` adds the checks."""

    bootstrap_servers: tuple[tuple[str, int], ...] = field(default=DEFAULT_SERVERS, metadata=_meta(
        Servers(), "Brokers to bootstrap from ('h1:9092,h2:9092' or a list); the rest are discovered."))
    client_id: str = field(default="aiokafka-lite", metadata=_meta(
        Text(optional=False), "Name sent with every request, for broker logs and quotas."))
    group_id: str | None = field(default=None, metadata=_meta(
        Text(non_empty=True), "Consumer group; None means no group (assign() only, no commits)."))
    group_instance_id: str | None = field(default=None, metadata=_meta(
        GroupInstanceId(), "Static membership id (KIP-345): a restart within session_timeout_ms "
        "keeps the assignment without a rebalance. Under group_protocol='consumer' only after a "
        "close(): after a crash the broker refuses the id (UnreleasedInstanceIdError) until the "
        "old member's session lapses. Needs group_id."))
    session_timeout_ms: int = field(default=45000, metadata=_meta(
        Int(1), "Time without heartbeats after which the coordinator evicts this member; must be "
        "within the broker's group.min/max.session.timeout.ms."))
    heartbeat_interval_ms: int = field(default=3000, metadata=_meta(
        Int(1), "Time between heartbeats; below session_timeout_ms, ideally at most a third of it."))
    max_poll_interval_ms: int = field(default=300000, metadata=_meta(
        Int(1), "Longest gap allowed between poll() calls before this member leaves the group; "
        "also the rebalance timeout sent in JoinGroup."))
    max_poll_records: int = field(default=500, metadata=_meta(Int(1), "Most records one poll() returns."))
    request_timeout_ms: int = field(default=30000, metadata=_meta(
        Int(1), "Time to wait for a broker's response to one request (JoinGroup waits longer)."))
    default_api_timeout_ms: int = field(default=60000, metadata=_meta(
        Int(1), "Timeout of awaitable methods (commit, committed, position...) when none is given."))
    retry_backoff_ms: int = field(default=100, metadata=_meta(
        Int(0, INT64_MAX), "First wait before retrying a failed request; 0 retries at once."))
    retry_backoff_max_ms: int = field(default=1000, metadata=_meta(
        Int(0, INT64_MAX), "Cap of the exponential retry backoff (KIP-580); below retry_backoff_ms, "
        "a static backoff of this much (as Java)."))
    reconnect_backoff_ms: int = field(default=50, metadata=_meta(
        Int(0, INT64_MAX), "First wait before reconnecting to a broker."))
    reconnect_backoff_max_ms: int = field(default=1000, metadata=_meta(
        Int(0, INT64_MAX), "Cap of the exponential reconnect backoff."))
    bootstrap_resolve_timeout_ms: int = field(default=0, metadata=_meta(
        Int(0, INT64_MAX), "KIP-909: with every bootstrap_servers name failing to resolve, 0 fails "
        "start() at once (a ConfigError, as Java's default); a positive value keeps retrying the "
        "names this long from the first round none resolved, then fails with "
        "BootstrapResolutionError; a name that resolves starts it over. start()'s own timeout "
        "(default_api_timeout_ms) still ends start() first when shorter."))
    connections_max_idle_ms: int = field(default=540000, metadata=_meta(
        Int(1, INT64_MAX, special=(-1,)), "Close connections idle this long; -1 never does."))
    metadata_max_age_ms: int = field(default=300000, metadata=_meta(
        Int(1, INT64_MAX), "Refresh cluster metadata at least this often; also how soon a pattern "
        "subscription sees new topics."))
    metadata_recovery_strategy: str = field(default="rebootstrap", metadata=_meta(
        Choice("rebootstrap", "none"), "When no known broker answers for metadata: rebootstrap "
        "(bootstrap_servers again, KIP-899) or none (keep trying the known brokers)."))
    metadata_recovery_rebootstrap_trigger_ms: int = field(default=300000, metadata=_meta(
        Int(0, INT64_MAX), "With rebootstrap: also bootstrap again after this long without "
        "metadata from any known broker (KIP-1102)."))
    metadata_cluster_check_enable: bool = field(default=True, metadata=_meta(
        Bool(), "KIP-1242, misrouted connections: a connection to a known broker names the cluster "
        "id and node id it is meant for (ApiVersions v5, once a broker listed it; a Kafka 4.4+ broker "
        "that is not that node of that cluster answers REBOOTSTRAP_REQUIRED), and a known broker's "
        "Metadata must name the cluster id we know; either mismatch rebootstraps, with one WARNING. "
        "False: neither (as Java, which sends the ids only when this is true). Ignored with "
        "metadata_recovery_strategy none."))
    enable_auto_commit: bool = field(default=True, metadata=_meta(
        Bool(), "Commit the offsets of handed-out records in the background (needs group_id)."))
    auto_commit_interval_ms: int = field(default=5000, metadata=_meta(
        Int(1), "Time between automatic commits."))
    auto_offset_reset: str = field(default="latest", metadata=_meta(
        OffsetReset(),
        "Where to start without a valid committed offset: earliest, latest, none (raise), or "
        "by_duration: and an ISO-8601 duration (KIP-1106: the first record at most that old, e.g. "
        "by_duration:PT1H; the latest offset when every record is older). "
        "With none, a truncated log (KIP-320) raises LogTruncationError instead of going back to "
        "where it diverges."))
    isolation_level: str = field(default="read_uncommitted", metadata=_meta(
        Choice("read_uncommitted", "read_committed"),
        "read_committed hides aborted and still-open transactional records."))
    fetch_min_bytes: int = field(default=1, metadata=_meta(
        Int(0), "Bytes a fetch response should hold before the broker answers."))
    fetch_max_wait_ms: int = field(default=500, metadata=_meta(
        Int(0), "Longest time the broker holds a fetch waiting for fetch_min_bytes; must be "
        "below request_timeout_ms."))
    fetch_max_bytes: int = field(default=52428800, metadata=_meta(
        Int(0), "Soft cap on one fetch response (a bigger first batch still comes through)."))
    max_partition_fetch_bytes: int = field(default=1048576, metadata=_meta(
        Int(0), "Soft cap on the data per partition in one fetch response."))
    fetch_connections_per_broker: int | str = field(default="auto", metadata=_meta(
        IntOrWord(1, 8, "auto"), "Connections per broker that fetches use, each for its own share of that "
        "broker's partitions with its own fetch session, so that fetches to one broker overlap "
        "(as the broker's num.replica.fetchers does). auto: one, and a second one to a broker while "
        "its fetch answers come back at once and about full (the consumer is reading a backlog), "
        "back to one seconds after they stop; a number: exactly that many. Each connection uses a "
        "fetch session slot on the broker. Not a Java setting (Java uses one)."))
    check_crcs: bool = field(default=True, metadata=_meta(Bool(), "Verify each record batch's CRC32C."))
    exclude_internal_topics: bool = field(default=True, metadata=_meta(
        Bool(), "Keep internal topics (__consumer_offsets) out of pattern subscriptions."))
    allow_auto_create_topics: bool = field(default=True, metadata=_meta(
        Bool(), "Let metadata requests create subscribed topics, if the broker allows it."))
    partition_assignment_strategy: tuple[str, ...] = field(default=DEFAULT_ASSIGNORS, metadata=_meta(
        Assignors(), "Assignors in order of preference: range, roundrobin, cooperative-sticky."))
    client_rack: str = field(default="", metadata=_meta(
        Text(optional=False), "Rack of this client, to fetch from the closest replica (KIP-392)."))
    key_deserializer: Deserializer | None = field(default=None, metadata=_meta(
        OptionalCallable(), "Callable turning key bytes (or None) into the record key."))
    value_deserializer: Deserializer | None = field(default=None, metadata=_meta(
        OptionalCallable(), "Callable turning value bytes (or None) into the record value."))
    security_protocol: str = field(default="PLAINTEXT", metadata=_meta(
        Choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", upper=True),
        "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."))
    ssl_context: ssl.SSLContext | None = field(default=None, metadata=_meta(
        OptionalSslContext(), "A ready SSLContext; when set, the ssl_* file settings must be unset."))
    ssl_cafile: str | None = field(default=None, metadata=_meta(
        Text(), "CA bundle to verify brokers (default: the system's CAs)."))
    ssl_certfile: str | None = field(default=None, metadata=_meta(
        Text(), "Client certificate (PEM) for mutual TLS."))
    ssl_keyfile: str | None = field(default=None, metadata=_meta(
        Text(), "Private key of ssl_certfile, if in a separate file."))
    ssl_password: str | None = field(default=None, repr=False, metadata=_meta(
        Text(), "Password of the client's private key."))
    ssl_check_hostname: bool = field(default=True, metadata=_meta(
        Bool(), "Check the broker's certificate names its host "
        "(ssl.endpoint.identification.algorithm=https)."))
    sasl_mechanism: str = field(default="PLAIN", metadata=_meta(
        Choice("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", upper=True),
        "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER."))
    sasl_plain_username: str | None = field(default=None, metadata=_meta(Text(), "SASL user name."))
    sasl_plain_password: str | None = field(default=None, repr=False, metadata=_meta(
        Text(), "SASL password."))
    sasl_oauth_token_provider: Any = field(default=None, metadata=_meta(
        TokenProvider(), "OAUTHBEARER: an async callable returning an OAuthBearerToken (token, expiry, "
        "extensions); called again at about 80% of each token's lifetime. Not a Java setting."))
    sasl_oauthbearer_token_endpoint_url: str | None = field(default=None, metadata=_meta(
        Text(), "OAUTHBEARER without a provider: the OAuth token endpoint of the client-credentials "
        "grant (KIP-768) or of the jwt-bearer grant (KIP-1139)."))
    sasl_oauthbearer_client_credentials_client_id: str | None = field(default=None, metadata=_meta(
        Text(), "Client id for the token endpoint (the JAAS option clientId before Kafka 4.x)."))
    sasl_oauthbearer_client_credentials_client_secret: str | None = field(default=None, repr=False, metadata=_meta(
        Text(), "Client secret for the token endpoint (the JAAS option clientSecret)."))
    sasl_oauthbearer_scope: str | None = field(default=None, metadata=_meta(
        Text(), "Scope asked of the token endpoint (the JAAS option scope)."))
    sasl_oauthbearer_grant_type: str = field(default="client_credentials", metadata=_meta(
        Choice("client_credentials", "jwt_bearer"), "OAUTHBEARER token endpoint grant: client_credentials "
        "(KIP-768), or jwt_bearer, a signed JWT as the grant (KIP-1139; Java's sasl.oauthbearer.jwt."
        "retriever.class=...JwtBearerJwtRetriever)."))
    sasl_oauthbearer_assertion_file: str | None = field(default=None, metadata=_meta(
        Text(), "A file holding a ready JWT assertion, read for each token request: the jwt_bearer "
        "grant's assertion, or the client_credentials client assertion (KIP-1258) instead of a secret."))
    sasl_oauthbearer_assertion_private_key_file: str | None = field(default=None, metadata=_meta(
        Text(), "PEM private key (PKCS#8) to sign the assertion with, each token request anew "
        "(needs the extra oauth-assertion); unused when sasl_oauthbearer_assertion_file is set."))
    sasl_oauthbearer_assertion_private_key_passphrase: str | None = field(default=None, repr=False,
                                                                          metadata=_meta(
        Text(), "Passphrase of an encrypted sasl_oauthbearer_assertion_private_key_file."))
    sasl_oauthbearer_assertion_algorithm: str = field(default="RS256", metadata=_meta(
        Choice("RS256", "ES256", upper=True), "Signature of the assertion signed here: RS256 (an RSA key) "
        "or ES256 (an EC P-256 key)."))
    sasl_oauthbearer_assertion_claim_iss: str | None = field(default=None, metadata=_meta(
        Text(), "The iss claim of the assertion signed here (for a client assertion: the client id)."))
    sasl_oauthbearer_assertion_claim_sub: str | None = field(default=None, metadata=_meta(
        Text(), "The sub claim of the assertion signed here (for a client assertion: the client id)."))
    sasl_oauthbearer_assertion_claim_aud: str | None = field(default=None, metadata=_meta(
        Text(), "The aud claim of the assertion signed here (usually the identity provider's issuer or "
        "token endpoint URL)."))
    sasl_oauthbearer_assertion_claim_exp_seconds: int = field(default=300, metadata=_meta(
        Int(1, 86400), "Lifetime of the assertion signed here: exp is this many seconds after iat."))
    sasl_oauthbearer_assertion_claim_nbf_seconds: int = field(default=60, metadata=_meta(
        Int(0, 3600), "nbf of the assertion signed here: this many seconds before iat (clock skew)."))
    sasl_oauthbearer_assertion_claim_jti_include: bool = field(default=False, metadata=_meta(
        Bool(), "Give the assertion signed here a random jti claim, so the identity provider can refuse "
        "a replayed one."))
    sasl_oauthbearer_extensions: dict[str, str] | None = field(default=None, metadata=_meta(
        SaslExtensions(), "SASL extensions sent with every OAUTHBEARER token (KIP-342; the JAAS options "
        "extension_<name>), e.g. {'logicalCluster': 'lkc-1'}; text 'name=value,name=value'."))
    group_protocol: str = field(default="classic", metadata=_meta(
        Choice("classic", "consumer"), "Group protocol: classic (JoinGroup/SyncGroup) or consumer "
        "(KIP-848: the broker assigns; Kafka 4.0+)."))
    group_remote_assignor: str | None = field(default=None, metadata=_meta(
        RemoteAssignor(), "With group_protocol='consumer': the broker-side assignor, uniform or range; "
        "None lets the broker choose (group.consumer.assignors)."))
    share_acknowledgement_mode: str = field(default="implicit", metadata=_meta(
        Choice("implicit", "explicit"), "ShareConsumer only (KIP-932, Java's share.acknowledgement.mode): "
        "implicit accepts the records a task got when it polls again; explicit wants acknowledge() for "
        "each. The Consumer ignores it."))
    share_acquire_mode: str = field(default="batch_optimized", metadata=_meta(
        Choice("batch_optimized", "record_limit"), "ShareConsumer only (KIP-1206, Java's share.acquire.mode): "
        "batch_optimized lets the broker acquire whole batches, more than max_poll_records per fetch; "
        "record_limit has it acquire at most max_poll_records (ShareFetch v2: Kafka 4.2+). The Consumer ignores it."))
    share_lock_renewal_max_ms: int = field(default=300000, metadata=_meta(
        Int(0), "ShareConsumer only (no Java setting): how long a record's acquisition lock is renewed "
        "(KIP-1222 RENEW, before it lapses) while a handler works on it (process_share(), renewing(), "
        "acknowledging()) or while it waits to be handed out; after that it lapses. 0 never renews."))
    share_lag_refresh_ms: int = field(default=30000, metadata=_meta(
        Int(0), "ShareConsumer only (no Java setting): how often, while partitions are assigned, the share "
        "group's lag per assigned partition is asked of its coordinator (DescribeShareGroupOffsets v1, "
        "KIP-1226: Kafka 4.2+) for metrics()['lag'] and the Prometheus partition_lag family. 0 never asks. "
        "The Consumer ignores it."))
    heartbeat_mode: str = field(default="task", metadata=_meta(
        Choice("task", "thread"), "Heartbeat from an asyncio task, or from a thread that keeps "
        "the session alive while the event loop is blocked."))
    stall_warning_ratio: float = field(default=0.5, metadata=_meta(
        Ratio(), "Warn when the event loop stalls longer than this fraction of session_timeout_ms."))
    enable_metrics_push: bool = field(default=True, metadata=_meta(
        Bool(), "Push client metrics to the cluster when its brokers ask for them (KIP-714, Java's "
        "enable.metrics.push): the metrics named by the broker's client-metrics subscriptions, at the "
        "interval they set; nothing is sent while none matches this client."))


FIELD_NAMES: tuple[str, ...] = tuple(s.name for s in fields(SettingFields))
SETTING_DEFAULTS: dict[str, Any] = {s.name: s.default for s in fields(SettingFields)}
FIELD_CHECKS: dict[str, Check] = {s.name: s.metadata["check"] for s in fields(SettingFields)}


class SettingRow(NamedTuple):
    name: str
    default: Any
    description: str


def settings_table() -> list[SettingRow]:
    """(name, default, description) for every setting, in declaration order, for the README."""
    return [SettingRow(s.name, s.default, s.metadata["doc"]) for s in fields(SettingFields)]


SETTINGS_TABLE: tuple[SettingRow, ...] = tuple(settings_table())
