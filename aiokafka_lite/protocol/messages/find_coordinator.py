"""FindCoordinator (key 10): which broker coordinates a group (or transaction, or share group)."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

# v0-3 look up one key; v4+ batch several (KIP-699), and the single-key fields are gone.
REQUEST = S(
    F("key", "string", "0-3"),
    F("key_type", "int8", "1+"),  # 0 group, 1 transaction, 2 share
    F("coordinator_keys", A("string"), "4+"),
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "0-3"),
    F("error_message", "string", "1-3", null="1-3"),
    F("node_id", "int32", "0-3"),
    F("host", "string", "0-3"),
    F("port", "int32", "0-3"),
    F("coordinators", A(S(
        F("key", "string", "4+"),
        F("node_id", "int32", "4+"),
        F("host", "string", "4+"),
        F("port", "int32", "4+"),
        F("error_code", "int16", "4+"),
        F("error_message", "string", "4+", null="4+"),
    )), "4+"),
)

FIND_COORDINATOR = Api(10, "FindCoordinator", 0, 6, 3, REQUEST, RESPONSE)
