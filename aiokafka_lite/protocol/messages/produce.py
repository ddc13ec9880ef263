"""Produce (key 0): used only by tests and benchmarks to write record batches."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

# Versions 0-2 were removed in Kafka 4.0 (KIP-896). v13 names topics by id (KIP-516).
REQUEST = S(
    F("transactional_id", "string", "3+", null="3+"),
    F("acks", "int16"),
    F("timeout_ms", "int32"),
    F("topic_data", A(S(
        F("name", "string", "0-12"),
        F("topic_id", "uuid", "13+"),
        F("partition_data", A(S(
            F("index", "int32"),
            F("records", "records", null="0+"),
        ))),
    ))),
)

RESPONSE = S(
    F("responses", A(S(
        F("name", "string", "0-12"),
        F("topic_id", "uuid", "13+"),
        F("partition_responses", A(S(
            F("index", "int32"),
            F("error_code", "int16"),
            F("base_offset", "int64"),
            F("log_append_time_ms", "int64", "2+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F("record_errors", A(S(
                F("batch_index", "int32", "8+"),
                F("batch_index_error_message", "string", "8+", null="8+"),
            )), "8+"),
            F("error_message", "string", "8+", null="8+"),
            F("current_leader", S(
                F("leader_id", "int32", "10+", default=-1),
                F("leader_epoch", "int32", "10+", default=-1),
            ), "10+", tag=0),  # KIP-951
        ))),
    ))),
    F("throttle_time_ms", "int32", "1+"),
    F("node_endpoints", A(S(
        F("node_id", "int32", "10+"),
        F("host", "string", "10+"),
        F("port", "int32", "10+"),
        F("rack", "string", "10+", null="10+"),
    )), "10+", tag=0),
)

PRODUCE = Api(0, "Produce", 3, 13, 9, REQUEST, RESPONSE)
