"""What a ShareGroupHeartbeat error code means for a KIP-932 share member (pure, no I/O);
heartbeat_verdicts.py has what it shares with the KIP-848 member."""

from __future__ import annotations

from ...errors import GroupProtocolError, broker_error, is_retriable
from ..heartbeat_verdicts import Verdict, common_verdict

INCONSISTENT_GROUP_PROTOCOL = 23
GROUP_AUTHORIZATION_FAILED = 30
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69
GROUP_MAX_SIZE_REACHED = 81

OTHER_GROUP_TYPE = frozenset({GROUP_ID_NOT_FOUND, INCONSISTENT_GROUP_PROTOCOL})

# What the user can do about a fatal code, beside Kafka's own name for it.
_ADVICE = {
    GROUP_AUTHORIZATION_FAILED: "this principal may not use the group: an ACL granting READ on group {group!r} "
                                "is needed",
    GROUP_MAX_SIZE_REACHED: "the share group {group!r} has as many members as group.share.max.size allows: "
                            "raise it, or close members",
    INVALID_REQUEST: "the broker refused the heartbeat's fields (a bug in this client, or a broker this "
                     "client does not know): please report it with the broker's message",
}


def classify(code: int, group_id: str, message: str | None = None) -> Verdict:
    verdict = common_verdict(code)
    if verdict is not None:
        return verdict
    if code == UNSUPPORTED_VERSION:
        return Verdict(code, fatal=no_share_groups(group_id, message))
    if code in OTHER_GROUP_TYPE:
        return Verdict(code, fatal=other_group_type(code, group_id, message))
    if is_retriable(code):
        return Verdict(code, retry=True)
    advice = _ADVICE.get(code, "the share membership cannot go on").format(group=group_id)
    detail = f" (broker: {message})" if message else ""
    return Verdict(code, fatal=broker_error(code, f"ShareGroupHeartbeat for group {group_id!r}: {advice}{detail}"))


def no_share_groups(group_id: str, message: str | None) -> GroupProtocolError:
    """The broker has no share groups (KIP-932): too old, or the feature is off."""
    detail = f" (broker: {message})" if message else ""
    return GroupProtocolError(
        UNSUPPORTED_VERSION,
        f"share group {group_id!r}: the broker does not serve share groups (ShareGroupHeartbeat v1){detail}; "
        "a share consumer needs Apache Kafka 4.1+ with share groups enabled (the share.version feature "
        "at 1 or more: kafka-features.sh upgrade --feature share.version=1)")


def other_group_type(code: int, group_id: str, message: str | None) -> GroupProtocolError:
    """The group id belongs to a group of another type (classic, consumer, streams)."""
    detail = f" (broker: {message})" if message else ""
    return GroupProtocolError(
        code,
        f"group {group_id!r} exists and is not a share group (a consumer or classic group uses this id){detail}; "
        "give the share consumer a group id of its own: one group id is one group type")
