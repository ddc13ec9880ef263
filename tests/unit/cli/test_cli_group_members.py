"""Which API `groups describe` asks for a group's members, and what it makes of the answers
(a fake cluster answering with real encoded-then-decoded response bodies; no broker)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from aiokafka_lite.cli.group_members import describe_members
from aiokafka_lite.errors import BrokerError, UnsupportedVersionError
from aiokafka_lite.protocol import Api, decode_response, encode_response
from aiokafka_lite.protocol.consumer_protocol import Assignment, Subscription, encode_assignment, encode_subscription
from aiokafka_lite.structs import TopicPartition


def _as_sent_by_a_broker(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    return decode_response(api, api.max_version, encode_response(api, api.max_version, 1, body)[4:])


class FakeCluster:
    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def send(self, node_id: int, api: Api, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.asked.append(api.name)
        answer = self.answers[api.name]
        if isinstance(answer, Exception):
            raise answer
        return _as_sent_by_a_broker(api, {"groups": [answer]})


TOPIC_ID = uuid.UUID(int=7)
CONSUMER_GROUP = {
    "group_id": "g", "group_state": "Reconciling", "group_epoch": 4, "assignment_epoch": 4, "assignor_name": "uniform",
    "members": [{
        "member_id": "m1", "instance_id": "i1", "member_epoch": 3, "client_id": "c", "client_host": "/h",
        "subscribed_topic_names": ["t", "gone"], "subscribed_topic_regex": "",
        "assignment": {"topic_partitions": [{"topic_id": TOPIC_ID, "topic_name": "t", "partitions": [2, 0]},
                                            {"topic_id": TOPIC_ID, "topic_name": "", "partitions": [5]}]},
        "target_assignment": {"topic_partitions": [{"topic_id": TOPIC_ID, "topic_name": "t", "partitions": [0]}]},
    }],
}
CLASSIC_GROUP = {
    "group_id": "g", "group_state": "Stable", "protocol_type": "consumer", "protocol_data": "range",
    "members": [{"member_id": "c-1", "client_id": "c", "client_host": "/h",
                 "member_metadata": encode_subscription(Subscription(["t"])),
                 "member_assignment": encode_assignment(Assignment([TopicPartition("t", 1), TopicPartition("t", 0)]))}],
}


def _members(cluster: FakeCluster) -> Any:
    return asyncio.run(describe_members(cluster, 1, "g"))  # type: ignore[arg-type]


def test_a_consumer_protocol_group_is_described_by_consumer_group_describe_alone():
    cluster = FakeCluster(ConsumerGroupDescribe=CONSUMER_GROUP)
    group = _members(cluster)
    assert cluster.asked == ["ConsumerGroupDescribe"]
    assert (group.group_type, group.state, group.assignor, group.group_epoch, group.assignment_epoch) == (
        "consumer", "Reconciling", "uniform", 4, 4)
    [member] = group.members
    assert (member.member_id, member.group_instance_id, member.member_epoch) == ("m1", "i1", 3)
    assert member.subscription == ["gone", "t"]
    assert member.subscription_regex is None  # Kafka 4.3.1 sends "" when there is none
    # A topic deleted since the assignment has no name any more: its id stands in.
    assert member.assignment == [TopicPartition(str(TOPIC_ID), 5), TopicPartition("t", 0), TopicPartition("t", 2)]
    assert member.target_assignment == [TopicPartition("t", 0)]


@pytest.mark.parametrize("consumer_group_describe", [
    pytest.param({"group_id": "g", "error_code": 69, "error_message": "Group g is not a consumer group."},
                 id="GROUP_ID_NOT_FOUND"),
    pytest.param({"group_id": "g", "error_code": 35}, id="UNSUPPORTED_VERSION"),
    pytest.param(UnsupportedVersionError("no ConsumerGroupDescribe here"), id="API-not-advertised"),
])
def test_a_classic_group_or_an_older_broker_falls_back_to_describe_groups(consumer_group_describe):
    cluster = FakeCluster(ConsumerGroupDescribe=consumer_group_describe, DescribeGroups=CLASSIC_GROUP)
    group = _members(cluster)
    assert cluster.asked == ["ConsumerGroupDescribe", "DescribeGroups"]
    assert (group.group_type, group.state, group.protocol_type, group.assignor) == (
        "classic", "Stable", "consumer", "range")
    assert (group.group_epoch, group.assignment_epoch) == (None, None)
    [member] = group.members
    assert member.subscription == ["t"]
    assert member.assignment == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert (member.member_epoch, member.target_assignment) == (None, None)


def test_other_errors_are_reported_not_retried_with_describe_groups():
    cluster = FakeCluster(ConsumerGroupDescribe={"group_id": "g", "error_code": 30, "error_message": "denied"})
    with pytest.raises(BrokerError, match=r"GROUP_AUTHORIZATION_FAILED.*ConsumerGroupDescribe 'g': denied"):
        _members(cluster)
    assert cluster.asked == ["ConsumerGroupDescribe"]


def test_describe_groups_errors_after_the_fallback_are_reported():
    cluster = FakeCluster(ConsumerGroupDescribe={"group_id": "g", "error_code": 69},
                          DescribeGroups={"group_id": "g", "error_code": 30, "group_state": ""})
    with pytest.raises(BrokerError, match=r"GROUP_AUTHORIZATION_FAILED.*DescribeGroups 'g'"):
        _members(cluster)


NEVER_SEEN_BY_TANSU = {  # Tansu 0.6's answers about a group it never saw (nor its offsets)
    "ConsumerGroupDescribe": {"group_id": "g", "group_state": "Empty", "group_epoch": -1, "assignment_epoch": -1,
                              "assignor_name": "", "members": []},
    "DescribeGroups": {"group_id": "g", "group_state": "Empty", "protocol_type": "", "protocol_data": "",
                       "members": []},
}


@pytest.mark.parametrize("answers", [
    pytest.param({"ConsumerGroupDescribe": {"group_id": "g", "error_code": 69},
                  "DescribeGroups": {"group_id": "g", "error_code": 69, "group_state": "Dead"}},
                 id="kafka-GROUP_ID_NOT_FOUND-twice"),
    pytest.param({"ConsumerGroupDescribe": UnsupportedVersionError("no ConsumerGroupDescribe here"),
                  "DescribeGroups": {"group_id": "g", "group_state": "Dead", "protocol_type": "", "members": []}},
                 id="older-kafka-Dead"),
    pytest.param(NEVER_SEEN_BY_TANSU, id="tansu-epoch-minus-1-and-no-protocol-type"),
])
def test_a_group_the_broker_does_not_know_is_not_known(answers):
    # As Java's admin client: GROUP_ID_NOT_FOUND from both APIs, or a Dead classic group.
    group = _members(FakeCluster(**answers))
    assert group.known is False
    assert group.members == []


def test_an_empty_group_that_had_members_is_known():
    answers = {"ConsumerGroupDescribe": {"group_id": "g", "error_code": 69},
               "DescribeGroups": {"group_id": "g", "group_state": "Empty", "protocol_type": "consumer",
                                  "protocol_data": "", "members": []}}
    assert _members(FakeCluster(**answers)).known is True


def test_what_tansu_leaves_empty_in_a_classic_member_is_not_reported():
    answers = {**NEVER_SEEN_BY_TANSU, "DescribeGroups": {
        "group_id": "g", "group_state": "Stable", "protocol_type": "consumer", "protocol_data": "",
        "members": [{"member_id": "m-1", "client_id": "", "client_host": "", "member_metadata": b"",
                     "member_assignment": b""}]}}
    group = _members(FakeCluster(**answers))
    assert (group.group_type, group.known, group.assignor) == ("classic", True, None)
    [member] = group.members
    assert (member.client_id, member.client_host, member.subscription, member.assignment) == (None, None, None, None)


def test_an_empty_assignment_while_rebalancing_is_an_empty_assignment():
    answers = {"ConsumerGroupDescribe": {"group_id": "g", "error_code": 69}, "DescribeGroups": {
        **CLASSIC_GROUP, "group_state": "CompletingRebalance",
        "members": [{**CLASSIC_GROUP["members"][0], "member_assignment": b""}]}}  # type: ignore[index]
    [member] = _members(FakeCluster(**answers)).members
    assert (member.client_id, member.subscription, member.assignment) == ("c", ["t"], [])
