"""ShareGroupHeartbeat (key 76): membership of a KIP-932 share group.

A member joins (epoch 0), stays alive and leaves (epoch -1) with it; the coordinator answers with
the member epoch, the heartbeat interval and, when it changed, the partitions (by topic id) the
member may fetch from. Unlike a consumer group there is nothing to revoke or commit: several members
may share a partition, and the broker tracks each record's delivery (ShareFetch, ShareAcknowledge).

v0 was Kafka 4.0's early access and is gone; v1 (Kafka 4.1) is the only version Kafka 4.3.1 serves.
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
    F("member_id", "string"),  # a UUID the client makes up, sent as a string
    F("member_epoch", "int32"),  # 0: join; -1: leave
    F("rack_id", "string", null="0+"),  # null: not given or unchanged
    F("subscribed_topic_names", A("string"), null="0+", default=NULL),  # null: unchanged
)

RESPONSE = S(
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", null="0+"),
    F("member_id", "string", null="0+"),
    F("member_epoch", "int32"),
    F("heartbeat_interval_ms", "int32"),
    F("assignment", S(  # null: no new assignment
        F("topic_partitions", A(TOPIC_PARTITIONS)),
    ), null="0+"),
)

SHARE_GROUP_HEARTBEAT = Api(76, "ShareGroupHeartbeat", 1, 1, 0, REQUEST, RESPONSE)
