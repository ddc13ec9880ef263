"""SyncGroup (key 14): the leader hands out assignments; every member receives its own."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", null="3+"),
    F("protocol_type", "string", "5+", null="5+"),  # KIP-559: checked against the group's
    F("protocol_name", "string", "5+", null="5+"),
    F("assignments", A(S(
        F("member_id", "string"),
        F("assignment", "bytes"),
    ))),
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("protocol_type", "string", "5+", null="5+"),
    F("protocol_name", "string", "5+", null="5+"),
    F("assignment", "bytes"),
)

SYNC_GROUP = Api(14, "SyncGroup", 0, 5, 4, REQUEST, RESPONSE)
