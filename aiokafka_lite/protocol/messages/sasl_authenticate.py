"""SaslAuthenticate (key 36): one SASL token exchange, framed as a Kafka request."""

from __future__ import annotations

from ..api import Api
from ..schema import F, S

REQUEST = S(
    F("auth_bytes", "bytes"),
)

RESPONSE = S(
    F("error_code", "int16"),
    F("error_message", "string", null="0+"),
    F("auth_bytes", "bytes"),
    F("session_lifetime_ms", "int64", "1+"),  # re-authenticate before this lapses (KIP-368)
)

SASL_AUTHENTICATE = Api(36, "SaslAuthenticate", 0, 2, 2, REQUEST, RESPONSE)
