"""Member ids the client makes up itself (KIP-1082 for consumer groups, KIP-932 for share groups)."""

from __future__ import annotations

import base64
import uuid


def new_member_id() -> str:
    """A random id in Kafka's Uuid text form (URL-safe base64, no padding), as KIP-1082 asks."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
