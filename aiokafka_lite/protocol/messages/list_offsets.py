"""ListOffsets (key 2): the offset for a timestamp, or the log's start/end (negative timestamps)."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

# Version 0 was removed in Kafka 4.0 (KIP-896). Special timestamps: -1 latest, -2 earliest,
# -3 max timestamp (v7), -4 local log start (v8), -5 last tiered (v9), -6 earliest pending upload (v11).
REQUEST = S(
    F("replica_id", "int32"),  # -1 for consumers; the spec gives no default
    F("isolation_level", "int8", "2+"),
    F("topics", A(S(
        F("name", "string"),
        F("partitions", A(S(
            F("partition_index", "int32"),
            F("current_leader_epoch", "int32", "4+", default=-1),
            F("timestamp", "int64"),
        ))),
    ))),
    F("timeout_ms", "int32", "10+"),  # for remote (tiered) reads, KIP-1075
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "2+"),
    F("topics", A(S(
        F("name", "string"),
        F("partitions", A(S(
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("timestamp", "int64", "1+", default=-1),
            F("offset", "int64", "1+", default=-1),
            F("leader_epoch", "int32", "4+", default=-1),
        ))),
    ))),
)

LIST_OFFSETS = Api(2, "ListOffsets", 1, 11, 6, REQUEST, RESPONSE)
