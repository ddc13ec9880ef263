"""Heartbeat (key 12): a classic group member says it is alive and learns of rebalances."""

from __future__ import annotations

from ..api import Api
from ..schema import F, S

REQUEST = S(
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", null="3+"),
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
)

HEARTBEAT = Api(12, "Heartbeat", 0, 4, 4, REQUEST, RESPONSE)
