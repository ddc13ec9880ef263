"""The cluster client's requests as pure functions: Metadata and FindCoordinator bodies, and the
coordinator read from a FindCoordinator answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import BrokerError, ProtocolDecodeError
from .metadata import BrokerInfo

GROUP_KEY_TYPE = 0


def metadata_request(version: int, topics: Sequence[str] | None, allow_auto_create: bool = False) -> dict[str, Any]:
    """A Metadata request body; ``topics=None`` asks for every topic (an empty list in v0)."""
    if topics is None:
        listed: list[dict[str, Any]] | None = [] if version == 0 else None
    else:
        listed = [{"name": name} for name in topics]
    return {"topics": listed, "allow_auto_topic_creation": allow_auto_create and topics is not None,
            "include_topic_authorized_operations": False}


def find_coordinator_request(version: int, group_id: str) -> dict[str, Any]:
    if version >= 4:  # KIP-699: batched keys
        return {"key_type": GROUP_KEY_TYPE, "coordinator_keys": [group_id]}
    return {"key": group_id, "key_type": GROUP_KEY_TYPE}


def parse_coordinator(response: Mapping[str, Any], version: int, group_id: str) -> BrokerInfo:
    """The coordinator from a FindCoordinator response, or the BrokerError it reports."""
    entry: Mapping[str, Any] = response
    if version >= 4:
        matches = [c for c in response["coordinators"] or () if c["key"] == group_id]
        if not matches:
            raise ProtocolDecodeError(f"FindCoordinator v{version} answer lacks group {group_id!r}")
        entry = matches[0]
    if entry["error_code"]:
        message = entry["error_message"]
        raise BrokerError(entry["error_code"], f"FindCoordinator for group {group_id!r}"
                          + (f": {message}" if message else ""))
    return BrokerInfo(entry["node_id"], entry["host"], entry["port"])
