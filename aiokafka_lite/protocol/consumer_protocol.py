"""The "consumer" embedded protocol: what members put in JoinGroup metadata (a subscription) and
what the leader hands out through SyncGroup (an assignment).

Java, librdkafka and aiokafka members all speak it, so a group can mix them. Both messages are
NON-flexible at every version (int16-length strings, int32-count arrays, int32-length bytes),
prefixed by an int16 version (apache/kafka ConsumerProtocolSubscription.json and
ConsumerProtocolAssignment.json):

Subscription  v0: topics [string], user_data nullable bytes
              v1+: owned_partitions [topic string, partitions [int32]]
              v2+: generation_id int32;  v3+: rack_id nullable string
Assignment    v0-3: assigned_partitions [topic string, partitions [int32]], user_data nullable bytes

A newer version than ours is read as our highest one: later versions only append fields, so
the fields we know come first and trailing bytes are ignored. Any malformed input raises
ProtocolDecodeError; element counts are checked against the bytes left, and against Kafka 4.4's
limit of 1,000,000 elements an array (MAX_ARRAY_LENGTH), before anything is built. Encoding an array
over that limit raises ProtocolEncodeError: Java members would refuse it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import ProtocolDecodeError, ProtocolEncodeError
from ..structs import TopicPartition
from .primitives import MAX_ARRAY_LENGTH

SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class ConsumerProtocolSubscription:
    """One member's subscription. ``group_instance_id`` is not part of this encoding: the
    coordinator reports it next to each member in the JoinGroup response, and the assignors
    need it to order static members (KIP-345)."""

    topics: Sequence[str]  # stored as tuples (see __post_init__)
    user_data: bytes | None = None
    owned_partitions: Sequence[TopicPartition] = ()
    generation_id: int = -1
    rack_id: str | None = None
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        # Accept any iterable from callers, store tuples so instances stay hashable and immutable.
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(self, "owned_partitions", tuple(self.owned_partitions))


@dataclass(frozen=True, slots=True)
class ConsumerProtocolAssignment:
    assigned_partitions: Sequence[TopicPartition]  # stored as a tuple
    user_data: bytes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "assigned_partitions", tuple(self.assigned_partitions))

    def partitions(self) -> tuple[TopicPartition, ...]:
        return tuple(self.assigned_partitions)


# The short names the assignors and the group coordinator use.
Subscription = ConsumerProtocolSubscription
Assignment = ConsumerProtocolAssignment


# -- encoding -----------------------------------------------------------------------------------

def encode_subscription(sub: ConsumerProtocolSubscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    _check_version(version, SUBSCRIPTION_VERSION)
    out = bytearray(_I16.pack(version))
    out += _I32.pack(_count(len(sub.topics)))
    for topic in sub.topics:
        _write_string(out, topic)
    _write_bytes(out, sub.user_data)
    if version >= 1:
        _write_topic_partitions(out, sub.owned_partitions)
    if version >= 2:
        out += _I32.pack(sub.generation_id)
    if version >= 3:
        _write_string(out, sub.rack_id)
    return bytes(out)


def encode_assignment(assignment: ConsumerProtocolAssignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    _check_version(version, ASSIGNMENT_VERSION)
    out = bytearray(_I16.pack(version))
    _write_topic_partitions(out, assignment.assigned_partitions)
    _write_bytes(out, assignment.user_data)
    return bytes(out)


def _check_version(version: int, highest: int) -> None:
    if not 0 <= version <= highest:
        raise ValueError(f"version {version} is outside 0..{highest}")


def _count(n: int) -> int:
    if n > MAX_ARRAY_LENGTH:
        raise ProtocolEncodeError(f"an array of {n} elements is over Kafka's limit of {MAX_ARRAY_LENGTH} elements")
    return n


def _write_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
        return
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes does not fit an int16 length")
    out += _I16.pack(len(data))
    out += data


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += _I32.pack(-1)
        return
    out += _I32.pack(len(value))
    out += value


def _write_topic_partitions(out: bytearray, partitions: Iterable[TopicPartition]) -> None:
    by_topic: dict[str, list[int]] = {}  # grouped by topic, in order of first appearance
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out += _I32.pack(_count(len(by_topic)))
    for topic, numbers in by_topic.items():
        _write_string(out, topic)
        out += _I32.pack(_count(len(numbers)))
        out += struct.pack(f">{len(numbers)}i", *numbers)


# -- decoding -----------------------------------------------------------------------------------

def decode_subscription(data: bytes, group_instance_id: str | None = None) -> ConsumerProtocolSubscription:
    """Decode JoinGroup member metadata; ``group_instance_id`` comes from the JoinGroup response."""
    r = _Reader(data, "subscription")
    version = r.version()
    topics = tuple(r.string() for _ in range(r.count(2)))
    user_data = r.nullable_bytes()
    owned = r.topic_partitions() if version >= 1 else ()
    generation_id = r.int32() if version >= 2 else -1
    rack_id = r.nullable_string() if version >= 3 else None
    return ConsumerProtocolSubscription(topics, user_data, owned, generation_id, rack_id,
                                        group_instance_id)


def decode_assignment(data: bytes) -> ConsumerProtocolAssignment:
    """Decode a SyncGroup assignment. Empty bytes mean an empty assignment: the coordinator sends
    them to members the leader's assignment left out."""
    if not data:
        return ConsumerProtocolAssignment(())
    r = _Reader(data, "assignment")
    r.version()
    partitions = r.topic_partitions()
    user_data = r.nullable_bytes()
    return ConsumerProtocolAssignment(partitions, user_data)


class _Reader:
    """Bounds-checked big-endian reads; every failure is a ProtocolDecodeError."""

    __slots__ = ("_buf", "_pos", "_what")

    def __init__(self, data: bytes, what: str) -> None:
        self._buf = memoryview(data)
        self._pos = 0
        self._what = what

    def _fail(self, reason: str) -> ProtocolDecodeError:
        return ProtocolDecodeError(f"consumer protocol {self._what}: {reason} at byte {self._pos}")

    def _take(self, size: int) -> memoryview:
        end = self._pos + size
        if end > len(self._buf):
            raise self._fail(f"needs {size} bytes, {len(self._buf) - self._pos} left")
        chunk = self._buf[self._pos:end]
        self._pos = end
        return chunk

    def int16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def version(self) -> int:
        version = self.int16()
        if version < 0:
            raise self._fail(f"negative version {version}")
        return version

    def count(self, min_element_size: int) -> int:
        """An array length that the remaining bytes can actually hold."""
        n = self.int32()
        if n < 0:
            raise self._fail(f"array length {n} (arrays here are not nullable)")
        if n > MAX_ARRAY_LENGTH:
            raise self._fail(f"array of {n} elements is over Kafka's limit of {MAX_ARRAY_LENGTH} elements")
        if n * min_element_size > len(self._buf) - self._pos:
            raise self._fail(f"array of {n} elements cannot fit in the bytes left")
        return n

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise self._fail(f"string length {n}")
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise self._fail(f"string is not UTF-8 ({exc.reason})") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise self._fail("null where a string is required")
        return value

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise self._fail(f"bytes length {n}")
        return bytes(self._take(n))

    def topic_partitions(self) -> tuple[TopicPartition, ...]:
        result: list[TopicPartition] = []
        for _ in range(self.count(6)):  # each entry: a string length (2) and an array count (4)
            topic = self.string()
            n = self.count(4)
            numbers = struct.unpack(f">{n}i", self._take(4 * n))
            result.extend(TopicPartition(topic, p) for p in numbers)
        return tuple(result)
