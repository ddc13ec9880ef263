"""DescribeShareGroupOffsets (key 90): a share group's start offset per partition (KIP-932).

Versions as Apache Kafka 4.3.1 defines them: v0-v1, flexible throughout. v1 adds each partition's
``lag`` (KIP-1226): how many records of the partition the group has yet to deliver and complete.
``topics`` null asks for every partition the group has a share-partition state for.
"""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("groups", A(S(
        F("group_id", "string"),
        F("topics", A(S(
            F("topic_name", "string"),
            F("partitions", A("int32")),
        )), null="0+"),
    ))),
)

RESPONSE = S(
    F("throttle_time_ms", "int32"),
    F("groups", A(S(
        F("group_id", "string"),
        F("topics", A(S(
            F("topic_name", "string"),
            F("topic_id", "uuid"),
            F("partitions", A(S(
                F("partition_index", "int32"),
                F("start_offset", "int64"),  # -1: the partition has no start offset yet
                F("leader_epoch", "int32"),
                F("lag", "int64", "1+", default=-1),  # -1: not known (and every v0 answer)
                F("error_code", "int16"),
                F("error_message", "string", null="0+"),
            ))),
        ))),
        F("error_code", "int16"),
        F("error_message", "string", null="0+"),
    ))),
)

DESCRIBE_SHARE_GROUP_OFFSETS = Api(90, "DescribeShareGroupOffsets", 0, 1, 0, REQUEST, RESPONSE)
