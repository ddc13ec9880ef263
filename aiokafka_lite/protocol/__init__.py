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
from .messages import *  # noqa: F403 -- every Api constant and APIS_BY_KEY, listed once, there
from .messages import __all__ as _messages_all

__all__ = [
    "Api",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "peek_correlation_id",
    "pick_version",
    *_messages_all,
]
