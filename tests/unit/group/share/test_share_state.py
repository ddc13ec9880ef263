"""The KIP-932 share member state machine, driven by events and scripted broker answers (no I/O)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from aiokafka_lite.errors import BrokerError, GroupProtocolError, IllegalStateError
from aiokafka_lite.group.share.errors import classify
from aiokafka_lite.group.share.state import (
    IN_GROUP,
    TRANSITIONS,
    Event,
    IllegalShareTransition,
    ShareMachine,
    State,
)
from aiokafka_lite.structs import TopicPartition

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
NAMES = {T1: "jobs", T2: "mail"}


def answer(epoch: int = 1, assignment: dict[uuid.UUID, list[int]] | None = None, interval: int = 500,
           code: int = 0, message: str | None = None, member_id: str | None = None) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "member_id": member_id,
            "member_epoch": epoch, "heartbeat_interval_ms": interval,
            "assignment": None if assignment is None else {
                "topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in assignment.items()]}}


def joining(topics: tuple[str, ...] = ("jobs",), rack: str | None = None) -> ShareMachine:
    m = ShareMachine("workers", rack_id=rack)
    m.subscribe(topics)
    return m


def stable(assignment: dict[uuid.UUID, list[int]] | None = None) -> ShareMachine:
    m = joining()
    m.heartbeat_request()
    m.on_heartbeat_response(answer(1, assignment if assignment is not None else {T1: [0, 1]}))
    return m


# ---------------------------------------------------------------- joining and heartbeats


def test_join_heartbeat_carries_the_member_id_epoch_0_the_topics_and_the_rack() -> None:
    m = joining(("mail", "jobs"), rack="r1")
    assert m.state is State.JOINING
    body = m.heartbeat_request()
    assert body == {"group_id": "workers", "member_id": m.member_id, "member_epoch": 0, "rack_id": "r1",
                    "subscribed_topic_names": ["jobs", "mail"]}
    assert len(m.member_id) == 22
    assert m.member_id != ShareMachine("workers").member_id


def test_join_answer_gives_the_epoch_the_interval_and_the_assignment() -> None:
    m = joining()
    m.heartbeat_request()
    verdict = m.on_heartbeat_response(answer(3, {T1: [2, 0], T2: [1]}, interval=500))
    assert verdict.code == 0
    assert not verdict.fenced
    assert not verdict.retry
    assert not verdict.fatal
    assert m.state is State.STABLE
    assert m.in_group
    assert (m.member_epoch, m.heartbeat_interval_ms, m.joins, m.assignments) == (3, 500, 1, 1)
    assert m.assignment == {(T1, 0), (T1, 2), (T2, 1)}


def test_later_heartbeats_send_only_what_changed() -> None:
    m = stable()
    body = m.heartbeat_request()
    assert body["member_epoch"] == 1
    assert body["rack_id"] is None
    assert body["subscribed_topic_names"] is None
    m.on_heartbeat_response(answer(1))
    m.subscribe(["jobs", "mail"])  # a subscription change goes out in the next heartbeat
    assert m.state is State.STABLE
    assert m.heartbeat_request()["subscribed_topic_names"] == ["jobs", "mail"]
    m.on_heartbeat_response(answer(2))
    assert m.heartbeat_request()["subscribed_topic_names"] is None


def test_a_heartbeat_without_an_answer_makes_the_next_one_send_everything_again() -> None:
    m = stable()
    m.subscribe(["mail"])
    m.heartbeat_request()
    m.heartbeat_failed()  # connection lost: the broker may not have the new topics
    assert m.heartbeat_request()["subscribed_topic_names"] == ["mail"]


def test_a_null_assignment_means_unchanged_and_an_empty_one_means_nothing() -> None:
    m = stable({T1: [0, 1]})
    m.heartbeat_request()
    m.on_heartbeat_response(answer(1, None))
    assert m.assignment == {(T1, 0), (T1, 1)}
    assert m.assignments == 1
    m.heartbeat_request()
    m.on_heartbeat_response(answer(2, {}))
    assert m.assignment == frozenset()
    assert m.assignments == 2
    assert m.member_epoch == 2


def test_topic_ids_are_named_through_the_metadata_as_far_as_it_knows_them() -> None:
    m = stable({T1: [0], T2: [3]})
    known: dict[uuid.UUID, str] = {T1: "jobs"}
    assert m.resolve(known.get) == {T2}
    assert m.named_assignment() == {TopicPartition("jobs", 0)}
    known[T2] = "mail"
    assert m.resolve(known.get) == frozenset()
    assert m.named_assignment() == {TopicPartition("jobs", 0), TopicPartition("mail", 3)}


def test_an_empty_subscription_is_refused_subscribe_is_not_leave() -> None:
    with pytest.raises(ValueError, match="at least one topic"):
        ShareMachine("workers").subscribe([])


# ---------------------------------------------------------------- error classes


@pytest.mark.parametrize("code", [25, 110], ids=["UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH"])
def test_fencing_rejoins_with_epoch_0_and_the_same_member_id(code: int) -> None:
    m = stable()
    first = m.member_id
    m.heartbeat_request()
    verdict = m.on_heartbeat_response(answer(5, code=code))
    assert verdict.fenced
    assert not verdict.retry
    assert verdict.fatal is None
    assert m.state is State.JOINING
    assert m.member_epoch == 0
    assert m.assignment == frozenset()
    assert m.fenced == 1
    body = m.heartbeat_request()
    assert (body["member_id"], body["member_epoch"], body["subscribed_topic_names"]) == (first, 0, ["jobs"])


@pytest.mark.parametrize("code", [15, 16], ids=["COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"])
def test_a_moved_coordinator_is_looked_up_again_and_the_heartbeat_retried(code: int) -> None:
    m = stable()
    m.heartbeat_request()
    verdict = m.on_heartbeat_response(answer(9, code=code))
    assert verdict.retry
    assert verdict.rediscover
    assert verdict.fatal is None
    assert (m.state, m.member_epoch) == (State.STABLE, 1)  # nothing changes but the resend
    assert m.heartbeat_request()["subscribed_topic_names"] == ["jobs"]


@pytest.mark.parametrize("code", [14, 7], ids=["COORDINATOR_LOAD_IN_PROGRESS", "REQUEST_TIMED_OUT"])
def test_retriable_codes_are_retried_at_the_next_interval(code: int) -> None:
    m = joining()
    m.heartbeat_request()
    verdict = m.on_heartbeat_response(answer(0, code=code))
    assert verdict.retry
    assert not verdict.rediscover
    assert verdict.fatal is None
    assert m.state is State.JOINING


@pytest.mark.parametrize(("code", "name", "advice"), [
    (30, "GROUP_AUTHORIZATION_FAILED", "READ on group 'workers'"),
    (42, "INVALID_REQUEST", "please report it"),
    (81, "GROUP_MAX_SIZE_REACHED", "group.share.max.size"),
    (29, "TOPIC_AUTHORIZATION_FAILED", "cannot go on"),
])
def test_fatal_codes_end_the_membership_with_a_typed_error_saying_what_to_do(code: int, name: str, advice: str) -> None:
    m = stable()
    m.heartbeat_request()
    verdict = m.on_heartbeat_response(answer(1, code=code, message="the broker's words"))
    assert isinstance(verdict.fatal, BrokerError)
    assert verdict.fatal.code == code
    assert name in str(verdict.fatal)
    assert advice in str(verdict.fatal)
    assert "the broker's words" in str(verdict.fatal)
    assert m.state is State.FATAL
    assert m.fatal is verdict.fatal
    assert m.assignment == frozenset()
    assert not m.wants_heartbeat


def test_unsupported_version_says_the_broker_needs_share_groups() -> None:
    verdict = classify(35, "workers", None)
    assert isinstance(verdict.fatal, GroupProtocolError)
    assert "Apache Kafka 4.1+" in str(verdict.fatal)
    assert "share.version" in str(verdict.fatal)


@pytest.mark.parametrize("code", [69, 23], ids=["GROUP_ID_NOT_FOUND", "INCONSISTENT_GROUP_PROTOCOL"])
def test_a_group_id_of_another_group_type_is_fatal_and_says_to_pick_another(code: int) -> None:
    m = joining()
    m.heartbeat_request()
    verdict = m.on_heartbeat_response(answer(0, code=code, message="Group workers is not a share group."))
    assert isinstance(verdict.fatal, GroupProtocolError)
    assert verdict.fatal.code == code
    assert "is not a share group" in str(verdict.fatal)
    assert "group id of its own" in str(verdict.fatal)
    assert m.state is State.FATAL


def test_an_unknown_code_is_fatal_not_ignored() -> None:
    verdict = classify(9999, "workers", None)
    assert isinstance(verdict.fatal, BrokerError)
    assert "UNKNOWN_ERROR_CODE_9999" in str(verdict.fatal)


# ---------------------------------------------------------------- leaving, lapses, rejoining


def test_leave_sends_epoch_minus_1_and_ends_out_of_the_group() -> None:
    m = stable()
    m.request_leave()
    assert m.state is State.LEAVING
    assert not m.wants_heartbeat
    body = m.heartbeat_request()
    assert body == {"group_id": "workers", "member_id": m.member_id, "member_epoch": -1, "rack_id": None,
                    "subscribed_topic_names": None}
    m.leave_done(lapsed=False)
    assert (m.state, m.member_epoch, m.assignment) == (State.UNSUBSCRIBED, 0, frozenset())


def test_a_late_answer_after_the_leave_changes_nothing() -> None:
    m = stable()
    m.request_leave()
    m.on_heartbeat_response(answer(7, {T2: [0]}))
    m.on_heartbeat_response(answer(7, code=110))
    assert (m.state, m.member_epoch) == (State.LEAVING, 1)


def test_a_poll_lapse_leaves_then_the_next_poll_rejoins_with_the_same_member_id() -> None:
    m = stable()
    first = m.member_id
    m.poll_lapsed()
    assert m.heartbeat_request()["member_epoch"] == -1
    m.leave_done(lapsed=True)
    assert m.state is State.STALE
    assert not m.wants_heartbeat
    assert m.assignment == frozenset()
    m.subscribe(["jobs", "mail"])  # recorded while out; sent with the rejoin
    m.rejoin()
    body = m.heartbeat_request()
    assert (body["member_id"], body["member_epoch"], body["subscribed_topic_names"]) == (first, 0, ["jobs", "mail"])
    m.on_heartbeat_response(answer(4, {T1: [1]}))
    assert m.state is State.STABLE
    assert m.joins == 2


def test_leave_while_stale_or_unsubscribed_sends_nothing() -> None:
    m = stable()
    m.poll_lapsed()
    m.leave_done(lapsed=True)
    m.request_leave()
    assert m.state is State.UNSUBSCRIBED
    m.request_leave()
    assert m.state is State.UNSUBSCRIBED


def test_no_heartbeat_outside_the_group() -> None:
    with pytest.raises(IllegalStateError, match="no heartbeat"):
        ShareMachine("workers").heartbeat_request()


def test_fatal_is_final_and_leave_after_it_is_a_no_op() -> None:
    m = stable()
    m.fail(BrokerError(30))
    m.request_leave()
    assert m.state is State.FATAL
    with pytest.raises(IllegalShareTransition):
        m.rejoin()


def test_events_a_state_does_not_allow_raise() -> None:
    m = ShareMachine("workers")
    with pytest.raises(IllegalShareTransition, match="POLL_LAPSED is not allowed in state UNSUBSCRIBED"):
        m.poll_lapsed()
    with pytest.raises(IllegalShareTransition):
        m.rejoin()
    with pytest.raises(IllegalShareTransition):
        m.leave_done(lapsed=False)


def test_the_table_has_every_state_reach_fatal_and_only_in_group_states_heartbeat() -> None:
    assert all(TRANSITIONS[(s, Event.FATAL)] is State.FATAL for s in State)
    heartbeat_ok = {s for (s, e) in TRANSITIONS if e is Event.HEARTBEAT_OK}
    assert heartbeat_ok == set(IN_GROUP)
