"""LeaveGroup (key 13): members leave a classic group (batched from v3)."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("group_id", "string"),
    F("member_id", "string", "0-2"),
    F("members", A(S(
        F("member_id", "string", "3+"),
        F("group_instance_id", "string", "3+", null="3+"),
        F("reason", "string", "5+", null="5+"),  # KIP-800
    )), "3+"),
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("members", A(S(
        F("member_id", "string", "3+"),
        F("group_instance_id", "string", "3+", null="3+"),
        F("error_code", "int16", "3+"),
    )), "3+"),
)

LEAVE_GROUP = Api(13, "LeaveGroup", 0, 5, 4, REQUEST, RESPONSE)
