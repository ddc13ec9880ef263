"""What a ConsumerGroupHeartbeat error code means for a KIP-848 member (pure, no I/O);
heartbeat_verdicts.py has what it shares with the share member."""

from __future__ import annotations

from ...errors import GroupProtocolError, broker_error, is_retriable
from ..heartbeat_verdicts import Verdict, common_verdict

UNSUPPORTED_VERSION = 35
GROUP_ID_NOT_FOUND = 69
INCONSISTENT_GROUP_PROTOCOL = 23

PROTOCOL_MISMATCH = frozenset({UNSUPPORTED_VERSION, GROUP_ID_NOT_FOUND, INCONSISTENT_GROUP_PROTOCOL})


def classify(code: int, group_id: str, message: str | None = None) -> Verdict:
    verdict = common_verdict(code)
    if verdict is not None:
        return verdict
    if code in PROTOCOL_MISMATCH:
        return Verdict(code, fatal=protocol_mismatch(code, group_id, message))
    if is_retriable(code):
        return Verdict(code, retry=True)
    # UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID (typed), GROUP_MAX_SIZE_REACHED,
    # UNSUPPORTED_ASSIGNOR, GROUP_AUTHORIZATION_FAILED, INVALID_REQUEST, INVALID_REGULAR_EXPRESSION...
    context = f"ConsumerGroupHeartbeat for group {group_id!r}"
    return Verdict(code, fatal=broker_error(code, f"{context}: {message}" if message else context))


def protocol_mismatch(code: int, group_id: str, message: str | None) -> GroupProtocolError:
    if code == UNSUPPORTED_VERSION:
        why = ("the broker does not speak the KIP-848 consumer group protocol (it needs Kafka 4.0+, "
               "or group.coordinator.rebalance.protocols including 'consumer')")
    else:
        why = (f"group {group_id!r} exists as a classic group the consumer protocol cannot join "
               "(e.g. one of another protocol type, or the broker's group.consumer.migration.policy "
               "forbids converting it)")
    detail = f" (broker: {message})" if message else ""
    return GroupProtocolError(code, f"{why}{detail}; use group_protocol='classic' for this group, "
                                    "or a group id of its own with group_protocol='consumer'")
