"""close()'s group_membership argument (KIP-1092) and the LeaveGroup body a static member sends
when it is told to leave."""

from __future__ import annotations

import pytest

from aiokafka_lite import GroupMembershipOperation
from aiokafka_lite.consumer.closing import membership_operation
from aiokafka_lite.errors import InvalidArgumentError
from aiokafka_lite.group.classic.coordinator import leave_body


@pytest.mark.parametrize(("given", "operation"), [
    ("leave", GroupMembershipOperation.LEAVE), ("remain", GroupMembershipOperation.REMAIN),
    ("default", GroupMembershipOperation.DEFAULT),
    (GroupMembershipOperation.REMAIN, GroupMembershipOperation.REMAIN),
])
def test_group_membership_values(given: object, operation: GroupMembershipOperation) -> None:
    assert membership_operation(given) is operation


@pytest.mark.parametrize("given", ["LEAVE_GROUP", "Leave", "", None, 1, True])
def test_other_group_membership_values_are_refused_naming_the_allowed_ones(given: object) -> None:
    with pytest.raises(InvalidArgumentError, match=r"group_membership must be one of 'leave', 'remain', "
                                                   r"'default' \(or a GroupMembershipOperation\), got "):
        membership_operation(given)


def test_a_static_member_leaving_names_its_instance_id() -> None:
    assert leave_body("g", "m-1", "closing", "static-a")["members"] == [
        {"member_id": "m-1", "group_instance_id": "static-a", "reason": "closing"}]
    assert leave_body("g", "m-1", "closing")["members"][0]["group_instance_id"] is None
