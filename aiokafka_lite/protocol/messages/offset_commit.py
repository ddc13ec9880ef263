"""OffsetCommit (key 8): store a group's consumed positions."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

# Versions 0-1 were removed in Kafka 4.0 (KIP-896); field ranges keep the spec's own numbers.
REQUEST = S(
    F("group_id", "string"),
    # The classic protocol's generation, or the member epoch under KIP-848.
    F("generation_id_or_member_epoch", "int32", "1+", default=-1),
    F("member_id", "string", "1+"),
    F("group_instance_id", "string", "7+", null="7+"),
    F("retention_time_ms", "int64", "2-4", default=-1),  # v5+: broker config only
    F("topics", A(S(
        F("name", "string", "0-9"),
        F("topic_id", "uuid", "10+"),  # v10 replaces names with ids
        F("partitions", A(S(
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", "6+", default=-1),
            F("committed_metadata", "string", null="0+"),
        ))),
    ))),
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "3+"),
    F("topics", A(S(
        F("name", "string", "0-9"),
        F("topic_id", "uuid", "10+"),
        F("partitions", A(S(
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ))),
    ))),
)

OFFSET_COMMIT = Api(8, "OffsetCommit", 2, 10, 8, REQUEST, RESPONSE)
