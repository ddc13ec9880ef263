"""OffsetDelete (key 47, KIP-496): delete a consumer group's committed offsets of some partitions.

v0 is the only version Apache Kafka 4.3.1 and 4.4.0 define (not flexible). Sent to the group's
coordinator; the broker refuses a partition of a topic the group is subscribed to
(GROUP_SUBSCRIBED_TO_TOPIC) and answers the others; a group-level error (GROUP_ID_NOT_FOUND,
NON_EMPTY_GROUP for a classic group without a known protocol) comes with no topics.
"""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("group_id", "string"),
    F("topics", A(S(
        F("name", "string"),
        F("partitions", A(S(
            F("partition_index", "int32"),
        ))),
    ))),
)

RESPONSE = S(
    F("error_code", "int16"),
    F("throttle_time_ms", "int32"),
    F("topics", A(S(
        F("name", "string"),
        F("partitions", A(S(
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ))),
    ))),
)

OFFSET_DELETE = Api(47, "OffsetDelete", 0, 0, None, REQUEST, RESPONSE)
