"""Fetch (key 1): record batches from partition leaders. ``records`` decode as zero-copy memoryviews."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

# Versions 0-3 were removed in Kafka 4.0 (KIP-896). v13+ name topics by id only (KIP-516).
REQUEST = S(
    F("cluster_id", "string", "12+", null="12+", tag=0),
    F("replica_id", "int32", "0-14", default=-1),  # moved into replica_state in v15 (KIP-903)
    F("replica_state", S(
        F("replica_id", "int32", "15+", default=-1),
        F("replica_epoch", "int64", "15+", default=-1),
    ), "15+", tag=1),
    F("max_wait_ms", "int32"),
    F("min_bytes", "int32"),
    F("max_bytes", "int32", "3+", default=0x7FFFFFFF),
    F("isolation_level", "int8", "4+"),
    F("session_id", "int32", "7+"),
    F("session_epoch", "int32", "7+", default=-1),
    F("topics", A(S(
        F("topic", "string", "0-12"),
        F("topic_id", "uuid", "13+"),
        F("partitions", A(S(
            F("partition", "int32"),
            F("current_leader_epoch", "int32", "9+", default=-1),
            F("fetch_offset", "int64"),
            F("last_fetched_epoch", "int32", "12+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F("partition_max_bytes", "int32"),
            F("replica_directory_id", "uuid", "17+", tag=0),
            F("high_watermark", "int64", "18+", tag=1, default=0x7FFFFFFFFFFFFFFF),
        ))),
    ))),
    F("forgotten_topics_data", A(S(
        F("topic", "string", "7-12"),
        F("topic_id", "uuid", "13+"),
        F("partitions", A("int32"), "7+"),
    )), "7+"),
    F("rack_id", "string", "11+"),
)

_NODE_ENDPOINT = S(
    F("node_id", "int32", "16+"),
    F("host", "string", "16+"),
    F("port", "int32", "16+"),
    F("rack", "string", "16+", null="16+"),
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "7+"),
    F("session_id", "int32", "7+"),
    F("responses", A(S(
        F("topic", "string", "0-12"),
        F("topic_id", "uuid", "13+"),
        F("partitions", A(S(
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("high_watermark", "int64"),
            F("last_stable_offset", "int64", "4+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F("diverging_epoch", S(
                F("epoch", "int32", "12+", default=-1),
                F("end_offset", "int64", "12+", default=-1),
            ), "12+", tag=0),
            F("current_leader", S(
                F("leader_id", "int32", "12+", default=-1),
                F("leader_epoch", "int32", "12+", default=-1),
            ), "12+", tag=1),
            F("snapshot_id", S(
                F("end_offset", "int64", default=-1),
                F("epoch", "int32", default=-1),
            ), "12+", tag=2),
            F("aborted_transactions", A(S(
                F("producer_id", "int64", "4+"),
                F("first_offset", "int64", "4+"),
            )), "4+", null="4+"),
            F("preferred_read_replica", "int32", "11+", default=-1),
            F("records", "records", null="0+"),
        ))),
    ))),
    F("node_endpoints", A(_NODE_ENDPOINT), "16+", tag=0),  # KIP-951
)

FETCH = Api(1, "Fetch", 4, 18, 12, REQUEST, RESPONSE)
