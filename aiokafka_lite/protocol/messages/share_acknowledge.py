"""ShareAcknowledge (key 79): a KIP-932 share group member settles the records it acquired.

Each offset range gets accept, release (deliver again), reject (never again) or, from v2, renew
(keep the lock longer, KIP-1222); it travels in the member's share session like a ShareFetch that
fetches nothing. Kafka 4.3.1 serves v1-v2; v2 also answers with the acquisition lock timeout.
"""

from __future__ import annotations

from ..api import Api
from ..schema import NULL, A, F, S
from .share_fetch import ACKNOWLEDGEMENT_BATCH, LEADER_ID_AND_EPOCH, NODE_ENDPOINT

REQUEST = S(
    F("group_id", "string", null="0+", default=NULL),
    F("member_id", "string", null="0+"),
    F("share_session_epoch", "int32"),
    F("is_renew_ack", "bool", "2+"),
    F("topics", A(S(
        F("topic_id", "uuid"),
        F("partitions", A(S(
            F("partition_index", "int32"),
            F("acknowledgement_batches", A(ACKNOWLEDGEMENT_BATCH)),
        ))),
    ))),
)

RESPONSE = S(
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", null="0+"),
    F("acquisition_lock_timeout_ms", "int32", "2+"),
    F("responses", A(S(
        F("topic_id", "uuid"),
        F("partitions", A(S(
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", null="0+"),
            F("current_leader", LEADER_ID_AND_EPOCH),
        ))),
    ))),
    F("node_endpoints", A(NODE_ENDPOINT)),
)

SHARE_ACKNOWLEDGE = Api(79, "ShareAcknowledge", 1, 2, 0, REQUEST, RESPONSE)
