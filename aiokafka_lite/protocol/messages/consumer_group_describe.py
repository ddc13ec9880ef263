"""ConsumerGroupDescribe (key 69): groups of the KIP-848 "consumer" protocol, as the coordinator sees them.

Versions as Kafka 4.3.1 defines them: v0-v1, flexible throughout, no tagged fields beyond the empty
sections. v1 adds only the members' ``member_type`` (KIP-1099); the request is the same in both.
Unlike DescribeGroups there are no opaque assignor bytes: subscriptions and assignments are
structured, the broker's assignor having computed them (KIP-848).
"""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("group_ids", A("string")),
    F("include_authorized_operations", "bool"),
)

# The "Assignment" common struct: partitions by topic id, with the name resolved by the broker.
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
        F("assignment_epoch", "int32"),  # the group epoch the target assignment was computed at
        F("assignor_name", "string"),
        F("members", A(S(
            F("member_id", "string"),  # a UUID the client made up, sent as a string
            F("instance_id", "string", null="0+"),
            F("rack_id", "string", null="0+"),
            F("member_epoch", "int32"),
            F("client_id", "string"),
            F("client_host", "string"),
            F("subscribed_topic_names", A("string")),
            F("subscribed_topic_regex", "string", null="0+"),
            F("assignment", ASSIGNMENT),  # what the member owns now
            F("target_assignment", ASSIGNMENT),  # where the group's assignor wants it to go
            # -1 unknown (a v0 answer), 0 a classic member still in a migrating group, 1 consumer.
            F("member_type", "int8", "1+", default=-1),
        ))),
        F("authorized_operations", "int32", default=-2147483648),
    ))),
)

CONSUMER_GROUP_DESCRIBE = Api(69, "ConsumerGroupDescribe", 0, 1, 0, REQUEST, RESPONSE)
