"""Sans-IO Kafka protocol: bytes in, dicts out. No asyncio, no sockets, no clocks.

Requests and responses are plain dicts keyed by snake_case field names (the JSON specs' names);
see ``schema`` for how absent fields and versions are handled.
"""

from __future__ import annotations

from .api import (
    Api,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_correlation_id,
    pick_version,
)
from .messages import (
    API_VERSIONS,
    APIS_BY_KEY,
    CREATE_TOPICS,
    DESCRIBE_GROUPS,
    FETCH,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SYNC_GROUP,
)

__all__ = [
    "APIS_BY_KEY",
    "API_VERSIONS",
    "CREATE_TOPICS",
    "DESCRIBE_GROUPS",
    "FETCH",
    "FIND_COORDINATOR",
    "HEARTBEAT",
    "JOIN_GROUP",
    "LEAVE_GROUP",
    "LIST_GROUPS",
    "LIST_OFFSETS",
    "METADATA",
    "OFFSET_COMMIT",
    "OFFSET_FETCH",
    "PRODUCE",
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "SYNC_GROUP",
    "Api",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "peek_correlation_id",
    "pick_version",
]
