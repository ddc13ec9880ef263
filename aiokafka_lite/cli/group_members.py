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
all three cases describe the group again with DescribeGroups, whose answer then stands.

A group the broker does not know is not an error here but ``GroupMembers.known`` False, as Java's
admin client decides: DescribeGroups answers GROUP_ID_NOT_FOUND or state Dead. Tansu 0.6 answers
a group it never saw as Empty, group epoch -1 (ConsumerGroupDescribe) and protocol type ""
(DescribeGroups), no members: also not known (the caller still looks for committed offsets, since
Tansu answers a group that only committed offsets the same way). Tansu also leaves a classic
member's client id, host, subscription and assignment and the group's protocol empty: those are
None ("not reported"), not blanks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._net.cluster import Cluster
from ..errors import BrokerError, UnsupportedVersionError
from ..protocol.consumer_protocol import decode_assignment, decode_subscription
from ..protocol.messages import CONSUMER_GROUP_DESCRIBE, DESCRIBE_GROUPS
from ..structs import TopicPartition

GROUP_ID_NOT_FOUND = 69
UNSUPPORTED_VERSION = 35
_TRY_CLASSIC = frozenset({GROUP_ID_NOT_FOUND, UNSUPPORTED_VERSION})
# Classic-group states in which a member's assignment bytes are legitimately empty.
_REBALANCING = frozenset({"PreparingRebalance", "CompletingRebalance"})


@dataclass
class MemberView:
    member_id: str
    group_instance_id: str | None
    client_id: str | None  # None: not reported
    client_host: str | None
    # None: the broker did not report it (Tansu leaves these empty for classic members).
    subscription: list[str] | None = field(default_factory=list)
    assignment: list[TopicPartition] | None = field(default_factory=list)
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
    assignor: str | None  # classic: the protocol the members agreed on (None: not reported); consumer: the broker's
    members: list[MemberView]
    group_epoch: int | None = None  # consumer-protocol groups only
    assignment_epoch: int | None = None
    known: bool = True  # False: the broker knows no such group (Dead, GROUP_ID_NOT_FOUND, never had a member)


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
        # Group epoch -1 (Tansu): no consumer group was ever there, so the classic answer stands.
        if classic is not None and (classic.members or group["group_epoch"] < 0):
            return classic
    # A consumer group that exists has had a member, so a group epoch; -1 is Tansu's "no such group".
    known = bool(group["members"]) or group["group_epoch"] >= 0
    return GroupMembers("consumer", group["group_state"], "consumer", group["assignor_name"],
                        [_consumer_member(m) for m in group["members"]],
                        group["group_epoch"], group["assignment_epoch"], known)


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
    if group["error_code"] == GROUP_ID_NOT_FOUND:
        return GroupMembers("classic", "Dead", "", "", [], known=False)
    if group["error_code"]:
        raise BrokerError(group["error_code"], f"DescribeGroups {group_id!r}")
    state, members = group["group_state"], group["members"]
    # A group that had a member keeps its protocol type; "" and no members is one never seen (Tansu).
    known = state != "Dead" and (bool(members) or bool(group["protocol_type"]))
    consumer_protocol = group["protocol_type"] == "consumer"
    # Members agree on a protocol when they join; none named while there are members: not reported.
    assignor = group["protocol_data"] or (None if members and state not in _REBALANCING else "")
    return GroupMembers("classic", state, group["protocol_type"], assignor,
                        [_classic_member(m, consumer_protocol, state) for m in members], known=known)


def _classic_member(raw: dict[str, Any], consumer_protocol: bool, state: str) -> MemberView:
    # A broker always knows a member's host, so "" means it did not say; likewise for the client id.
    member = MemberView(raw["member_id"], raw.get("group_instance_id"), raw["client_id"] or None,
                        raw["client_host"] or None)
    if not consumer_protocol:
        return member
    # A consumer-protocol member always sends its subscription; empty bytes: not reported.
    metadata, assignment = raw["member_metadata"], raw["member_assignment"]
    member.subscription = sorted(decode_subscription(metadata).topics) if metadata else None
    if assignment:
        member.assignment = sorted(decode_assignment(assignment).partitions())
    elif state not in _REBALANCING:  # empty only while rebalancing; otherwise not reported
        member.assignment = None
    return member
