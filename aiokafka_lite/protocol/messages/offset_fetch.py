"""OffsetFetch (key 9): read a group's committed positions (several groups at once from v8)."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

# Version 0 was removed in Kafka 4.0 (KIP-896). A null topic list (v2+) means "all topics".
REQUEST = S(
    F("group_id", "string", "0-7"),
    F("topics", A(S(
        F("name", "string", "0-7"),
        F("partition_indexes", A("int32"), "0-7"),
    )), "0-7", null="2-7"),
    F("groups", A(S(
        F("group_id", "string", "8+"),
        F("member_id", "string", "9+", null="9+"),  # KIP-848 members only
        F("member_epoch", "int32", "9+", default=-1),
        F("topics", A(S(
            F("name", "string", "8-9"),
            F("topic_id", "uuid", "10+"),
            F("partition_indexes", A("int32"), "8+"),
        )), "8+", null="8+"),
    )), "8+"),
    F("require_stable", "bool", "7+"),
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "3+"),
    F("topics", A(S(
        F("name", "string", "0-7"),
        F("partitions", A(S(
            F("partition_index", "int32", "0-7"),
            F("committed_offset", "int64", "0-7"),
            F("committed_leader_epoch", "int32", "5-7", default=-1),
            F("metadata", "string", "0-7", null="0-7"),
            F("error_code", "int16", "0-7"),
        )), "0-7"),
    )), "0-7"),
    F("error_code", "int16", "2-7"),
    F("groups", A(S(
        F("group_id", "string", "8+"),
        F("topics", A(S(
            F("name", "string", "8-9"),
            F("topic_id", "uuid", "10+"),
            F("partitions", A(S(
                F("partition_index", "int32", "8+"),
                F("committed_offset", "int64", "8+"),
                F("committed_leader_epoch", "int32", "8+", default=-1),
                F("metadata", "string", "8+", null="8+"),
                F("error_code", "int16", "8+"),
            )), "8+"),
        )), "8+"),
        F("error_code", "int16", "8+"),
    )), "8+"),
)

OFFSET_FETCH = Api(9, "OffsetFetch", 1, 10, 6, REQUEST, RESPONSE)
