"""One declarative schema per Kafka API key, and a table of them by key."""

from __future__ import annotations

from ..api import Api
from .alter_share_group_offsets import ALTER_SHARE_GROUP_OFFSETS
from .api_versions import API_VERSIONS
from .consumer_group_describe import CONSUMER_GROUP_DESCRIBE
from .consumer_group_heartbeat import CONSUMER_GROUP_HEARTBEAT
from .create_topics import CREATE_TOPICS
from .delete_share_group_offsets import DELETE_SHARE_GROUP_OFFSETS
from .describe_groups import DESCRIBE_GROUPS
from .describe_share_group_offsets import DESCRIBE_SHARE_GROUP_OFFSETS
from .fetch import FETCH
from .find_coordinator import FIND_COORDINATOR
from .get_telemetry_subscriptions import GET_TELEMETRY_SUBSCRIPTIONS
from .heartbeat import HEARTBEAT
from .join_group import JOIN_GROUP
from .leave_group import LEAVE_GROUP
from .list_groups import LIST_GROUPS
from .list_offsets import LIST_OFFSETS
from .metadata import METADATA
from .offset_commit import OFFSET_COMMIT
from .offset_delete import OFFSET_DELETE
from .offset_fetch import OFFSET_FETCH
from .offset_for_leader_epoch import OFFSET_FOR_LEADER_EPOCH
from .produce import PRODUCE
from .push_telemetry import PUSH_TELEMETRY
from .sasl_authenticate import SASL_AUTHENTICATE
from .sasl_handshake import SASL_HANDSHAKE
from .share_acknowledge import SHARE_ACKNOWLEDGE
from .share_fetch import SHARE_FETCH
from .share_group_describe import SHARE_GROUP_DESCRIBE
from .share_group_heartbeat import SHARE_GROUP_HEARTBEAT
from .sync_group import SYNC_GROUP

APIS_BY_KEY: dict[int, Api] = {
    api.key: api
    for api in (
        PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR,
        JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS,
        SASL_HANDSHAKE, API_VERSIONS, CREATE_TOPICS, SASL_AUTHENTICATE, CONSUMER_GROUP_HEARTBEAT,
        CONSUMER_GROUP_DESCRIBE, OFFSET_FOR_LEADER_EPOCH, GET_TELEMETRY_SUBSCRIPTIONS, PUSH_TELEMETRY,
        SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE,
        DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS, DELETE_SHARE_GROUP_OFFSETS, OFFSET_DELETE,
    )
}

__all__ = [
    "ALTER_SHARE_GROUP_OFFSETS",
    "APIS_BY_KEY",
    "API_VERSIONS",
    "CONSUMER_GROUP_DESCRIBE",
    "CONSUMER_GROUP_HEARTBEAT",
    "CREATE_TOPICS",
    "DELETE_SHARE_GROUP_OFFSETS",
    "DESCRIBE_GROUPS",
    "DESCRIBE_SHARE_GROUP_OFFSETS",
    "FETCH",
    "FIND_COORDINATOR",
    "GET_TELEMETRY_SUBSCRIPTIONS",
    "HEARTBEAT",
    "JOIN_GROUP",
    "LEAVE_GROUP",
    "LIST_GROUPS",
    "LIST_OFFSETS",
    "METADATA",
    "OFFSET_COMMIT",
    "OFFSET_DELETE",
    "OFFSET_FETCH",
    "OFFSET_FOR_LEADER_EPOCH",
    "PRODUCE",
    "PUSH_TELEMETRY",
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "SHARE_ACKNOWLEDGE",
    "SHARE_FETCH",
    "SHARE_GROUP_DESCRIBE",
    "SHARE_GROUP_HEARTBEAT",
    "SYNC_GROUP",
]
