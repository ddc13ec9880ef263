"""SaslHandshake (key 17): choose a SASL mechanism. Never flexible (KAFKA-9577 pins its versions)."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("mechanism", "string"),
)

RESPONSE = S(
    F("error_code", "int16"),
    F("mechanisms", A("string")),
)

# v0 is followed by raw SASL tokens; v1 by SaslAuthenticate requests.
SASL_HANDSHAKE = Api(17, "SaslHandshake", 0, 1, None, REQUEST, RESPONSE)
