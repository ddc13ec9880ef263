"""Kafka 4.4's limits on one message: at most 1,000,000 elements an array and 10,000 tagged fields a
section (``MessageUtil.MAX_ARRAY_LENGTH`` / ``MAX_TAGGED_FIELD_COUNT``; brokers refuse more).

Responses: a count over a limit is refused on the count alone, with a ProtocolDecodeError naming the
limit, before an element is read: the frames below declare a count with few or no bytes after it
(so running out of bytes would say something else), or with every byte there (so only the count
check refuses it, and tracemalloc shows nothing proportional to the count was allocated).
Requests: the largest we build (Fetch, OffsetCommit, ShareAcknowledge) stay far inside the limits,
checked by decoding them with a reader that records every count; one over the limit is refused
before anything is sent.

The Rust extension decodes record batches only (``records`` is a bytes field, not an array), so
these decoders are the pure-Python ones whichever record decoder runs.
"""

from __future__ import annotations

import time
import tracemalloc
import uuid
from typing import Any

import pytest

from aiokafka_lite.errors import ProtocolDecodeError, ProtocolEncodeError
from aiokafka_lite.fetch.requests import FetchSettings, FetchTarget
from aiokafka_lite.fetch.sessions import FetchPlan
from aiokafka_lite.group.consumer_protocol.offsets import commit_body
from aiokafka_lite.protocol import APIS_BY_KEY, Api, decode_response, encode_request
from aiokafka_lite.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from aiokafka_lite.protocol.messages import (
    FETCH,
    HEARTBEAT,
    METADATA,
    OFFSET_COMMIT,
    SASL_HANDSHAKE,
    SHARE_ACKNOWLEDGE,
)
from aiokafka_lite.protocol.primitives import MAX_ARRAY_LENGTH, MAX_TAGGED_FIELD_COUNT, Reader, Writer
from aiokafka_lite.protocol.schema import Array, Struct, decode_struct
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

ARRAY_LIMIT = "over Kafka's limit of 1000000 elements"
TAG_LIMIT = "over Kafka's limit of 10000 tagged fields"
FAST = 0.5  # seconds; a refused count takes microseconds
SMALL_PEAK = 256 * 1024  # bytes allocated while refusing a frame of megabytes


def test_the_limits_are_kafkas() -> None:
    assert MAX_ARRAY_LENGTH == 1_000_000
    assert MAX_TAGGED_FIELD_COUNT == 10_000


def uvarint(n: int) -> bytes:
    w = Writer()
    w.uvarint(n)
    return bytes(w.buf)


def refused(api: Api, version: int, frame: bytes) -> str:
    began = time.perf_counter()
    with pytest.raises(ProtocolDecodeError) as caught:
        decode_response(api, version, frame)
    assert time.perf_counter() - began < FAST
    return str(caught.value)


# ---------------------------------------------------------------- responses: counts with no data

CORRELATION = b"\x00\x00\x00\x01"
NO_TAGS = b"\x00"


def test_a_classic_array_of_1000001_elements_is_refused_by_its_count() -> None:
    # SaslHandshake v0: error_code, mechanisms [string] (int32 count), and nothing after the count.
    frame = CORRELATION + b"\x00\x00" + (MAX_ARRAY_LENGTH + 1).to_bytes(4, "big")
    assert ARRAY_LIMIT in refused(SASL_HANDSHAKE, 0, frame)


def test_a_compact_array_of_1000001_elements_is_refused_by_its_count() -> None:
    # Metadata v12 (flexible): header tags, throttle_time_ms, brokers compact array (count + 1).
    frame = CORRELATION + NO_TAGS + b"\x00\x00\x00\x00" + uvarint(MAX_ARRAY_LENGTH + 2)
    message = refused(METADATA, 12, frame)
    assert ARRAY_LIMIT in message
    assert "1000001 elements" in message


def test_a_body_tag_section_of_10001_fields_is_refused_by_its_count() -> None:
    # Heartbeat v4: header tags, throttle_time_ms, error_code, then the body's tag section.
    frame = CORRELATION + NO_TAGS + b"\x00\x00\x00\x00" + b"\x00\x00" + uvarint(MAX_TAGGED_FIELD_COUNT + 1)
    message = refused(HEARTBEAT, 4, frame)
    assert TAG_LIMIT in message
    assert "10001 tagged fields" in message


def test_a_header_tag_section_of_10001_fields_is_refused_by_its_count() -> None:
    frame = CORRELATION + uvarint(MAX_TAGGED_FIELD_COUNT + 1)
    message = refused(HEARTBEAT, 4, frame)
    assert f"10001 header tagged fields are {TAG_LIMIT}" in message


@pytest.mark.parametrize("count", [MAX_ARRAY_LENGTH + 1, 2**31 - 1])
def test_consumer_protocol_arrays_over_the_limit_are_refused_by_their_count(count: int) -> None:
    subscription = b"\x00\x00" + count.to_bytes(4, "big")
    with pytest.raises(ProtocolDecodeError, match=ARRAY_LIMIT):
        decode_subscription(subscription)
    # An assignment: v0, one topic "t", then the partition count with no partitions after it.
    assignment = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + count.to_bytes(4, "big")
    with pytest.raises(ProtocolDecodeError, match=ARRAY_LIMIT):
        decode_assignment(assignment)


# ---------------------------------------------------------------- responses: counts with every byte

def test_1000001_elements_with_every_byte_present_are_refused_before_allocating() -> None:
    """SaslHandshake v0 naming 1,000,001 empty mechanisms, all 2,000,002 bytes of them there: only
    the count check can refuse it, and nothing the size of the list is allocated first."""
    frame = (CORRELATION + b"\x00\x00" + (MAX_ARRAY_LENGTH + 1).to_bytes(4, "big")
             + b"\x00\x00" * (MAX_ARRAY_LENGTH + 1))
    tracemalloc.start()
    try:
        message = refused(SASL_HANDSHAKE, 0, frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ARRAY_LIMIT in message
    assert peak < SMALL_PEAK


def test_10001_tagged_fields_with_every_byte_present_are_refused() -> None:
    # Heartbeat v4's body tag section naming 10,001 unknown empty fields (tag, size 0), all present.
    fields = b"".join(uvarint(100 + i) + b"\x00" for i in range(MAX_TAGGED_FIELD_COUNT + 1))
    frame = CORRELATION + NO_TAGS + b"\x00\x00\x00\x00" + b"\x00\x00" + uvarint(MAX_TAGGED_FIELD_COUNT + 1) + fields
    assert TAG_LIMIT in refused(HEARTBEAT, 4, frame)


def test_the_limits_themselves_are_accepted() -> None:
    r = Reader(MAX_ARRAY_LENGTH.to_bytes(4, "big") + bytes(MAX_ARRAY_LENGTH))
    assert r.array_length(False) == MAX_ARRAY_LENGTH
    r = Reader(uvarint(MAX_ARRAY_LENGTH + 1) + bytes(MAX_ARRAY_LENGTH))
    assert r.array_length(True) == MAX_ARRAY_LENGTH
    r.finish("array")
    fields = b"".join(uvarint(100 + i) + b"\x00" for i in range(MAX_TAGGED_FIELD_COUNT))
    frame = CORRELATION + NO_TAGS + b"\x00\x00\x00\x07" + b"\x00\x00" + uvarint(MAX_TAGGED_FIELD_COUNT) + fields
    assert decode_response(HEARTBEAT, 4, frame) == {"throttle_time_ms": 7, "error_code": 0}


# ---------------------------------------------------------------- requests: the largest we build

class CountingReader(Reader):
    """A Reader that notes the largest array and tagged-field count it is asked to read."""

    __slots__ = ("largest_array", "largest_tags")

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.largest_array = 0
        self.largest_tags = 0

    def array_length(self, compact: bool, min_item_size: int = 1) -> int:
        n = super().array_length(compact, min_item_size)
        self.largest_array = max(self.largest_array, n)
        return n

    def tagged_field_count(self, what: str = "tagged fields") -> int:
        n = super().tagged_field_count(what)
        self.largest_tags = max(self.largest_tags, n)
        return n


def decoded_request(api: Api, frame: bytes) -> tuple[dict[str, Any], CountingReader]:
    """A request frame (with its size prefix) read back as a 4.4 broker would: limits checked."""
    r = CountingReader(frame[4:])
    r.int16()
    version = r.int16()
    r.int32()
    r.string()
    flexible = api.is_flexible(version)
    if flexible:
        for _ in range(r.tagged_field_count("header tagged fields")):
            r.uvarint()
            r.skip(r.uvarint())
    body = decode_struct(r, api.request, version, flexible)
    r.finish(f"{api.name} v{version} request", allow_trailing=False)
    return body, r


PARTITIONS = 10_000
TOPIC_IDS = {"big": uuid.UUID(int=7), "small": uuid.UUID(int=8)}


@pytest.mark.parametrize("version", [12, FETCH.max_version])
def test_a_fetch_of_10000_partitions_and_10000_forgotten_stays_within_the_limits(version: int) -> None:
    target = FetchTarget(offset=123_456, current_leader_epoch=5, last_fetched_epoch=4)
    send = {TopicPartition("big", p): target for p in range(PARTITIONS)}
    forget = [TopicPartition("small", p) for p in range(PARTITIONS)]
    plan = FetchPlan(session_id=1, epoch=2, send=send, forget=forget, wanted=dict(send))
    settings = FetchSettings(max_wait_ms=500, min_bytes=1, max_bytes=52_428_800,
                             partition_max_bytes=1_048_576, isolation_level=0, rack="")
    frame = encode_request(FETCH, version, 1, "c", settings.body(plan, TOPIC_IDS))
    body, r = decoded_request(FETCH, frame)
    assert len(body["topics"][0]["partitions"]) == PARTITIONS
    assert len(body["forgotten_topics_data"][0]["partitions"]) == PARTITIONS
    assert r.largest_array == PARTITIONS <= MAX_ARRAY_LENGTH
    assert r.largest_tags <= MAX_TAGGED_FIELD_COUNT


def test_an_offset_commit_of_10000_partitions_stays_within_the_limits() -> None:
    offsets = {TopicPartition("big", p): OffsetAndMetadata(1_000_000 + p, "metadata", 3) for p in range(PARTITIONS)}
    frame = encode_request(OFFSET_COMMIT, 9, 1, "c", commit_body("g", "m", 4, None, offsets))
    body, r = decoded_request(OFFSET_COMMIT, frame)
    assert len(body["topics"][0]["partitions"]) == PARTITIONS
    assert r.largest_array == PARTITIONS
    assert r.largest_tags <= MAX_TAGGED_FIELD_COUNT


def test_a_share_acknowledge_of_many_batches_stays_within_the_limits() -> None:
    """10,000 partitions; one holds 10,000 batches (every other offset decided), one a batch of 10,000
    mixed types (one per offset): the largest arrays a ShareAcknowledge of ours has. The batches are
    shaped as the share ledger's ``coalesce`` makes them (a run of contiguous offsets is one batch, with
    one type if all agree, else one per offset), written out here while fetch/share moves."""
    def batch(first: int, types: list[int]) -> dict[str, Any]:
        return {"first_offset": first, "last_offset": first + len(types) - 1, "acknowledge_types": types}

    gapped = [batch(2 * i, [1]) for i in range(PARTITIONS)]
    mixed = [batch(0, [1 + i % 3 for i in range(PARTITIONS)])]
    partitions = [{"partition_index": p, "acknowledgement_batches": [batch(p, [1])]} for p in range(PARTITIONS)]
    body = {"group_id": "g", "member_id": "m", "share_session_epoch": 3, "is_renew_ack": False, "topics": [
        {"topic_id": TOPIC_IDS["big"], "partitions": partitions},
        {"topic_id": TOPIC_IDS["small"], "partitions": [{"partition_index": 0, "acknowledgement_batches": gapped},
                                                        {"partition_index": 1, "acknowledgement_batches": mixed}]},
    ]}
    for version in range(SHARE_ACKNOWLEDGE.min_version, SHARE_ACKNOWLEDGE.max_version + 1):
        decoded, r = decoded_request(SHARE_ACKNOWLEDGE, encode_request(SHARE_ACKNOWLEDGE, version, 1, "c", body))
        small = decoded["topics"][1]["partitions"]
        assert len(decoded["topics"][0]["partitions"]) == PARTITIONS
        assert small[0]["acknowledgement_batches"] == gapped
        assert small[1]["acknowledgement_batches"] == mixed
        assert r.largest_array == PARTITIONS
        assert r.largest_tags <= MAX_TAGGED_FIELD_COUNT


def _tag_count_bound(struct: Struct) -> int:
    """The most tagged fields one section of ``struct`` (or of a struct in it) can carry."""
    most = sum(1 for f in struct.fields if f.tag is not None)
    for f in struct.fields:
        t = f.type.item if isinstance(f.type, Array) else f.type
        if isinstance(t, Struct):
            most = max(most, _tag_count_bound(t))
    return most


def test_no_request_of_ours_can_carry_more_tagged_fields_than_the_limit() -> None:
    # The encoder writes only the schema's own tagged fields (and none in the header).
    assert max(_tag_count_bound(api.request) for api in APIS_BY_KEY.values()) < MAX_TAGGED_FIELD_COUNT


# ---------------------------------------------------------------- requests: over the limit

def test_a_request_array_over_the_limit_is_refused_before_sending() -> None:
    partition = {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": None}
    body = {"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m", "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [partition] * (MAX_ARRAY_LENGTH + 1)}]}
    began = time.perf_counter()
    with pytest.raises(ProtocolEncodeError, match=f"cannot encode OffsetCommit v9 request: an array of "
                                                  f"1000001 elements is {ARRAY_LIMIT}"):
        encode_request(OFFSET_COMMIT, 9, 1, "c", body)
    assert time.perf_counter() - began < FAST


def test_consumer_protocol_arrays_over_the_limit_are_refused() -> None:
    with pytest.raises(ProtocolEncodeError, match=ARRAY_LIMIT):
        encode_subscription(ConsumerProtocolSubscription(("t",) * (MAX_ARRAY_LENGTH + 1)))
    # The partitions of one topic (the topics array counts 1).
    many = ConsumerProtocolAssignment([TopicPartition("t", 0)] * (MAX_ARRAY_LENGTH + 1))
    with pytest.raises(ProtocolEncodeError, match=ARRAY_LIMIT):
        encode_assignment(many)
