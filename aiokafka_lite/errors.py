"""One error root for the whole client, and Kafka's broker error codes as one table.

Who broke what decides the class: ``ProtocolDecodeError`` means the bytes from the network were
bad, ``ConfigError`` means a setting was, ``IllegalStateError`` means the API was misused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .structs import TopicPartition


class KafkaError(Exception):
    """Root of every error this client raises."""


class KafkaTimeoutError(KafkaError, TimeoutError):
    """An awaitable API call or a request ran out of time (KIP-266)."""


class ConfigError(KafkaError, ValueError):
    """A setting is unknown or out of range."""


class BootstrapResolutionError(ConfigError):
    """No bootstrap_servers name resolved within bootstrap_resolve_timeout_ms (KIP-909, Java's
    BootstrapResolutionException)."""


class IllegalStateError(KafkaError, RuntimeError):
    """The API was used in a state that does not allow it (e.g. poll before subscribe)."""


class InvalidArgumentError(KafkaError, ValueError):
    """An API call got an argument it cannot use (a negative timeout, an unknown partition type...)."""


class ConsumerClosedError(IllegalStateError):
    """The consumer was closed; distinct from cancellation of the caller's task."""


class ProtocolDecodeError(KafkaError):
    """Bytes from the network do not decode as the expected Kafka message."""


class ProtocolEncodeError(KafkaError, ValueError):
    """A request would break a limit of Kafka's protocol that brokers enforce (an array of more than
    1,000,000 elements: Kafka 4.4 refuses it); refused before anything is sent."""


class CorruptRecordError(ProtocolDecodeError):
    """A record batch failed its CRC or structure checks."""

    def __init__(self, message: str, topic: str | None = None, partition: int | None = None,
                 offset: int | None = None) -> None:
        where = ""
        if topic is not None:
            where = f" (topic {topic!r}, partition {partition}, batch base offset {offset})"
        super().__init__(message + where)
        self.topic = topic
        self.partition = partition
        self.offset = offset


class RecordDeserializationError(KafkaError):
    """A key or value deserializer raised on a record (Java's RecordDeserializationException, KIP-1036).

    poll() hands out the records before it first; then every poll() raises this error again, with
    the partition's position left on the record, until the application seeks past it
    (``consumer.seek(err.topic_partition, err.offset + 1)``). The record is described by what the
    broker sent: ``key`` and ``value`` are the raw bytes, ``origin`` says which one failed ("key"
    or "value"), and the deserializer's exception is the ``__cause__``.
    """

    def __init__(self, topic_partition: TopicPartition, offset: int, origin: str, key: bytes | None,
                 value: bytes | None, timestamp: int, timestamp_type: int,
                 headers: Sequence[tuple[str, bytes | None]], leader_epoch: int | None,
                 cause: BaseException) -> None:
        why = " ".join(f"{type(cause).__name__}: {cause}".split())  # one line, whatever the cause says
        super().__init__(f"cannot deserialize the {origin} of the record at offset {offset} of "
                         f"{topic_partition.topic}-{topic_partition.partition} ({why}); seek to offset "
                         f"{offset + 1} to skip it")
        self.topic_partition = topic_partition
        self.offset = offset
        self.origin = origin
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.headers = headers
        self.leader_epoch = leader_epoch
        self.__cause__ = cause


class DeserializerNotReadyError(KafkaError):
    """Raised by a key or value deserializer that cannot decode a record before some I/O is done
    (a schema registry deserializer meeting a schema id it has not looked up yet).

    poll() does not hand that record out, nor count it a poison record: the records before it are
    handed out, and before handing out more poll() awaits ``prepare(timeout)`` (within the time
    poll() has left), then calls the deserializer on the record again. An error ``prepare()``
    raises ends that poll() with the record still next (``KafkaTimeoutError`` ends it empty, as a
    poll() timeout does). A record that can never be decoded is for the deserializer to raise on
    when called again: then it is a poison record (``RecordDeserializationError``).
    """

    async def prepare(self, timeout: float) -> None:
        """Do the I/O the record needs, within ``timeout`` seconds."""
        raise NotImplementedError(f"{type(self).__name__} does not say how to prepare")


class UnsupportedCodecError(KafkaError):
    """A record batch uses a compression codec this client cannot decode."""


class ArrowUnavailableError(KafkaError, ImportError):
    """Arrow output was asked for but neither the native extension nor pyarrow is there to build it."""

    def __init__(self, detail: str = "") -> None:
        hint = ("Arrow output needs pyarrow (pip install '.[arrow]' in the aiokafka-lite clone) or the native "
                "extension (reinstall aiokafka-lite with a Rust toolchain present)")
        super().__init__(f"{hint}: {detail}" if detail else hint)


class NativeError(KafkaError):
    """The native extension failed (a caught panic): a bug in aiokafka-lite, not bad input.

    The pure-Python path (``AIOKAFKA_LITE_NO_NATIVE=1`` in the environment) is the fallback.
    """


class UnsupportedVersionError(KafkaError):
    """The broker and this client share no version of an API."""


class KafkaConnectionError(KafkaError, ConnectionError):
    """A connection to a broker failed or was lost."""


class AuthenticationError(KafkaError):
    """SASL or TLS authentication failed; retrying will not help."""


class CommitFailedError(KafkaError):
    """A commit cannot succeed because the group has rebalanced since these records were handed out."""


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and ``auto_offset_reset='none'``."""


class OffsetOutOfRangeError(KafkaError):
    """The fetch position is outside the log and ``auto_offset_reset='none'``."""


class LogTruncationError(OffsetOutOfRangeError):
    """Records already consumed are gone from the partition's log (an unclean leader election
    truncated it, KIP-320) and ``auto_offset_reset='none'``: ``seek()`` to go on.

    ``divergent_offset`` is the first offset where the log and what was consumed differ, with the
    leader epoch there (None: the leader holds no record of the consumed epoch at all)."""

    def __init__(self, message: str, topic: str, partition: int, fetch_offset: int,
                 divergent_offset: int | None, divergent_epoch: int | None) -> None:
        super().__init__(message)
        self.topic, self.partition, self.fetch_offset = topic, partition, fetch_offset
        self.divergent_offset, self.divergent_epoch = divergent_offset, divergent_epoch


class RebalanceInProgressError(KafkaError):
    """The group is rebalancing; the operation can be retried after rejoining."""


class BrokerError(KafkaError):
    """A non-zero error code in a broker's response."""

    def __init__(self, code: int, context: str = "") -> None:
        spec = BROKER_ERRORS.get(code)
        name = spec.name if spec else f"UNKNOWN_ERROR_CODE_{code}"
        self.code = code
        self.name = name
        self.retriable = spec.retriable if spec else False
        text = f"{name} ({code})"
        if spec and spec.message:
            text += f": {spec.message}"
        if context:
            text += f" [{context}]"
        super().__init__(text)


class FencedInstanceIdError(BrokerError):
    """Another consumer joined with this member's group_instance_id (static membership, KIP-345):
    this one is fenced and can only be closed."""

    def __init__(self, context: str = "") -> None:
        super().__init__(FENCED_INSTANCE_ID, context)


class UnreleasedInstanceIdError(BrokerError):
    """KIP-848: a static member rejoined with a group_instance_id that another member of the
    group still holds (it has not left, or its session has not expired yet)."""

    def __init__(self, context: str = "") -> None:
        super().__init__(UNRELEASED_INSTANCE_ID, context)


class GroupProtocolError(BrokerError):
    """The broker or the group cannot take this consumer's group protocol: e.g.
    group_protocol='consumer' against a broker without KIP-848, or a group id that a classic
    group of another kind uses. The message names the setting to change."""


FENCED_INSTANCE_ID = 82
UNRELEASED_INSTANCE_ID = 111


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    name: str
    retriable: bool
    message: str = ""


def _e(name: str, retriable: bool, message: str = "") -> ErrorSpec:
    return ErrorSpec(name, retriable, message)


BROKER_ERRORS: dict[int, ErrorSpec] = {
    -1: _e("UNKNOWN_SERVER_ERROR", False, "the broker hit an unexpected error"),
    1: _e("OFFSET_OUT_OF_RANGE", False, "the requested offset is outside the log"),
    2: _e("CORRUPT_MESSAGE", True, "the message failed its CRC check or is otherwise corrupt"),
    3: _e("UNKNOWN_TOPIC_OR_PARTITION", True, "the broker does not host this topic-partition"),
    4: _e("INVALID_FETCH_SIZE", False),
    5: _e("LEADER_NOT_AVAILABLE", True, "a leader election is in progress"),
    6: _e("NOT_LEADER_OR_FOLLOWER", True, "this broker does not lead the partition"),
    7: _e("REQUEST_TIMED_OUT", True),
    8: _e("BROKER_NOT_AVAILABLE", False),
    9: _e("REPLICA_NOT_AVAILABLE", True),
    10: _e("MESSAGE_TOO_LARGE", False),
    11: _e("STALE_CONTROLLER_EPOCH", False),
    12: _e("OFFSET_METADATA_TOO_LARGE", False),
    13: _e("NETWORK_EXCEPTION", True),
    14: _e("COORDINATOR_LOAD_IN_PROGRESS", True, "the coordinator is loading the group"),
    15: _e("COORDINATOR_NOT_AVAILABLE", True),
    16: _e("NOT_COORDINATOR", True, "this broker is not the group's coordinator"),
    17: _e("INVALID_TOPIC_EXCEPTION", False),
    18: _e("RECORD_LIST_TOO_LARGE", False),
    19: _e("NOT_ENOUGH_REPLICAS", True),
    20: _e("NOT_ENOUGH_REPLICAS_AFTER_APPEND", True),
    21: _e("INVALID_REQUIRED_ACKS", False),
    22: _e("ILLEGAL_GENERATION", False, "the group has moved on to a newer generation"),
    23: _e("INCONSISTENT_GROUP_PROTOCOL", False, "no assignor in common with the group's members"),
    24: _e("INVALID_GROUP_ID", False),
    25: _e("UNKNOWN_MEMBER_ID", False, "the coordinator does not know this member (it was removed)"),
    26: _e("INVALID_SESSION_TIMEOUT", False,
          "session_timeout_ms is outside the broker's group.min/max.session.timeout.ms range"),
    27: _e("REBALANCE_IN_PROGRESS", False, "the group is rebalancing"),
    28: _e("INVALID_COMMIT_OFFSET_SIZE", False),
    29: _e("TOPIC_AUTHORIZATION_FAILED", False),
    30: _e("GROUP_AUTHORIZATION_FAILED", False),
    31: _e("CLUSTER_AUTHORIZATION_FAILED", False),
    32: _e("INVALID_TIMESTAMP", False),
    33: _e("UNSUPPORTED_SASL_MECHANISM", False),
    34: _e("ILLEGAL_SASL_STATE", False),
    35: _e("UNSUPPORTED_VERSION", False),
    36: _e("TOPIC_ALREADY_EXISTS", False),
    37: _e("INVALID_PARTITIONS", False),
    38: _e("INVALID_REPLICATION_FACTOR", False),
    39: _e("INVALID_REPLICA_ASSIGNMENT", False),
    40: _e("INVALID_CONFIG", False),
    41: _e("NOT_CONTROLLER", True),
    42: _e("INVALID_REQUEST", False),
    43: _e("UNSUPPORTED_FOR_MESSAGE_FORMAT", False),
    44: _e("POLICY_VIOLATION", False),
    45: _e("OUT_OF_ORDER_SEQUENCE_NUMBER", False),
    46: _e("DUPLICATE_SEQUENCE_NUMBER", False),
    47: _e("INVALID_PRODUCER_EPOCH", False),
    48: _e("INVALID_TXN_STATE", False),
    49: _e("INVALID_PRODUCER_ID_MAPPING", False),
    50: _e("INVALID_TRANSACTION_TIMEOUT", False),
    51: _e("CONCURRENT_TRANSACTIONS", True),
    52: _e("TRANSACTION_COORDINATOR_FENCED", False),
    53: _e("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False),
    54: _e("SECURITY_DISABLED", False),
    55: _e("OPERATION_NOT_ATTEMPTED", False),
    56: _e("KAFKA_STORAGE_ERROR", True),
    57: _e("LOG_DIR_NOT_FOUND", False),
    58: _e("SASL_AUTHENTICATION_FAILED", False, "SASL authentication failed (check the credentials)"),
    59: _e("UNKNOWN_PRODUCER_ID", False),
    60: _e("REASSIGNMENT_IN_PROGRESS", False),
    61: _e("DELEGATION_TOKEN_AUTH_DISABLED", False),
    62: _e("DELEGATION_TOKEN_NOT_FOUND", False),
    63: _e("DELEGATION_TOKEN_OWNER_MISMATCH", False),
    64: _e("DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", False),
    65: _e("DELEGATION_TOKEN_AUTHORIZATION_FAILED", False),
    66: _e("DELEGATION_TOKEN_EXPIRED", False),
    67: _e("INVALID_PRINCIPAL_TYPE", False),
    68: _e("NON_EMPTY_GROUP", False),
    69: _e("GROUP_ID_NOT_FOUND", False),
    70: _e("FETCH_SESSION_ID_NOT_FOUND", True),
    71: _e("INVALID_FETCH_SESSION_EPOCH", True),
    72: _e("LISTENER_NOT_FOUND", True),
    73: _e("TOPIC_DELETION_DISABLED", False),
    74: _e("FENCED_LEADER_EPOCH", True, "the leader epoch in the request is older than the broker's"),
    75: _e("UNKNOWN_LEADER_EPOCH", True),
    76: _e("UNSUPPORTED_COMPRESSION_TYPE", False),
    77: _e("STALE_BROKER_EPOCH", False),
    78: _e("OFFSET_NOT_AVAILABLE", True),
    79: _e("MEMBER_ID_REQUIRED", False, "rejoin with the member id the coordinator assigned (KIP-394)"),
    80: _e("PREFERRED_LEADER_NOT_AVAILABLE", True),
    81: _e("GROUP_MAX_SIZE_REACHED", False),
    82: _e("FENCED_INSTANCE_ID", False,
          "another member joined with the same group_instance_id (static membership, KIP-345)"),
    83: _e("ELIGIBLE_LEADERS_NOT_AVAILABLE", True),
    84: _e("ELECTION_NOT_NEEDED", True),
    85: _e("NO_REASSIGNMENT_IN_PROGRESS", False),
    86: _e("GROUP_SUBSCRIBED_TO_TOPIC", False),
    87: _e("INVALID_RECORD", False),
    88: _e("UNSTABLE_OFFSET_COMMIT", True, "a transaction on the partition is still open"),
    89: _e("THROTTLING_QUOTA_EXCEEDED", True),
    90: _e("PRODUCER_FENCED", False),
    91: _e("RESOURCE_NOT_FOUND", False),
    92: _e("DUPLICATE_RESOURCE", False),
    93: _e("UNACCEPTABLE_CREDENTIAL", False),
    94: _e("INCONSISTENT_VOTER_SET", False),
    95: _e("INVALID_UPDATE_VERSION", False),
    96: _e("FEATURE_UPDATE_FAILED", False),
    97: _e("PRINCIPAL_DESERIALIZATION_FAILURE", False),
    98: _e("SNAPSHOT_NOT_FOUND", False),
    99: _e("POSITION_OUT_OF_RANGE", False),
    100: _e("UNKNOWN_TOPIC_ID", True),
    101: _e("DUPLICATE_BROKER_REGISTRATION", False),
    102: _e("BROKER_ID_NOT_REGISTERED", False),
    103: _e("INCONSISTENT_TOPIC_ID", True),
    104: _e("INCONSISTENT_CLUSTER_ID", False),
    105: _e("TRANSACTIONAL_ID_NOT_FOUND", False),
    106: _e("FETCH_SESSION_TOPIC_ID_ERROR", True),
    107: _e("INELIGIBLE_REPLICA", False),
    108: _e("NEW_LEADER_ELECTED", False),
    109: _e("OFFSET_MOVED_TO_TIERED_STORAGE", False),
    110: _e("FENCED_MEMBER_EPOCH", False),
    111: _e("UNRELEASED_INSTANCE_ID", False),
    112: _e("UNSUPPORTED_ASSIGNOR", False),
    113: _e("STALE_MEMBER_EPOCH", False),
    114: _e("MISMATCHED_ENDPOINT_TYPE", False),
    115: _e("UNSUPPORTED_ENDPOINT_TYPE", False),
    116: _e("UNKNOWN_CONTROLLER_ID", False),
    117: _e("UNKNOWN_SUBSCRIPTION_ID", False),
    118: _e("TELEMETRY_TOO_LARGE", False),
    119: _e("INVALID_REGISTRATION", False),
    120: _e("TRANSACTION_ABORTABLE", False),
    121: _e("INVALID_RECORD_STATE", False, "the record is not acquired by this member (lock lapsed, or acknowledged)"),
    122: _e("SHARE_SESSION_NOT_FOUND", True, "the broker has no share session for this member"),
    123: _e("INVALID_SHARE_SESSION_EPOCH", True, "the share session's epoch is not the one the broker expects"),
    124: _e("FENCED_STATE_EPOCH", False),
    128: _e("INVALID_REGULAR_EXPRESSION", False, "the broker cannot use the subscribed topic regex"),
    129: _e("REBOOTSTRAP_REQUIRED", False, "the client's metadata is stale: bootstrap again (KIP-1102)"),
    133: _e("SHARE_SESSION_LIMIT_REACHED", True, "the broker holds as many share sessions as it may"),
}

ERROR_CODE_BY_NAME: dict[str, int] = {spec.name: code for code, spec in BROKER_ERRORS.items()}


def broker_error(code: int, context: str = "") -> BrokerError:
    """The typed error for a non-zero broker error code (a subclass where one exists)."""
    if code == FENCED_INSTANCE_ID:
        return FencedInstanceIdError(context)
    if code == UNRELEASED_INSTANCE_ID:
        return UnreleasedInstanceIdError(context)
    return BrokerError(code, context)


def is_retriable(code: int) -> bool:
    spec = BROKER_ERRORS.get(code)
    return spec.retriable if spec else False


class OffsetMetadataError(KafkaError, ValueError):
    """Commit metadata that says it holds process()'s finished offsets but cannot be read (bad
    base64, a cut varint, a base offset other than the committed one). process() counts it and
    starts at the committed offset, re-processing what the metadata would have skipped."""


class HandlerFailedError(KafkaError):
    """process() stopped because a record's handler failed every attempt and no ``on_failure`` hook
    took it, or the hook itself raised (the cause is chained). ``record`` is that record,
    ``attempts`` how many times the handler ran."""

    def __init__(self, message: str, record: object, attempts: int) -> None:
        super().__init__(message)
        self.record, self.attempts = record, attempts


class HandlerCancelledError(KafkaError):
    """A handler (or an ``on_failure`` hook) under process() or process_share() raised a
    CancelledError that the library did not cause: it awaited something that another task
    cancelled. That is the handler's failure, handled as any other (retried, then the hook); the
    CancelledError is chained as the cause. ``record`` is the record it was handling."""

    def __init__(self, record: object) -> None:
        where = getattr(record, "topic", "?"), getattr(record, "partition", "?"), getattr(record, "offset", "?")
        super().__init__(f"the handler of {where[0]}-{where[1]} offset {where[2]} raised CancelledError without "
                         "being cancelled (it awaited something another task cancelled)")
        self.record = record


class InvalidRecordStateError(KafkaError):
    """A share group decision on a delivery that is no longer this consumer's to decide (Java's
    InvalidRecordStateException): the record's acquisition lock lapsed and the broker delivered it
    again (``delivery_count`` one higher, perhaps to another task of this consumer), so only that
    delivery may be acknowledged. Nothing was sent; the newer delivery stays undecided."""

    def __init__(self, message: str, record: object) -> None:
        super().__init__(message)
        self.record = record
