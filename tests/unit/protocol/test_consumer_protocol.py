"""The consumer embedded protocol: exact bytes, round trips, newer versions, garbage."""

from __future__ import annotations

import contextlib
import dataclasses
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiokafka_lite.errors import ProtocolDecodeError
from aiokafka_lite.protocol.consumer_protocol import (
    ASSIGNMENT_VERSION,
    SUBSCRIPTION_VERSION,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from aiokafka_lite.structs import TopicPartition as TP

FULL_SUB = ConsumerProtocolSubscription(
    topics=("orders", "payments"), user_data=b"\x01\x02",
    owned_partitions=(TP("orders", 0), TP("orders", 2), TP("payments", 1)),
    generation_id=5, rack_id="rack-a")


# -- exact bytes (hand-computed from the JSON schemas) ------------------------------------------

def test_subscription_v0_bytes() -> None:
    sub = ConsumerProtocolSubscription(topics=["t"])
    assert encode_subscription(sub, version=0) == (
        b"\x00\x00"                      # version 0
        b"\x00\x00\x00\x01" b"\x00\x01t"  # topics: 1 x string "t"
        b"\xff\xff\xff\xff")             # user_data: null


def test_subscription_v3_bytes() -> None:
    sub = ConsumerProtocolSubscription(topics=["t"], user_data=b"u", owned_partitions=[TP("t", 3)],
                                       generation_id=9, rack_id=None)
    assert encode_subscription(sub) == (
        b"\x00\x03"
        b"\x00\x00\x00\x01" b"\x00\x01t"
        b"\x00\x00\x00\x01" b"u"
        b"\x00\x00\x00\x01" b"\x00\x01t" b"\x00\x00\x00\x01" b"\x00\x00\x00\x03"  # owned
        b"\x00\x00\x00\x09"                                                      # generation
        b"\xff\xff")                                                             # rack: null


def test_assignment_bytes_group_partitions_by_topic_in_first_seen_order() -> None:
    assignment = ConsumerProtocolAssignment([TP("b", 1), TP("a", 0), TP("b", 0)], user_data=None)
    assert encode_assignment(assignment, version=0) == (
        b"\x00\x00"
        b"\x00\x00\x00\x02"
        b"\x00\x01b" b"\x00\x00\x00\x02" b"\x00\x00\x00\x01" b"\x00\x00\x00\x00"
        b"\x00\x01a" b"\x00\x00\x00\x01" b"\x00\x00\x00\x00"
        b"\xff\xff\xff\xff")


# -- round trips ----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(SUBSCRIPTION_VERSION + 1))
def test_subscription_round_trip_keeps_the_fields_of_that_version(version: int) -> None:
    decoded = decode_subscription(encode_subscription(FULL_SUB, version))
    assert decoded.topics == FULL_SUB.topics
    assert decoded.user_data == FULL_SUB.user_data
    assert decoded.owned_partitions == (FULL_SUB.owned_partitions if version >= 1 else ())
    assert decoded.generation_id == (5 if version >= 2 else -1)
    assert decoded.rack_id == ("rack-a" if version >= 3 else None)


def test_decode_subscription_attaches_the_group_instance_id() -> None:
    decoded = decode_subscription(encode_subscription(FULL_SUB), group_instance_id="inst-1")
    assert decoded.group_instance_id == "inst-1"
    assert decoded == dataclasses.replace(FULL_SUB, group_instance_id="inst-1")


@pytest.mark.parametrize("version", range(ASSIGNMENT_VERSION + 1))
def test_assignment_round_trip(version: int) -> None:
    assignment = ConsumerProtocolAssignment([TP("x", 4), TP("y", 0), TP("x", 5)], user_data=b"")
    decoded = decode_assignment(encode_assignment(assignment, version))
    # Wire order groups by topic.
    assert decoded == ConsumerProtocolAssignment([TP("x", 4), TP("x", 5), TP("y", 0)], user_data=b"")


def test_empty_assignment_bytes_mean_no_partitions() -> None:
    assert decode_assignment(b"") == ConsumerProtocolAssignment(())


topic_names = st.text(min_size=1, max_size=20)
partition_ids = st.integers(min_value=0, max_value=2**31 - 1)
topic_partitions = st.lists(st.builds(TP, topic_names, partition_ids), max_size=20)


@given(topics=st.lists(topic_names, max_size=10), user_data=st.none() | st.binary(max_size=50),
       owned=topic_partitions, generation=st.integers(-(2**31), 2**31 - 1),
       rack=st.none() | st.text(max_size=10))
def test_subscription_round_trip_property(topics: list[str], user_data: bytes | None,
                                          owned: list[TP], generation: int, rack: str | None) -> None:
    sub = ConsumerProtocolSubscription(topics, user_data, owned, generation, rack)
    decoded = decode_subscription(encode_subscription(sub))
    assert decoded.topics == sub.topics
    assert decoded.user_data == user_data
    assert sorted(decoded.owned_partitions) == sorted(owned)
    assert decoded.generation_id == generation
    assert decoded.rack_id == rack


@given(partitions=topic_partitions, user_data=st.none() | st.binary(max_size=50))
def test_assignment_round_trip_property(partitions: list[TP], user_data: bytes | None) -> None:
    decoded = decode_assignment(encode_assignment(ConsumerProtocolAssignment(partitions, user_data)))
    assert sorted(decoded.partitions()) == sorted(partitions)
    assert decoded.user_data == user_data


# -- newer versions than ours -------------------------------------------------------------------

def test_newer_subscription_version_is_read_as_ours_and_trailing_fields_ignored() -> None:
    ours = encode_subscription(FULL_SUB)
    from_the_future = struct.pack(">h", 7) + ours[2:] + b"\x00\x00\x00\x2a future field"
    decoded = decode_subscription(from_the_future)
    assert decoded == FULL_SUB


def test_newer_assignment_version_is_read_as_ours() -> None:
    assignment = ConsumerProtocolAssignment([TP("t", 1)], b"ud")
    from_the_future = struct.pack(">h", 100) + encode_assignment(assignment)[2:] + b"\x01\x02\x03"
    assert decode_assignment(from_the_future) == assignment


def test_encoding_a_version_we_do_not_know_is_refused() -> None:
    with pytest.raises(ValueError, match="version 4"):
        encode_subscription(FULL_SUB, version=4)
    with pytest.raises(ValueError, match="version -1"):
        encode_assignment(ConsumerProtocolAssignment(()), version=-1)


def test_topic_name_too_long_for_int16_length_is_refused() -> None:
    with pytest.raises(ValueError, match="int16"):
        encode_subscription(ConsumerProtocolSubscription(["x" * 40000]))


# -- interoperability with another client's codec -------------------------------------------------

def test_aiokafka_decodes_our_v3_subscription_and_we_decode_its_v0() -> None:
    from aiokafka.coordinator.protocol import (
        ConsumerProtocolMemberAssignment,
        ConsumerProtocolMemberMetadata,
    )
    theirs = ConsumerProtocolMemberMetadata.decode(encode_subscription(FULL_SUB))
    assert (theirs.version, list(theirs.subscription), theirs.user_data) == (
        3, ["orders", "payments"], b"\x01\x02")
    ours = decode_subscription(ConsumerProtocolMemberMetadata(0, ["a", "b"], b"xy").encode())
    assert ours == ConsumerProtocolSubscription(("a", "b"), b"xy")
    their_assignment = ConsumerProtocolMemberAssignment(0, [("a", [2, 0])], b"").encode()
    assert decode_assignment(their_assignment) == ConsumerProtocolAssignment([TP("a", 2), TP("a", 0)], b"")


# -- garbage -----------------------------------------------------------------------------------

@pytest.mark.parametrize("cut", range(1, len(encode_subscription(FULL_SUB))))
def test_every_truncated_subscription_is_a_decode_error(cut: int) -> None:
    with pytest.raises(ProtocolDecodeError, match="subscription"):
        decode_subscription(encode_subscription(FULL_SUB)[:cut])


ASSIGNMENT_BYTES = encode_assignment(ConsumerProtocolAssignment([TP("t", 1), TP("u", 2)], b"ud"))


@pytest.mark.parametrize("cut", range(1, len(ASSIGNMENT_BYTES)))
def test_every_truncated_assignment_is_a_decode_error(cut: int) -> None:
    with pytest.raises(ProtocolDecodeError, match="assignment"):
        decode_assignment(ASSIGNMENT_BYTES[:cut])


def test_empty_subscription_is_a_decode_error() -> None:
    with pytest.raises(ProtocolDecodeError):
        decode_subscription(b"")


@pytest.mark.parametrize(("data", "reason"), [
    (b"\xff\xff" + b"\x00" * 8, "negative version"),
    (b"\x00\x00" + b"\xff\xff\xff\xff", "not nullable"),                  # null topics array
    (b"\x00\x00" + b"\x7f\xff\xff\xff" + b"\x00" * 16, "over Kafka's limit of 1000000"),  # 2**31-1 topics
    (b"\x00\x00" + b"\x00\x0f\x42\x41" + b"\x00" * 16, "over Kafka's limit of 1000000"),  # 1,000,001
    (b"\x00\x00" + b"\x00\x00\x03\xe8" + b"\x00" * 16, "cannot fit"),     # 1,000 topics
    (b"\x00\x00" + b"\x00\x00\x00\x01" + b"\xff\xff", "null where"),     # null topic name
    (b"\x00\x00" + b"\x00\x00\x00\x01" + b"\xff\xfe", "string length"),  # length -2
    (b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01\xff", "UTF-8"),
    (b"\x00\x00" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xfe", "bytes length"),
    (b"\x00\x01" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x01"
     + b"\x00\x01t" + b"\x10\x00\x00\x00", "over Kafka's limit"),       # huge partition count
    (b"\x00\x01" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x01"
     + b"\x00\x01t" + b"\x00\x00\x01\x00", "cannot fit"),               # 256 partitions, no bytes
])
def test_malformed_subscriptions(data: bytes, reason: str) -> None:
    with pytest.raises(ProtocolDecodeError, match=reason):
        decode_subscription(data)


@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_protocol_decode_error(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment):
        with contextlib.suppress(ProtocolDecodeError):
            decode(data)


@given(st.binary(max_size=60))
def test_mutated_valid_subscriptions_never_raise_anything_else(tail: bytes) -> None:
    data = encode_subscription(FULL_SUB)
    for cut in (2, 6, 14, 20):
        mutated = data[:cut] + tail
        with contextlib.suppress(ProtocolDecodeError):
            decode_subscription(mutated)
