"""ConsumerGroupDescribe (key 69) bytes, written out field by field from Kafka 4.3.1's schema.

The generic round trips in test_messages.py cover every version; here the exact bytes are pinned,
so a field in the wrong place or of the wrong width cannot round-trip its way past the tests.
"""

from __future__ import annotations

import uuid

from aiokafka_lite.protocol import (
    CONSUMER_GROUP_DESCRIBE,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

TOPIC_ID = uuid.UUID(int=1)

REQUEST_V1 = bytes.fromhex(
    "00000011"                  # size 17
    "0045" "0001" "00000007"    # api_key 69, version 1, correlation_id 7
    "000163" "00"               # client_id "c" (classic int16 length), header tag section
    "02" "0267"                 # group_ids: compact array of 1: compact "g"
    "00"                        # include_authorized_operations: false
    "00"                        # body tag section
)

# The member's fields up to and including target_assignment, the same in v0 and v1.
MEMBER_FIELDS = (
    "036d31"                    # member_id: compact "m1"
    "00" "00"                   # instance_id, rack_id: null
    "00000005"                  # member_epoch 5
    "0263"                      # client_id "c"
    "0b2f3132372e302e302e31"    # client_host "/127.0.0.1"
    "02" "0274"                 # subscribed_topic_names ["t"]
    "00"                        # subscribed_topic_regex: null
    "02"                        # assignment.topic_partitions: 1 entry
    "00000000000000000000000000000001"  # topic_id
    "0274"                      # topic_name "t"
    "03" "00000000" "00000001"  # partitions [0, 1]
    "00" "00"                   # topic-partitions tags, assignment tags
    "01" "00"                   # target_assignment: no topic_partitions, tags
)


def _response_hex(member_type: str) -> str:
    return (
        "00000007" "00"             # correlation_id 7, header tag section (header v1)
        "00000000"                  # throttle_time_ms
        "02"                        # groups: 1
        "0000" "00"                 # error_code 0, error_message null
        "0267"                      # group_id "g"
        "07" "537461626c65"         # group_state "Stable"
        "00000005" "00000005"       # group_epoch 5, assignment_epoch 5
        "08" "756e69666f726d"       # assignor_name "uniform"
        "02" + MEMBER_FIELDS + member_type + "00"  # members: 1; member_type (v1+); member tags
        + "80000000" "00"           # authorized_operations: not requested; group tags
        "00"                        # body tag section
    )


MEMBER = {
    "member_id": "m1", "instance_id": None, "rack_id": None, "member_epoch": 5, "client_id": "c",
    "client_host": "/127.0.0.1", "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
    "assignment": {"topic_partitions": [{"topic_id": TOPIC_ID, "topic_name": "t", "partitions": [0, 1]}]},
    "target_assignment": {"topic_partitions": []},
}
GROUP = {"error_code": 0, "error_message": None, "group_id": "g", "group_state": "Stable", "group_epoch": 5,
         "assignment_epoch": 5, "assignor_name": "uniform", "authorized_operations": -2147483648}


def test_request_bytes_match_the_spec():
    body = {"group_ids": ["g"], "include_authorized_operations": False}
    assert encode_request(CONSUMER_GROUP_DESCRIBE, 1, 7, "c", body) == REQUEST_V1
    assert decode_request(CONSUMER_GROUP_DESCRIBE, REQUEST_V1[4:]) == (1, 7, body)
    # v0 and v1 requests differ only in the version number.
    v0 = encode_request(CONSUMER_GROUP_DESCRIBE, 0, 7, "c", body)
    assert v0[:6] + v0[8:] == REQUEST_V1[:6] + REQUEST_V1[8:]


def test_v1_response_bytes_match_the_spec_and_decode_back():
    frame = bytes.fromhex(_response_hex(member_type="01"))
    body = {"throttle_time_ms": 0, "groups": [{**GROUP, "members": [{**MEMBER, "member_type": 1}]}]}
    assert encode_response(CONSUMER_GROUP_DESCRIBE, 1, 7, body)[4:] == frame
    assert decode_response(CONSUMER_GROUP_DESCRIBE, 1, frame) == body


def test_v0_response_has_no_member_type_and_decodes_it_as_unknown():
    frame = bytes.fromhex(_response_hex(member_type=""))
    decoded = decode_response(CONSUMER_GROUP_DESCRIBE, 0, frame)
    assert decoded["groups"][0]["members"] == [{**MEMBER, "member_type": -1}]
    body = {"groups": [{**GROUP, "members": [{**MEMBER, "member_type": 1}]}]}
    assert encode_response(CONSUMER_GROUP_DESCRIBE, 0, 7, body)[4:] == frame  # not written in v0


def test_an_unknown_tagged_field_in_a_member_is_skipped():
    # A newer broker may add tagged fields; tag 3 with two bytes replaces the member's empty tag section.
    plain = _response_hex(member_type="01")
    tagged = plain.replace(MEMBER_FIELDS + "01" + "00", MEMBER_FIELDS + "01" + "01" "03" "02" "abcd")
    assert tagged != plain
    decoded = decode_response(CONSUMER_GROUP_DESCRIBE, 1, bytes.fromhex(tagged))
    assert decoded["groups"][0]["members"] == [{**MEMBER, "member_type": 1}]
