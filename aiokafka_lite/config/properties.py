"""Java and librdkafka property names: which setting each dotted name sets, and how its text reads.

``from_properties`` takes the names users bring from Java or librdkafka ("group.id",
"sasl.username"), converts property-file text to each setting's type, and refuses Java-only
settings by name (saying what to set instead where there is an equivalent), never ignoring one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiokafka_lite.config.security import java_only_hint
from aiokafka_lite.config.settings import FIELD_CHECKS, FIELD_NAMES
from aiokafka_lite.config.spelling import invalid, spelled
from aiokafka_lite.config.validation import unknown
from aiokafka_lite.errors import ConfigError

__all__ = ["settings_from_properties"]

_PROPERTY_NAMES: dict[str, str] = {name.replace("_", "."): name for name in FIELD_NAMES} | {
    "sasl.username": "sasl_plain_username",       # librdkafka
    "sasl.password": "sasl_plain_password",       # librdkafka
    "sasl.mechanisms": "sasl_mechanism",          # librdkafka
    "ssl.ca.location": "ssl_cafile",              # librdkafka
    "ssl.certificate.location": "ssl_certfile",   # librdkafka
    "ssl.key.location": "ssl_keyfile",            # librdkafka
    "ssl.key.password": "ssl_password",           # Java and librdkafka
    # Java before 4.x took the client id and secret from sasl.jaas.config; librdkafka's names.
    "sasl.oauthbearer.client.id": "sasl_oauthbearer_client_credentials_client_id",
    "sasl.oauthbearer.client.secret": "sasl_oauthbearer_client_credentials_client_secret",
    "sasl.oauthbearer.extensions": "sasl_oauthbearer_extensions",
}
# Java's and librdkafka's switches to the client-credentials flow, which the token endpoint implies here.
_OAUTH_FLOW_SWITCHES = {
    ("sasl.login.callback.handler.class",
     "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"),
    ("sasl.oauthbearer.method", "oidc"),  # librdkafka
    ("sasl.oauthbearer.jwt.retriever.class",
     "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever"),  # Java 4.1+
    ("sasl.oauthbearer.jwt.retriever.class", "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever"),
}
# Java 4.1+'s retriever class naming the jwt-bearer grant (KIP-1139): sasl_oauthbearer_grant_type here.
_JWT_BEARER_RETRIEVER = ("sasl.oauthbearer.jwt.retriever.class",
                         "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever")
# AWS's aws-msk-iam-auth handler for Java: a token provider here, which no property can name.
_MSK_IAM_HANDLER = "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"
_HOSTNAME_CHECK_PROPERTY = "ssl.endpoint.identification.algorithm"

# Java consumer settings (and prefixes) with no equivalent here: rejected, never silently ignored.
_UNSUPPORTED_PROPERTIES = frozenset({
    "interceptor.classes", "metric.reporters", "metrics.num.samples", "metrics.recording.level",
    "metrics.sample.window.ms", "auto.include.jmx.reporter",
    "client.dns.lookup", "send.buffer.bytes", "receive.buffer.bytes",
    "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms",
    "security.providers", "ssl.protocol", "ssl.enabled.protocols",
    "ssl.cipher.suites", "ssl.provider", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation", "ssl.engine.factory.class", "sasl.jaas.config",
    "sasl.client.callback.handler.class",
})
_UNSUPPORTED_PREFIXES = ("ssl.keystore.", "ssl.truststore.", "sasl.kerberos.", "sasl.login.",
                         "sasl.oauthbearer.")


def _property_field(key: str) -> str:
    """The field a dotted property sets; unknown or unsupported ones raise."""
    if key == _HOSTNAME_CHECK_PROPERTY:
        return "ssl_check_hostname"
    if key in _PROPERTY_NAMES:
        return _PROPERTY_NAMES[key]
    hint = java_only_hint(key, spelled, dotted=True)
    if hint is not None:
        raise ConfigError(f"unsupported setting {key!r}: {hint}")
    if key in _UNSUPPORTED_PROPERTIES or key.startswith(_UNSUPPORTED_PREFIXES):
        raise ConfigError(f"unsupported setting {key!r}: a Java consumer setting aiokafka-lite does "
                          "not support")
    name = _PROPERTY_NAMES.get(key) or (key if key in FIELD_NAMES else None)
    if name is None:
        raise unknown(key, _PROPERTY_NAMES, "property")
    return name


def _property_value(name: str, key: str, value: Any) -> Any:
    """A property's value for its field (property-file text converted)."""
    if key == _HOSTNAME_CHECK_PROPERTY:
        return _hostname_check(value)
    if isinstance(value, str):
        return FIELD_CHECKS[name].parse(name, value)
    return value


def _hostname_check(value: Any) -> bool:
    if isinstance(value, str) and value.strip().lower() in ("https", ""):
        return value.strip().lower() == "https"
    raise invalid(_HOSTNAME_CHECK_PROPERTY, value, "'https' (check host names) or '' (do not)")


def settings_from_properties(properties: Mapping[str, Any], spelling: dict[str, str]) -> dict[str, Any]:
    """Settings by field name from dotted properties; ``spelling`` records each name as written.

    Exact field names are accepted too, for values with no dotted form (``ssl_context``).
    """
    settings: dict[str, Any] = {}
    for key, value in properties.items():
        if (key, str(value).strip()) in _OAUTH_FLOW_SWITCHES:
            continue
        if str(value).strip() == _MSK_IAM_HANDLER:
            raise ConfigError(f"unsupported setting {key!r}={_MSK_IAM_HANDLER!r}: Amazon MSK IAM is "
                              "sasl_oauth_token_provider=aiokafka_lite.msk_iam.MskIamTokenProvider(region) here "
                              "(extra msk-iam), with sasl_mechanism='OAUTHBEARER'; a provider is no property")
        if (key, str(value).strip()) == _JWT_BEARER_RETRIEVER:
            key, value = "sasl.oauthbearer.grant.type", "jwt_bearer"
        name = _property_field(key)
        if name in settings:
            raise ConfigError(f"setting {spelling[name]!r} given twice (again as {key!r})")
        spelling[name] = key
        settings[name] = _property_value(name, key, value)
    return settings
