"""What a ConsumerGroupHeartbeat error code means for a KIP-848 member (pure, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import BrokerError, GroupProtocolError, broker_error, is_retriable

NONE = 0
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
UNSUPPORTED_VERSION = 35
GROUP_ID_NOT_FOUND = 69
INCONSISTENT_GROUP_PROTOCOL = 23
STALE_MEMBER_EPOCH = 113

COORDINATOR_MOVED = frozenset({COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})
FENCING = frozenset({UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH})
PROTOCOL_MISMATCH = frozenset({UNSUPPORTED_VERSION, GROUP_ID_NOT_FOUND, INCONSISTENT_GROUP_PROTOCOL})


@dataclass(frozen=True)
class Verdict:
    """fenced: partitions lost, rejoin with epoch 0; retry: no verdict, try again after the
    backoff (rediscover: the coordinator moved first); fatal: the membership is over."""

    code: int
    fenced: bool = False
    retry: bool = False
    rediscover: bool = False
    fatal: BrokerError | None = None


def classify(code: int, group_id: str, message: str | None = None) -> Verdict:
    if code == NONE:
        return Verdict(code)
    if code in FENCING:
        return Verdict(code, fenced=True)
    if code in COORDINATOR_MOVED:
        return Verdict(code, retry=True, rediscover=True)
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
