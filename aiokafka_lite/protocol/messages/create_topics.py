"""CreateTopics (key 19): used by tests and the CLI to make topics."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

# Versions 0-1 were removed in Kafka 4.0 (KIP-896). -1 partitions/replication: broker defaults (v4+).
REQUEST = S(
    F("topics", A(S(
        F("name", "string"),
        F("num_partitions", "int32"),
        F("replication_factor", "int16"),
        F("assignments", A(S(
            F("partition_index", "int32"),
            F("broker_ids", A("int32")),
        ))),
        F("configs", A(S(
            F("name", "string"),
            F("value", "string", null="0+"),
        ))),
    ))),
    F("timeout_ms", "int32", default=60000),
    F("validate_only", "bool", "1+"),
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "2+"),
    F("topics", A(S(
        F("name", "string"),
        F("topic_id", "uuid", "7+"),
        F("error_code", "int16"),
        F("error_message", "string", "1+", null="0+"),
        F("topic_config_error_code", "int16", "5+", tag=0),
        F("num_partitions", "int32", "5+", default=-1),
        F("replication_factor", "int16", "5+", default=-1),
        F("configs", A(S(
            F("name", "string", "5+"),
            F("value", "string", "5+", null="5+"),
            F("read_only", "bool", "5+"),
            F("config_source", "int8", "5+", default=-1),
            F("is_sensitive", "bool", "5+"),
        )), "5+", null="5+"),
    ))),
)

CREATE_TOPICS = Api(19, "CreateTopics", 2, 7, 5, REQUEST, RESPONSE)
