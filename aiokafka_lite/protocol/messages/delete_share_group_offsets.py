"""DeleteShareGroupOffsets (key 92): forget a share group's start offsets of whole topics (KIP-932).

v0 is the only version Apache Kafka 4.3.1 and 4.4.0 define (flexible; as their kafka-clients jars
ship it: an earlier draft answered per partition). Topics only: a share group's state is deleted
topic by topic, never one partition. The broker refuses it with NON_EMPTY_GROUP while the group has
members; the group-level error comes before the per-topic results.
"""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("group_id", "string"),
    F("topics", A(S(
        F("topic_name", "string"),
    ))),
)

RESPONSE = S(
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", null="0+"),
    F("responses", A(S(
        F("topic_name", "string"),
        F("topic_id", "uuid"),
        F("error_code", "int16"),
        F("error_message", "string", null="0+"),
    ))),
)

DELETE_SHARE_GROUP_OFFSETS = Api(92, "DeleteShareGroupOffsets", 0, 0, 0, REQUEST, RESPONSE)
