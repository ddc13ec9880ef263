"""OffsetForLeaderEpoch (key 23): where a leader epoch ends in a partition's log (KIP-101, KIP-320)."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

# Versions 0-1 were removed in Kafka 4.0 (KIP-896). A consumer needs v3+: it sends replica_id -1;
# before v3 the broker took every caller for a debug consumer allowed past the high watermark.
REQUEST = S(
    F("replica_id", "int32", "3+", default=-2),
    F("topics", A(S(
        F("topic", "string"),
        F("partitions", A(S(
            F("partition", "int32"),
            F("current_leader_epoch", "int32", "2+", default=-1),
            F("leader_epoch", "int32"),
        ))),
    ))),
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "2+"),
    F("topics", A(S(
        F("topic", "string"),
        F("partitions", A(S(
            F("error_code", "int16"),
            F("partition", "int32"),
            F("leader_epoch", "int32", "1+", default=-1),
            F("end_offset", "int64"),
        ))),
    ))),
)

OFFSET_FOR_LEADER_EPOCH = Api(23, "OffsetForLeaderEpoch", 2, 4, 4, REQUEST, RESPONSE)
