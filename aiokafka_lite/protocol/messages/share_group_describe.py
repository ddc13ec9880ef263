"""ShareGroupDescribe (key 77): KIP-932 share groups as their coordinator sees them.

v1 (Kafka 4.1) is the only version Kafka 4.3.1 serves. A share group has no target assignment to
move towards, so each member shows only what it is assigned now.
"""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("group_ids", A("string")),
    F("include_authorized_operations", "bool"),
)

ASSIGNMENT = S(
    F("topic_partitions", A(S(
        F("topic_id", "uuid"),
        F("topic_name", "string"),
        F("partitions", A("int32")),
    ))),
)

RESPONSE = S(
    F("throttle_time_ms", "int32"),
    F("groups", A(S(
        F("error_code", "int16"),
        F("error_message", "string", null="0+"),
        F("group_id", "string"),
        F("group_state", "string"),
        F("group_epoch", "int32"),
        F("assignment_epoch", "int32"),
        F("assignor_name", "string"),
        F("members", A(S(
            F("member_id", "string"),
            F("rack_id", "string", null="0+"),
            F("member_epoch", "int32"),
            F("client_id", "string"),
            F("client_host", "string"),
            F("subscribed_topic_names", A("string")),
            F("assignment", ASSIGNMENT),
        ))),
        F("authorized_operations", "int32", default=-2147483648),
    ))),
)

SHARE_GROUP_DESCRIBE = Api(77, "ShareGroupDescribe", 1, 1, 1, REQUEST, RESPONSE)
