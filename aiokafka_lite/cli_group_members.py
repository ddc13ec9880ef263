"""A group's members for ``groups describe``, from whichever API describes the group's protocol.

Two kinds of consumer group share one group id space on Kafka 4.x brokers:

* **consumer** (KIP-848): the broker assigns. ConsumerGroupDescribe (key 69) answers with member
  epochs, structured subscriptions, each member's current and target assignment, the group epoch,
  the assignment epoch and the broker-side assignor's name.
* **classic**: JoinGroup/SyncGroup, a client-side assignor. DescribeGroups (key 15) answers with
  ConsumerProtocol bytes for each member's subscription and assignment.

Asked about a consumer-protocol group, Kafka 4.3.1's DescribeGroups v6 answers GROUP_ID_NOT_FOUND
("Group g is not a classic group.") with state Dead and no members; v0-v5, which cannot carry that
error, answer error 0, state Dead, an empty protocol type and no members, as for a group that does
not exist. Only ConsumerGroupDescribe can see such a group.

Which API to use follows Java's Admin.describeConsumerGroups (and so kafka-consumer-groups.sh
--describe): ask ConsumerGroupDescribe first; if the group is not a consumer-protocol group the
broker answers GROUP_ID_NOT_FOUND ("Group g is not a consumer group."), and if the broker does not
know the API (Kafka before 3.7, Tansu) it cannot be asked at all or answers UNSUPPORTED_VERSION; in
all three cases describe the group again with DescribeGroups, whose answer then stands (a missing
group is reported from there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._net.cluster import Cluster
from .errors import BrokerError, UnsupportedVersionError
from .protocol.consumer_protocol import decode_assignment, decode_subscription
from .protocol.messages import CONSUMER_GROUP_DESCRIBE, DESCRIBE_GROUPS
from .structs import TopicPartition

GROUP_ID_NOT_FOUND = 69
UNSUPPORTED_VERSION = 35
_TRY_CLASSIC = frozenset({GROUP_ID_NOT_FOUND, UNSUPPORTED_VERSION})


@dataclass
class MemberView:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    subscription: list[str] = field(default_factory=list)
    assignment: list[TopicPartition] = field(default_factory=list)
    # Consumer-protocol groups only (None in classic ones): the member's epoch, the regex it
    # subscribed with, and where the broker's assignor wants its partitions to end up.
    member_epoch: int | None = None
    subscription_regex: str | None = None
    target_assignment: list[TopicPartition] | None = None


@dataclass
class GroupMembers:
    """What one describe call says about a group, before offsets are looked up."""

    group_type: str  # "consumer" (KIP-848) or "classic"
    state: str
    protocol_type: str
    assignor: str  # classic: the protocol the members agreed on; consumer: the broker's assignor
    members: list[MemberView]
    group_epoch: int | None = None  # consumer-protocol groups only
    assignment_epoch: int | None = None


async def describe_members(cluster: Cluster, node_id: int, group_id: str) -> GroupMembers:
    """The group's members, asking the coordinator ``node_id`` as Java's admin client would."""
    try:
        response = await cluster.send(node_id, CONSUMER_GROUP_DESCRIBE,
                                      {"group_ids": [group_id], "include_authorized_operations": False})
    except UnsupportedVersionError:
        return await _describe_classic(cluster, node_id, group_id)
    group: dict[str, Any] = response["groups"][0]
    if group["error_code"] in _TRY_CLASSIC:
        return await _describe_classic(cluster, node_id, group_id)
    if group["error_code"]:
        raise BrokerError(group["error_code"], f"ConsumerGroupDescribe {group_id!r}: {group['error_message']}")
    if not group["members"]:
        # Kafka answers GROUP_ID_NOT_FOUND for a classic group; a broker that answers an empty
        # consumer group instead (Tansu 0.6) would hide the classic members: ask DescribeGroups too.
        try:
            classic = await _describe_classic(cluster, node_id, group_id)
        except BrokerError:
            classic = None  # not a classic group either: the consumer group's answer stands
        if classic is not None and classic.members:
            return classic
    return GroupMembers("consumer", group["group_state"], "consumer", group["assignor_name"],
                        [_consumer_member(m) for m in group["members"]],
                        group["group_epoch"], group["assignment_epoch"])


def _partitions(assignment: dict[str, Any]) -> list[TopicPartition]:
    # The broker names each topic; a topic deleted meanwhile has no name left, only its id.
    return sorted(TopicPartition(t["topic_name"] or str(t["topic_id"]), p)
                  for t in assignment["topic_partitions"] for p in t["partitions"])


def _consumer_member(raw: dict[str, Any]) -> MemberView:
    return MemberView(raw["member_id"], raw["instance_id"], raw["client_id"], raw["client_host"],
                      sorted(raw["subscribed_topic_names"]), _partitions(raw["assignment"]),
                      raw["member_epoch"], raw["subscribed_topic_regex"] or None,
                      _partitions(raw["target_assignment"]))


async def _describe_classic(cluster: Cluster, node_id: int, group_id: str) -> GroupMembers:
    response = await cluster.send(node_id, DESCRIBE_GROUPS, {"groups": [group_id],
                                                             "include_authorized_operations": False})
    group: dict[str, Any] = response["groups"][0]
    if group["error_code"]:
        raise BrokerError(group["error_code"], f"DescribeGroups {group_id!r}")
    consumer_protocol = group["protocol_type"] == "consumer"
    return GroupMembers("classic", group["group_state"], group["protocol_type"], group["protocol_data"],
                        [_classic_member(m, consumer_protocol) for m in group["members"]])


def _classic_member(raw: dict[str, Any], consumer_protocol: bool) -> MemberView:
    member = MemberView(raw["member_id"], raw.get("group_instance_id"), raw["client_id"], raw["client_host"])
    # Only "consumer" groups carry ConsumerProtocol bytes; while rebalancing the assignment is empty.
    if consumer_protocol and raw["member_metadata"]:
        member.subscription = sorted(decode_subscription(raw["member_metadata"]).topics)
    if consumer_protocol and raw["member_assignment"]:
        member.assignment = sorted(decode_assignment(raw["member_assignment"]).partitions())
    return member
