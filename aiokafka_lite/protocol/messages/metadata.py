"""Metadata (key 3): brokers, topics, partitions and their leaders."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

# In v0 an empty topic list means "all topics"; from v1 that is a null list (v1+ nullable).
# topic_id and a null name exist from v10, but brokers honour lookups by id only from v12.
REQUEST = S(
    F("topics", A(S(
        F("topic_id", "uuid", "10+"),
        F("name", "string", null="10+"),
    )), null="1+"),
    F("allow_auto_topic_creation", "bool", "4+", default=True),
    F("include_cluster_authorized_operations", "bool", "8-10"),  # moved to DescribeCluster (KIP-700)
    F("include_topic_authorized_operations", "bool", "8+"),
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "3+"),
    F("brokers", A(S(
        F("node_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", "1+", null="1+"),
    ))),
    F("cluster_id", "string", "2+", null="2+"),
    F("controller_id", "int32", "1+", default=-1),
    F("topics", A(S(
        F("error_code", "int16"),
        F("name", "string", null="12+"),
        F("topic_id", "uuid", "10+"),
        F("is_internal", "bool", "1+"),
        F("partitions", A(S(
            F("error_code", "int16"),
            F("partition_index", "int32"),
            F("leader_id", "int32"),
            F("leader_epoch", "int32", "7+", default=-1),
            F("replica_nodes", A("int32")),
            F("isr_nodes", A("int32")),
            F("offline_replicas", A("int32"), "5+"),
        ))),
        F("topic_authorized_operations", "int32", "8+", default=-2147483648),
    ))),
    F("cluster_authorized_operations", "int32", "8-10", default=-2147483648),  # deprecated (KIP-700)
    F("error_code", "int16", "13+"),
)

METADATA = Api(3, "Metadata", 0, 13, 9, REQUEST, RESPONSE)
