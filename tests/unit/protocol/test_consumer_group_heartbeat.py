"""ConsumerGroupHeartbeat (KIP-848): golden bytes written out by hand from the JSON spec, the
nullable assignment struct, and the v1-only regex field."""

from __future__ import annotations

import uuid

from aiokafka_lite.protocol import (
    APIS_BY_KEY,
    CONSUMER_GROUP_HEARTBEAT,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

TOPIC = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def _compact(text: str) -> bytes:
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def test_registered_under_key_68_flexible_from_v0() -> None:
    assert APIS_BY_KEY[68] is CONSUMER_GROUP_HEARTBEAT
    assert CONSUMER_GROUP_HEARTBEAT.is_flexible(0)
    assert CONSUMER_GROUP_HEARTBEAT.request_header_version(0) == 2


def test_join_request_v1_golden_bytes() -> None:
    body = {"group_id": "g", "member_id": "m1", "member_epoch": 0, "rebalance_timeout_ms": 300000,
            "subscribed_topic_names": ["t"], "topic_partitions": []}
    frame = encode_request(CONSUMER_GROUP_HEARTBEAT, 1, 7, "c", body)
    expected_body = (
        _compact("g") + _compact("m1") + (0).to_bytes(4, "big")
        + b"\x00"                                  # instance_id: null
        + b"\x00"                                  # rack_id: null
        + (300000).to_bytes(4, "big")
        + b"\x02" + _compact("t")                  # subscribed_topic_names: one name
        + b"\x00"                                  # subscribed_topic_regex (v1+): null
        + b"\x00"                                  # server_assignor: null
        + b"\x01"                                  # topic_partitions: empty array
        + b"\x00"                                  # no tagged fields
    )
    header = (68).to_bytes(2, "big") + (1).to_bytes(2, "big") + (7).to_bytes(4, "big") \
        + b"\x00\x01c" + b"\x00"
    assert frame == (len(header) + len(expected_body)).to_bytes(4, "big") + header + expected_body


def test_regex_field_exists_from_v1_only() -> None:
    body = {"group_id": "g", "member_id": "m", "member_epoch": 3, "subscribed_topic_regex": "a.*"}
    v0 = encode_request(CONSUMER_GROUP_HEARTBEAT, 0, 1, None, body)
    v1 = encode_request(CONSUMER_GROUP_HEARTBEAT, 1, 1, None, body)
    assert len(v1) - len(v0) == len(_compact("a.*"))
    assert decode_request(CONSUMER_GROUP_HEARTBEAT, v0[4:])[2]["subscribed_topic_regex"] is None
    assert decode_request(CONSUMER_GROUP_HEARTBEAT, v1[4:])[2]["subscribed_topic_regex"] == "a.*"


def test_unchanged_fields_go_out_as_null() -> None:
    frame = encode_request(CONSUMER_GROUP_HEARTBEAT, 1, 1, None,
                           {"group_id": "g", "member_id": "m", "member_epoch": 5})
    _, _, decoded = decode_request(CONSUMER_GROUP_HEARTBEAT, frame[4:])
    assert decoded["rebalance_timeout_ms"] == -1
    assert decoded["subscribed_topic_names"] is None
    assert decoded["topic_partitions"] is None
    assert decoded["instance_id"] is None


def test_response_with_assignment_golden_bytes() -> None:
    body = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": "m1",
            "member_epoch": 4, "heartbeat_interval_ms": 5000,
            "assignment": {"topic_partitions": [{"topic_id": TOPIC, "partitions": [0, 2]}]}}
    frame = encode_response(CONSUMER_GROUP_HEARTBEAT, 1, 9, body)
    expected = (
        (9).to_bytes(4, "big") + b"\x00"            # correlation id, header tags
        + (0).to_bytes(4, "big") + (0).to_bytes(2, "big")
        + b"\x00"                                   # error_message: null
        + _compact("m1") + (4).to_bytes(4, "big") + (5000).to_bytes(4, "big")
        + b"\x01"                                   # assignment present
        + b"\x02" + TOPIC.bytes + b"\x03" + (0).to_bytes(4, "big") + (2).to_bytes(4, "big")
        + b"\x00"                                   # topic struct tags
        + b"\x00"                                   # assignment struct tags
        + b"\x00"                                   # response tags
    )
    assert frame[4:] == expected
    assert decode_response(CONSUMER_GROUP_HEARTBEAT, 1, frame[4:]) == body


def test_response_without_assignment_decodes_as_none() -> None:
    body = {"throttle_time_ms": 0, "error_code": 110, "error_message": "fenced", "member_id": None,
            "member_epoch": -1, "heartbeat_interval_ms": 0, "assignment": None}
    frame = encode_response(CONSUMER_GROUP_HEARTBEAT, 0, 1, body)
    assert frame[4:].endswith(b"\xff\x00")          # null marker, then the response's tags
    assert decode_response(CONSUMER_GROUP_HEARTBEAT, 0, frame[4:]) == body
