"""ShareFetch (key 78): records of a KIP-932 share group, acquired for this member for a while.

The broker hands out records under a time-limited lock (``acquisition_lock_timeout_ms``) and lists
which offsets it acquired; the member acknowledges them (accept, release, reject) here, piggybacked
on the next fetch, or with ShareAcknowledge. A share session (epoch 0 opens it, -1 closes it) keeps
the partitions between requests, as a fetch session does. ``records`` decode as zero-copy memoryviews.

v1 (Kafka 4.1) is the first stable version; v2 (KIP-1206, KIP-1222) adds the acquire mode and renew
acknowledgements. Kafka 4.3.1 serves v1-v2.
"""

from __future__ import annotations

from ..api import Api
from ..schema import NULL, A, F, S

# Acknowledge types: 0 gap, 1 accept, 2 release, 3 reject, 4 renew (v2+); one per offset, or one
# for the whole range.
ACKNOWLEDGEMENT_BATCH = S(
    F("first_offset", "int64"),
    F("last_offset", "int64"),  # inclusive
    F("acknowledge_types", A("int8")),
)

LEADER_ID_AND_EPOCH = S(
    F("leader_id", "int32"),
    F("leader_epoch", "int32"),
)

NODE_ENDPOINT = S(  # the new leaders of partitions answered with NOT_LEADER_OR_FOLLOWER
    F("node_id", "int32"),
    F("host", "string"),
    F("port", "int32"),
    F("rack", "string", null="0+"),
)

REQUEST = S(
    F("group_id", "string", null="0+", default=NULL),
    F("member_id", "string", null="0+"),
    F("share_session_epoch", "int32"),  # 0: open a session; -1: close it; else the next epoch
    F("max_wait_ms", "int32"),
    F("min_bytes", "int32"),
    F("max_bytes", "int32", default=0x7FFFFFFF),
    F("max_records", "int32"),  # may be exceeded to end on a batch boundary
    F("batch_size", "int32"),
    F("share_acquire_mode", "int8", "2+"),  # 0: batch-optimized; 1: record limit
    F("is_renew_ack", "bool", "2+"),  # the acknowledgements include renewals
    F("topics", A(S(
        F("topic_id", "uuid"),
        F("partitions", A(S(
            F("partition_index", "int32"),
            F("acknowledgement_batches", A(ACKNOWLEDGEMENT_BATCH)),
        ))),
    ))),
    F("forgotten_topics_data", A(S(  # partitions to drop from the share session
        F("topic_id", "uuid"),
        F("partitions", A("int32")),
    ))),
)

RESPONSE = S(
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", null="0+"),
    F("acquisition_lock_timeout_ms", "int32"),
    F("responses", A(S(
        F("topic_id", "uuid"),
        F("partitions", A(S(
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", null="0+"),
            F("acknowledge_error_code", "int16"),  # for the acknowledgements this request carried
            F("acknowledge_error_message", "string", null="0+"),
            F("current_leader", LEADER_ID_AND_EPOCH),
            F("records", "records"),
            F("acquired_records", A(S(
                F("first_offset", "int64"),
                F("last_offset", "int64"),  # inclusive
                F("delivery_count", "int16"),
            ))),
        ))),
    ))),
    F("node_endpoints", A(NODE_ENDPOINT)),
)

SHARE_FETCH = Api(78, "ShareFetch", 1, 2, 0, REQUEST, RESPONSE)
