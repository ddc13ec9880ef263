"""KIP-932 share-group APIs (keys 76-79): bytes written out field by field from Kafka 4.3.1's schemas.

The generic round trips in test_messages.py cover every version of each; here the exact bytes are
pinned, so a field in the wrong place or of the wrong width cannot round-trip its way past the tests.
All four APIs are flexible: compact strings and arrays (length + 1 as an unsigned varint, 0 for
null), a tag section ("00": none) closing every struct, request header v2 and response header v1.
"""

from __future__ import annotations

import uuid

from aiokafka_lite.protocol import (
    APIS_BY_KEY,
    SHARE_ACKNOWLEDGE,
    SHARE_FETCH,
    SHARE_GROUP_DESCRIBE,
    SHARE_GROUP_HEARTBEAT,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

TOPIC_ID = uuid.UUID(int=1)
TOPIC_ID_HEX = "00000000000000000000000000000001"


def _header(key: int, version: int) -> str:
    """Request header v2: api_key, api_version, correlation_id 7, client_id "c", no tags."""
    return f"{key:04x}" f"{version:04x}" "00000007" "000163" "00"


def _frame(hex_without_size: str) -> bytes:
    body = bytes.fromhex(hex_without_size)
    return len(body).to_bytes(4, "big") + body


def test_registered_under_keys_76_to_79() -> None:
    assert [APIS_BY_KEY[k] for k in (76, 77, 78, 79)] == [
        SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE]
    for api in (SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE):
        assert api.min_version == 1  # v0 was 4.0's early access, removed in 4.1
        assert api.request_header_version(api.min_version) == 2
        assert api.response_header_version(api.min_version) == 1


# ---------------------------------------------------------------- ShareAcknowledge (79)

ACK_BODY = {
    "group_id": "g", "member_id": "m1", "share_session_epoch": 1,
    "topics": [{"topic_id": TOPIC_ID, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
        {"first_offset": 0, "last_offset": 4, "acknowledge_types": [1]}]}]}],
}


def _ack_request_hex(version: int, renew: str = "") -> str:
    return (
        _header(79, version)
        + "0267"                    # group_id: compact "g"
        "036d31"                    # member_id: compact "m1"
        "00000001"                  # share_session_epoch 1
        + renew +                   # is_renew_ack (v2+)
        "02"                        # topics: 1
        + TOPIC_ID_HEX +            # topic_id
        "02"                        # partitions: 1
        "00000000"                  # partition_index 0
        "02"                        # acknowledgement_batches: 1
        "0000000000000000"          # first_offset 0
        "0000000000000004"          # last_offset 4
        "02" "01"                   # acknowledge_types: [1] (accept, the whole range)
        "00" "00" "00"              # batch, partition, topic tag sections
        "00"                        # body tag section
    )


def test_acknowledge_v1_request_bytes() -> None:
    expected = _frame(_ack_request_hex(1))
    assert len(expected) == 4 + 12 + 54
    assert encode_request(SHARE_ACKNOWLEDGE, 1, 7, "c", ACK_BODY) == expected
    assert decode_request(SHARE_ACKNOWLEDGE, expected[4:]) == (1, 7, {**ACK_BODY, "is_renew_ack": False})


def test_acknowledge_v2_request_adds_is_renew_ack_after_the_session_epoch() -> None:
    body = {**ACK_BODY, "is_renew_ack": True}
    expected = _frame(_ack_request_hex(2, renew="01"))
    assert encode_request(SHARE_ACKNOWLEDGE, 2, 7, "c", body) == expected
    assert decode_request(SHARE_ACKNOWLEDGE, expected[4:]) == (2, 7, body)


def _ack_response_hex(lock: str) -> str:
    return (
        "00000007" "00"             # correlation_id 7, header tag section
        "00000000"                  # throttle_time_ms
        "0000" "00"                 # error_code 0, error_message null
        + lock +                    # acquisition_lock_timeout_ms (v2+)
        "02"                        # responses: 1
        + TOPIC_ID_HEX +
        "02"                        # partitions: 1
        "00000000" "0000" "00"      # partition_index 0, error_code 0, error_message null
        "00000001" "00000005" "00"  # current_leader: leader_id 1, leader_epoch 5, tags
        "00" "00"                   # partition, topic tag sections
        "01"                        # node_endpoints: empty
        "00"                        # body tag section
    )


def test_acknowledge_responses_v1_and_v2() -> None:
    partition = {"partition_index": 0, "error_code": 0, "error_message": None,
                 "current_leader": {"leader_id": 1, "leader_epoch": 5}}
    body = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "acquisition_lock_timeout_ms": 30000,
            "responses": [{"topic_id": TOPIC_ID, "partitions": [partition]}], "node_endpoints": []}
    v1, v2 = bytes.fromhex(_ack_response_hex("")), bytes.fromhex(_ack_response_hex("00007530"))
    assert encode_response(SHARE_ACKNOWLEDGE, 2, 7, body)[4:] == v2
    assert decode_response(SHARE_ACKNOWLEDGE, 2, v2) == body
    assert encode_response(SHARE_ACKNOWLEDGE, 1, 7, body)[4:] == v1  # not written in v1
    assert decode_response(SHARE_ACKNOWLEDGE, 1, v1) == {**body, "acquisition_lock_timeout_ms": 0}


# ---------------------------------------------------------------- ShareFetch (78)

def _fetch_request_hex(version: int, v2_fields: str = "") -> str:
    return (
        _header(78, version)
        + "0267" "036d31"           # group_id "g", member_id "m1"
        "00000000"                  # share_session_epoch 0: open a session
        "000001f4"                  # max_wait_ms 500
        "00000001"                  # min_bytes 1
        "7fffffff"                  # max_bytes: the default
        "000001f4" "00000064"       # max_records 500, batch_size 100
        + v2_fields +               # share_acquire_mode, is_renew_ack (v2+)
        "02" + TOPIC_ID_HEX +       # topics: 1, topic_id
        "03"                        # partitions: 2
        "00000000" "01" "00"        #   0: no acknowledgement_batches, tags
        "00000002" "01" "00"        #   2: no acknowledgement_batches, tags
        "00"                        # topic tag section
        "02" + TOPIC_ID_HEX +       # forgotten_topics_data: 1, topic_id
        "02" "00000003" "00"        #   partitions [3], tags
        "00"                        # body tag section
    )


FETCH_BODY = {
    "group_id": "g", "member_id": "m1", "share_session_epoch": 0, "max_wait_ms": 500, "min_bytes": 1,
    "max_records": 500, "batch_size": 100,
    "topics": [{"topic_id": TOPIC_ID, "partitions": [
        {"partition_index": 0, "acknowledgement_batches": []},
        {"partition_index": 2, "acknowledgement_batches": []}]}],
    "forgotten_topics_data": [{"topic_id": TOPIC_ID, "partitions": [3]}],
}


def test_fetch_request_bytes_v1_and_v2() -> None:
    decoded = {**FETCH_BODY, "max_bytes": 0x7FFFFFFF, "share_acquire_mode": 0, "is_renew_ack": False}
    v1 = _frame(_fetch_request_hex(1))
    assert encode_request(SHARE_FETCH, 1, 7, "c", FETCH_BODY) == v1
    assert decode_request(SHARE_FETCH, v1[4:]) == (1, 7, decoded)
    body = {**FETCH_BODY, "share_acquire_mode": 1, "is_renew_ack": True}
    v2 = _frame(_fetch_request_hex(2, v2_fields="01" "01"))  # record-limit mode, renewals included
    assert encode_request(SHARE_FETCH, 2, 7, "c", body) == v2
    assert decode_request(SHARE_FETCH, v2[4:]) == (2, 7, {**body, "max_bytes": 0x7FFFFFFF})


RECORDS = bytes(range(1, 10))  # opaque here: the record decoder reads them (tests/unit/protocol/records)

FETCH_RESPONSE_V2 = (
    "00000007" "00"                 # correlation_id 7, header tag section
    "00000000" "0000" "00"          # throttle_time_ms, error_code 0, error_message null
    "000003e8"                      # acquisition_lock_timeout_ms 1000
    "02" + TOPIC_ID_HEX +           # responses: 1, topic_id
    "02"                            # partitions: 1
    "00000000"                      # partition_index 0
    "0000" "00"                     # error_code 0, error_message null
    "0000" "00"                     # acknowledge_error_code 0, acknowledge_error_message null
    "00000001" "00000000" "00"      # current_leader: leader_id 1, leader_epoch 0, tags
    "0a" + RECORDS.hex() +          # records: compact bytes of 9
    "02"                            # acquired_records: 1
    "0000000000000000"              # first_offset 0
    "0000000000000008"              # last_offset 8
    "0001" "00"                     # delivery_count 1, tags
    "00" "00"                       # partition, topic tag sections
    "02"                            # node_endpoints: 1
    "00000002" "0262" "00002328"    # node_id 2, host "b", port 9000
    "00" "00"                       # rack null, tags
    "00"                            # body tag section
)


def test_fetch_response_v2_bytes_and_zero_copy_records() -> None:
    frame = bytes.fromhex(FETCH_RESPONSE_V2)
    decoded = decode_response(SHARE_FETCH, 2, frame)
    [part] = decoded["responses"][0]["partitions"]
    records = part.pop("records")
    assert isinstance(records, memoryview)
    assert records.obj is frame  # a view into the frame, not a copy
    assert bytes(records) == RECORDS
    assert part == {"partition_index": 0, "error_code": 0, "error_message": None, "acknowledge_error_code": 0,
                    "acknowledge_error_message": None, "current_leader": {"leader_id": 1, "leader_epoch": 0},
                    "acquired_records": [{"first_offset": 0, "last_offset": 8, "delivery_count": 1}]}
    assert decoded["acquisition_lock_timeout_ms"] == 1000
    assert decoded["node_endpoints"] == [{"node_id": 2, "host": "b", "port": 9000, "rack": None}]
    part["records"] = RECORDS
    assert encode_response(SHARE_FETCH, 2, 7, decoded)[4:] == frame
    assert encode_response(SHARE_FETCH, 1, 7, decoded)[4:] == frame  # v1 responses are the same


# ---------------------------------------------------------------- ShareGroupHeartbeat (76)

def test_heartbeat_join_request_bytes() -> None:
    body = {"group_id": "g", "member_id": "m1", "member_epoch": 0, "subscribed_topic_names": ["t"]}
    expected = _frame(
        _header(76, 1)
        + "0267" "036d31"           # group_id "g", member_id "m1"
        "00000000"                  # member_epoch 0: join
        "00"                        # rack_id: null
        "02" "0274"                 # subscribed_topic_names: ["t"]
        "00"                        # body tag section
    )
    assert encode_request(SHARE_GROUP_HEARTBEAT, 1, 7, "c", body) == expected
    assert decode_request(SHARE_GROUP_HEARTBEAT, expected[4:]) == (1, 7, {**body, "rack_id": None})


def test_heartbeat_unchanged_subscription_goes_out_as_null() -> None:
    frame = encode_request(SHARE_GROUP_HEARTBEAT, 1, 7, "c", {"group_id": "g", "member_id": "m1", "member_epoch": 3})
    assert frame[-3:] == bytes.fromhex("00" "00" "00")  # rack_id null, subscribed_topic_names null, tags


def test_heartbeat_response_bytes_with_and_without_assignment() -> None:
    head = (
        "00000007" "00"             # correlation_id 7, header tag section
        "00000000" "0000" "00"      # throttle_time_ms, error_code 0, error_message null
        "036d31"                    # member_id "m1"
        "00000003"                  # member_epoch 3
        "000001f4"                  # heartbeat_interval_ms 500
    )
    with_assignment = bytes.fromhex(
        head + "01"                 # assignment: present
        "02" + TOPIC_ID_HEX +       # topic_partitions: 1, topic_id
        "03" "00000000" "00000001"  # partitions [0, 1]
        "00" "00"                   # topic-partitions tags, assignment tags
        "00"                        # body tag section
    )
    body = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": "m1", "member_epoch": 3,
            "heartbeat_interval_ms": 500,
            "assignment": {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": [0, 1]}]}}
    assert encode_response(SHARE_GROUP_HEARTBEAT, 1, 7, body)[4:] == with_assignment
    assert decode_response(SHARE_GROUP_HEARTBEAT, 1, with_assignment) == body
    unchanged = bytes.fromhex(head + "ff" "00")  # assignment: null (-1), body tags
    assert decode_response(SHARE_GROUP_HEARTBEAT, 1, unchanged) == {**body, "assignment": None}


# ---------------------------------------------------------------- ShareGroupDescribe (77)

def test_describe_request_and_response_bytes() -> None:
    request = _frame(_header(77, 1) + "02" "0267" "01" "00")  # group_ids ["g"], include ops: true, tags
    body = {"group_ids": ["g"], "include_authorized_operations": True}
    assert encode_request(SHARE_GROUP_DESCRIBE, 1, 7, "c", body) == request
    assert decode_request(SHARE_GROUP_DESCRIBE, request[4:]) == (1, 7, body)

    response = bytes.fromhex(
        "00000007" "00"             # correlation_id 7, header tag section
        "00000000"                  # throttle_time_ms
        "02"                        # groups: 1
        "0000" "00"                 # error_code 0, error_message null
        "0267"                      # group_id "g"
        "07" "537461626c65"         # group_state "Stable"
        "00000003" "00000003"       # group_epoch 3, assignment_epoch 3
        "07" "73696d706c65"         # assignor_name "simple"
        "02"                        # members: 1
        "036d31"                    # member_id "m1"
        "00"                        # rack_id: null
        "00000003"                  # member_epoch 3
        "0263"                      # client_id "c"
        "0b" "2f3132372e302e302e31"  # client_host "/127.0.0.1"
        "02" "0274"                 # subscribed_topic_names ["t"]
        "02" + TOPIC_ID_HEX +       # assignment.topic_partitions: 1, topic_id
        "0274"                      # topic_name "t"
        "02" "00000000"             # partitions [0]
        "00" "00" "00"              # topic-partitions, assignment, member tag sections
        "80000000"                  # authorized_operations: not requested
        "00" "00"                   # group tag section, body tag section
    )
    member = {"member_id": "m1", "rack_id": None, "member_epoch": 3, "client_id": "c", "client_host": "/127.0.0.1",
              "subscribed_topic_names": ["t"],
              "assignment": {"topic_partitions": [{"topic_id": TOPIC_ID, "topic_name": "t", "partitions": [0]}]}}
    described = {"throttle_time_ms": 0, "groups": [{
        "error_code": 0, "error_message": None, "group_id": "g", "group_state": "Stable", "group_epoch": 3,
        "assignment_epoch": 3, "assignor_name": "simple", "members": [member],
        "authorized_operations": -2147483648}]}
    assert encode_response(SHARE_GROUP_DESCRIBE, 1, 7, described)[4:] == response
    assert decode_response(SHARE_GROUP_DESCRIBE, 1, response) == described
