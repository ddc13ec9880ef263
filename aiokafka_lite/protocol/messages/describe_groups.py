"""DescribeGroups (key 15): state, protocol and members of classic groups."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("groups", A("string")),
    F("include_authorized_operations", "bool", "3+"),
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "1+"),
    F("groups", A(S(
        F("error_code", "int16"),
        F("error_message", "string", "6+", null="6+"),
        F("group_id", "string"),
        F("group_state", "string"),
        F("protocol_type", "string"),
        F("protocol_data", "string"),  # the assignor's name, filled in only while Stable
        F("members", A(S(
            F("member_id", "string"),
            F("group_instance_id", "string", "4+", null="4+"),
            F("client_id", "string"),
            F("client_host", "string"),
            F("member_metadata", "bytes"),
            F("member_assignment", "bytes"),
        ))),
        F("authorized_operations", "int32", "3+", default=-2147483648),
    ))),
)

DESCRIBE_GROUPS = Api(15, "DescribeGroups", 0, 6, 5, REQUEST, RESPONSE)
