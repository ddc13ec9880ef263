"""ConsumerGroupHeartbeat (key 68): the one request of the KIP-848 consumer group protocol.

A member joins (epoch 0), stays alive, acknowledges its assignment and leaves (epoch -1, or -2
for a static member that will come back) with it; the coordinator answers with the member epoch,
the heartbeat interval and, when it changed, the member's target assignment (by topic id).
Fields marked "null if unchanged" are sent only when they changed since the last heartbeat.

v1 (Kafka 4.0) adds the broker-side topic regex and has the client generate its member id
(KIP-1082).
"""

from __future__ import annotations

from ..api import Api
from ..schema import NULL, A, F, S

TOPIC_PARTITIONS = S(
    F("topic_id", "uuid"),
    F("partitions", A("int32")),
)

REQUEST = S(
    F("group_id", "string"),
    F("member_id", "string"),
    F("member_epoch", "int32"),  # 0: join; -1: leave; -2: a static member leaves and will rejoin
    F("instance_id", "string", null="0+"),
    F("rack_id", "string", null="0+"),
    F("rebalance_timeout_ms", "int32", default=-1),  # -1: unchanged
    F("subscribed_topic_names", A("string"), null="0+", default=NULL),
    F("subscribed_topic_regex", "string", "1+", null="1+"),
    F("server_assignor", "string", null="0+"),
    F("topic_partitions", A(TOPIC_PARTITIONS), null="0+", default=NULL),  # owned partitions; null: unchanged
)

RESPONSE = S(
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", null="0+"),
    F("member_id", "string", null="0+"),
    F("member_epoch", "int32"),
    F("heartbeat_interval_ms", "int32"),
    F("assignment", S(  # null: no new target assignment
        F("topic_partitions", A(TOPIC_PARTITIONS)),
    ), null="0+"),
)

CONSUMER_GROUP_HEARTBEAT = Api(68, "ConsumerGroupHeartbeat", 0, 1, 0, REQUEST, RESPONSE)
