"""AlterShareGroupOffsets (key 91): set a share group's start offset per partition (KIP-932).

v0 is the only version Apache Kafka 4.3.1 defines (flexible). The broker refuses it with
NON_EMPTY_GROUP while the group has members; the group-level error comes before the per-partition
results.
"""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("group_id", "string"),
    F("topics", A(S(
        F("topic_name", "string"),
        F("partitions", A(S(
            F("partition_index", "int32"),
            F("start_offset", "int64"),
        ))),
    ))),
)

RESPONSE = S(
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", null="0+"),
    F("responses", A(S(
        F("topic_name", "string"),
        F("topic_id", "uuid"),
        F("partitions", A(S(
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", null="0+"),
        ))),
    ))),
)

ALTER_SHARE_GROUP_OFFSETS = Api(91, "AlterShareGroupOffsets", 0, 0, 0, REQUEST, RESPONSE)
