"""The KIP-848 member state machine, driven by events and broker answers only (no I/O)."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from aiokafka_lite.errors import (
    BrokerError,
    FencedInstanceIdError,
    GroupProtocolError,
    UnreleasedInstanceIdError,
)
from aiokafka_lite.group.consumer_protocol.state import (
    TRANSITIONS,
    Event,
    IllegalKip848Transition,
    Kip848Machine,
    State,
    Subscription,
    broker_regex_usable,
    keepalive_body,
    leave_body,
    new_member_id,
    subscription_for,
)
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.subscription import SubscriptionState

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
NAMES = {T1: "orders", T2: "payments"}


def ok(epoch: int, assignment: dict[uuid.UUID, list[int]] | None = None, interval: int = 5000,
       code: int = 0) -> dict[str, Any]:
    return {"error_code": code, "error_message": None, "member_id": None, "member_epoch": epoch,
            "heartbeat_interval_ms": interval,
            "assignment": None if assignment is None else {
                "topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in assignment.items()]}}


def joined(topics: frozenset[str] = frozenset({"orders"}), **kw: Any) -> Kip848Machine:
    m = Kip848Machine("g", **kw)
    m.subscribe(Subscription(topics))
    return m


def reconcile(m: Kip848Machine) -> Any:
    plan = m.plan(NAMES.get)
    assert plan is not None
    assert m.reconciled(plan)
    return plan


def test_member_id_is_generated_once_and_kept_across_rejoins() -> None:
    m = joined()
    first = m.member_id
    assert len(first) == 22
    assert first != new_member_id()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(1, {T1: [0]}))
    m.on_heartbeat_response(ok(1, code=110))
    m.lost_done()
    assert m.heartbeat_request()["member_id"] == first
    assert m.member_epoch == 0


def test_join_heartbeat_carries_every_field() -> None:
    m = joined(rebalance_timeout_ms=60000, server_assignor="uniform", instance_id="i1", rack_id="r")
    assert m.state is State.JOINING
    body = m.heartbeat_request()
    assert body["member_epoch"] == 0
    assert body["subscribed_topic_names"] == ["orders"]
    assert body["rebalance_timeout_ms"] == 60000
    assert body["server_assignor"] == "uniform"
    assert body["instance_id"] == "i1"
    assert body["rack_id"] == "r"
    assert body["topic_partitions"] == []
    assert body["subscribed_topic_regex"] is None


def test_steady_heartbeats_send_only_what_changed() -> None:
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(3))
    assert m.state is State.STABLE
    body = m.heartbeat_request()
    assert body["member_epoch"] == 3
    assert body["subscribed_topic_names"] is None
    assert body["rebalance_timeout_ms"] == -1
    assert body["topic_partitions"] is None
    assert body["server_assignor"] is None
    m.on_heartbeat_response(ok(3))
    m.subscribe(Subscription(frozenset({"orders", "payments"})))
    assert m.heartbeat_request()["subscribed_topic_names"] == ["orders", "payments"]


def test_keepalive_answers_confirm_no_field() -> None:
    """Thread mode: answers to the thread's keep-alives (carried=False) move the epoch and the
    target, but what the broker has from us stays as the last carried request left it."""
    m = joined()
    join = m.heartbeat_request()
    m.on_heartbeat_response(ok(3), carried=True)
    keepalive = keepalive_body(join, 3)
    assert keepalive["member_epoch"] == 3
    assert keepalive["member_id"] == m.member_id
    assert all(keepalive[f] is None for f in ("subscribed_topic_names", "server_assignor", "topic_partitions",
                                              "rack_id"))
    m.on_heartbeat_response(ok(4, {T1: [0]}), carried=False)
    assert (m.member_epoch, m.state) == (4, State.RECONCILING)
    assert m.heartbeat_request()["subscribed_topic_names"] is None  # still known to the broker
    m.heartbeat_failed()
    m.on_heartbeat_response(ok(4), carried=False)
    assert m.heartbeat_request()["subscribed_topic_names"] == ["orders"]  # the lost answer: all again


def test_leave_body_epochs() -> None:
    assert leave_body("g", "m", None)["member_epoch"] == -1
    assert leave_body("g", "m", "i1")["member_epoch"] == -2
    # close(group_membership="leave"): a static member leaves for good, naming its instance.
    assert leave_body("g", "m", "i1", permanently=True) == {"group_id": "g", "member_id": "m", "member_epoch": -1,
                                                           "instance_id": "i1"}


def test_regex_subscription_goes_out_as_the_regex() -> None:
    m = Kip848Machine("g")
    m.subscribe(Subscription(regex="orders-.*"))
    body = m.heartbeat_request()
    assert body["subscribed_topic_regex"] == "orders-.*"
    assert body["subscribed_topic_names"] is None


def test_a_failed_heartbeat_makes_the_next_one_full() -> None:
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(2))
    m.heartbeat_request()
    m.heartbeat_failed()
    body = m.heartbeat_request()
    assert body["subscribed_topic_names"] == ["orders"]
    assert body["rebalance_timeout_ms"] == 300000
    assert body["topic_partitions"] == []


def test_target_assignment_is_reconciled_then_acknowledged() -> None:
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(1, {T1: [0, 1, 2, 3]}))
    assert m.state is State.RECONCILING
    plan = m.plan(NAMES.get)
    assert plan is not None
    assert plan.add == {TopicPartition("orders", p) for p in range(4)}
    assert plan.revoke == frozenset()
    assert m.reconciled(plan)
    assert m.state is State.ACKNOWLEDGING
    body = m.heartbeat_request()
    assert body["topic_partitions"] == [{"topic_id": T1, "partitions": [0, 1, 2, 3]}]
    m.on_heartbeat_response(ok(1))
    assert m.state is State.STABLE
    assert m.heartbeat_request()["topic_partitions"] is None


def test_only_moved_partitions_are_revoked() -> None:
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(1, {T1: [0, 1, 2, 3]}))
    reconcile(m)
    m.heartbeat_request()
    m.on_heartbeat_response(ok(2, {T1: [0, 1]}))
    assert m.state is State.RECONCILING
    plan = reconcile(m)
    assert plan.revoke == {TopicPartition("orders", 2), TopicPartition("orders", 3)}
    assert plan.add == frozenset()
    assert plan.keep == {TopicPartition("orders", 0), TopicPartition("orders", 1)}
    assert m.heartbeat_request()["topic_partitions"] == [{"topic_id": T1, "partitions": [0, 1]}]


def test_unknown_topic_ids_wait_for_metadata() -> None:
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(1, {T1: [0], T2: [0]}))
    plan = m.plan({T1: "orders"}.get)
    assert plan is not None
    assert plan.unresolved == {T2}
    assert plan.add == {TopicPartition("orders", 0)}
    assert m.reconciled(plan)
    assert m.state is State.RECONCILING  # payments-0 still to come
    plan = reconcile(m)
    assert plan.add == {TopicPartition("payments", 0)}
    assert m.state is State.ACKNOWLEDGING


def test_a_plan_carried_out_after_fencing_is_void() -> None:
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(1, {T1: [0]}))
    plan = m.plan(NAMES.get)
    assert plan is not None
    m.on_heartbeat_response(ok(1, code=110))
    assert m.state is State.FENCED
    assert not m.reconciled(plan)


@pytest.mark.parametrize("code", [25, 110])  # UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH
def test_fencing_loses_partitions_and_rejoins_at_epoch_zero(code: int) -> None:
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(4, {T1: [0]}))
    reconcile(m)
    verdict = m.on_heartbeat_response(ok(4, code=code))
    assert verdict.fenced
    assert m.state is State.FENCED
    assert not m.wants_heartbeat
    m.lost_done()
    assert (m.state, m.member_epoch, m.owned) == (State.JOINING, 0, frozenset())
    body = m.heartbeat_request()
    assert body["subscribed_topic_names"] == ["orders"]
    assert body["topic_partitions"] == []


@pytest.mark.parametrize(("code", "error"), [(111, UnreleasedInstanceIdError), (82, FencedInstanceIdError)])
def test_static_membership_errors_are_typed_and_fatal(code: int, error: type[BrokerError]) -> None:
    m = joined(instance_id="i1")
    verdict = m.on_heartbeat_response(ok(0, code=code))
    assert isinstance(verdict.fatal, error)
    assert m.state is State.FATAL
    assert m.fatal is verdict.fatal


@pytest.mark.parametrize("code", [35, 69, 23])  # UNSUPPORTED_VERSION, GROUP_ID_NOT_FOUND, INCONSISTENT_GROUP_PROTOCOL
def test_protocol_mismatch_names_the_setting(code: int) -> None:
    m = joined()
    verdict = m.on_heartbeat_response({**ok(0, code=code), "error_message": "Group g is not a consumer group."})
    assert isinstance(verdict.fatal, GroupProtocolError)
    assert "group_protocol='classic'" in str(verdict.fatal)
    assert "not a consumer group" in str(verdict.fatal)


@pytest.mark.parametrize("code", [81, 112, 30, 42, 128])
def test_other_errors_end_the_membership(code: int) -> None:
    m = joined()
    verdict = m.on_heartbeat_response(ok(0, code=code))
    assert verdict.fatal is not None
    assert verdict.fatal.code == code
    assert m.state is State.FATAL


@pytest.mark.parametrize(("code", "rediscover"), [(15, True), (16, True), (14, False), (7, False)])
def test_coordinator_errors_retry_with_a_full_heartbeat(code: int, rediscover: bool) -> None:
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(2))
    m.heartbeat_request()
    verdict = m.on_heartbeat_response(ok(2, code=code))
    assert verdict.retry
    assert verdict.rediscover is rediscover
    assert m.state is State.STABLE
    assert m.heartbeat_request()["subscribed_topic_names"] == ["orders"]


@pytest.mark.parametrize(("instance_id", "epoch"), [(None, -1), ("i1", -2)])
def test_leave_sends_epoch_minus_one_or_minus_two_for_static(instance_id: str | None, epoch: int) -> None:
    m = joined(instance_id=instance_id)
    m.heartbeat_request()
    m.on_heartbeat_response(ok(5, {T1: [0]}))
    reconcile(m)
    m.request_leave()
    assert m.state is State.PREPARE_LEAVING
    body = m.heartbeat_request()
    assert (body["member_epoch"], body["instance_id"]) == (epoch, instance_id)
    m.leave_sent()
    m.on_heartbeat_response(ok(epoch))  # the answer to the leave: ignored
    m.leave_done(lapsed=False)
    assert (m.state, m.member_epoch, m.owned) == (State.UNSUBSCRIBED, 0, frozenset())


def test_poll_lapse_leaves_then_is_stale_until_rejoin() -> None:
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(5, {T1: [0]}))
    reconcile(m)
    m.poll_lapsed()
    assert m.heartbeat_request()["member_epoch"] == -1
    m.leave_sent()
    m.leave_done(lapsed=True)
    assert m.state is State.STALE
    assert not m.wants_heartbeat
    assert not m.in_group
    m.rejoin()
    assert (m.state, m.member_epoch) == (State.JOINING, 0)


def test_late_heartbeat_answers_during_a_leave_are_ignored() -> None:
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(5))
    m.request_leave()
    m.on_heartbeat_response(ok(6, {T1: [0]}))
    m.on_heartbeat_response(ok(6, code=110))
    assert m.state is State.PREPARE_LEAVING
    assert m.member_epoch == 5


def test_new_target_while_stable_starts_reconciling() -> None:
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(1, {T1: [0]}))
    reconcile(m)
    m.on_heartbeat_response(ok(1))
    assert m.state is State.STABLE
    m.on_heartbeat_response(ok(2, {T1: [0, 1]}))
    assert m.state is State.RECONCILING
    assert m.heartbeat_interval_ms == 5000


def test_same_target_again_needs_no_reconciliation() -> None:
    m = joined()
    m.on_heartbeat_response(ok(1, {T1: [0]}))
    reconcile(m)
    m.on_heartbeat_response(ok(1, {T1: [0]}))
    assert m.state is State.STABLE
    assert m.plan(NAMES.get) is None


@pytest.mark.parametrize(("state", "event"), [
    (State.UNSUBSCRIBED, Event.HEARTBEAT_OK), (State.UNSUBSCRIBED, Event.RECONCILED),
    (State.STABLE, Event.LOST_DONE), (State.JOINING, Event.REJOIN), (State.FATAL, Event.SUBSCRIBED),
    (State.STALE, Event.HEARTBEAT_OK), (State.STABLE, Event.LEAVE_SENT),
])
def test_illegal_transitions_raise(state: State, event: Event) -> None:
    assert (state, event) not in TRANSITIONS
    m = Kip848Machine("g", state=state)
    with pytest.raises(IllegalKip848Transition, match=event.name):
        m.handle(event)


def test_every_state_can_become_fatal_and_only_close_is_left() -> None:
    for state in State:
        assert TRANSITIONS[(state, Event.FATAL)] is State.FATAL
    assert [e for (s, e) in TRANSITIONS if s is State.FATAL] == [Event.FATAL]


@pytest.mark.parametrize(("pattern", "version", "usable"), [
    ("orders-.*", 1, True), ("orders-.*", 0, False), ("(?=x)y", 1, False), (r"(a)\1", 1, False),
    (r"a\Z", 1, False), ("(?i)orders", 1, False), ("a|b[0-9]+", 1, True),
])
def test_broker_regex_only_for_v1_and_re2_compatible_patterns(pattern: str, version: int, usable: bool) -> None:
    assert broker_regex_usable(re.compile(pattern), version) is usable


def test_ignorecase_pattern_is_matched_client_side() -> None:
    sub = SubscriptionState()
    sub.subscribe_pattern(re.compile("orders", re.IGNORECASE))
    sub.match_pattern(["ORDERS", "x"])
    assert subscription_for(sub, 1) == Subscription(topics=frozenset({"ORDERS"}))


def test_joins_count_memberships_not_epochs() -> None:
    """A commit is bound to `joins` (see kip848_commits): new epochs within one membership keep
    it; every way back in after fencing or a lapse moves it on."""
    m = joined()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(4, {T1: [0]}))
    assert m.joins == 1
    reconcile(m)
    m.on_heartbeat_response(ok(5, {T1: [0, 1]}))  # a new assignment, a new epoch: the same membership
    assert m.joins == 1
    m.on_heartbeat_response(ok(5, code=110))  # fenced
    m.lost_done()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(7))
    assert m.joins == 2
    m.poll_lapsed()
    m.leave_sent()
    m.leave_done(lapsed=True)
    m.rejoin()
    m.heartbeat_request()
    m.on_heartbeat_response(ok(9))
    assert m.joins == 3
