"""JoinGroup (key 11): enter a classic consumer group's rebalance and learn the leader's choice."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("group_id", "string"),
    F("session_timeout_ms", "int32"),
    # Absent in v0, where the coordinator uses session_timeout_ms instead.
    F("rebalance_timeout_ms", "int32", "1+", default=-1),
    F("member_id", "string"),
    F("group_instance_id", "string", "5+", null="5+"),  # static membership (KIP-345)
    F("protocol_type", "string"),
    F("protocols", A(S(
        F("name", "string"),
        F("metadata", "bytes"),
    ))),
    F("reason", "string", "8+", null="8+"),  # KIP-800
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "2+"),
    F("error_code", "int16"),
    F("generation_id", "int32", default=-1),
    F("protocol_type", "string", "7+", null="7+"),  # KIP-559
    F("protocol_name", "string", null="7+"),
    F("leader", "string"),
    F("skip_assignment", "bool", "9+"),
    F("member_id", "string"),
    F("members", A(S(
        F("member_id", "string"),
        F("group_instance_id", "string", "5+", null="5+"),
        F("metadata", "bytes"),
    ))),
)

JOIN_GROUP = Api(11, "JoinGroup", 0, 9, 6, REQUEST, RESPONSE)
