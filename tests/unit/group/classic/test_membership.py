"""The membership state machine, driven by events only."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from aiokafka_lite.errors import IllegalStateError
from aiokafka_lite.group.classic.membership import (
    EVENT_DATA,
    NO_GENERATION,
    NO_MEMBER_ID,
    TRANSITIONS,
    Event,
    GroupMembership,
    IllegalMembershipTransition,
    State,
)

E, S = Event, State

JOIN_OK = {"generation_id": 7, "member_id": "m-1", "leader_id": "m-0", "protocol_name": "range"}
DATA: dict[Event, dict[str, Any]] = {
    E.JOIN_OK: JOIN_OK,
    E.MEMBER_ID_REQUIRED: {"member_id": "m-1"},
}

# How to reach each state from a fresh member, by events only.
PATH: dict[State, list[Event]] = {
    S.UNJOINED: [],
    S.JOINING: [E.JOIN_SENT],
    S.SYNCING: [E.JOIN_SENT, E.JOIN_OK],
    S.STABLE: [E.JOIN_SENT, E.JOIN_OK, E.SYNC_OK],
    S.LEAVING: [E.JOIN_SENT, E.JOIN_OK, E.SYNC_OK, E.LEAVE_SENT],
    S.FAILED: [E.FENCED],
    S.CLOSED: [E.CLOSE],
}


def fire(m: GroupMembership, event: Event) -> State:
    return m.handle(event, **DATA.get(event, {}))


def member_in(state: State, group_instance_id: str | None = None) -> GroupMembership:
    m = GroupMembership("g", group_instance_id)
    for event in PATH[state]:
        fire(m, event)
    assert m.state is state
    return m


def pair_id(pair: tuple[State, Event]) -> str:
    return f"{pair[0].name}-{pair[1].name}"


LEGAL = sorted(TRANSITIONS, key=pair_id)


@pytest.mark.parametrize(("state", "event"), LEGAL, ids=[pair_id(p) for p in LEGAL])
def test_every_legal_transition_lands_where_the_table_says(state: State, event: Event) -> None:
    m = member_in(state)
    assert fire(m, event) is TRANSITIONS[(state, event)]
    assert m.state is TRANSITIONS[(state, event)]


ILLEGAL = [(s, e) for s, e in itertools.product(State, Event) if (s, e) not in TRANSITIONS]


@pytest.mark.parametrize(("state", "event"), ILLEGAL, ids=[pair_id(p) for p in ILLEGAL])
def test_every_illegal_transition_raises_and_changes_nothing(state: State, event: Event) -> None:
    m = member_in(state)
    before = vars(m).copy()
    with pytest.raises(IllegalMembershipTransition) as info:
        fire(m, event)
    assert isinstance(info.value, IllegalStateError)
    assert info.value.state is state
    assert info.value.event is event
    assert event.name in str(info.value)
    assert state.name in str(info.value)
    assert vars(m) == before


def test_the_table_has_illegal_pairs_to_check() -> None:
    # Guard against a table that silently allows everything.
    assert (S.UNJOINED, E.JOIN_OK) in ILLEGAL
    assert (S.STABLE, E.SYNC_OK) in ILLEGAL
    assert (S.CLOSED, E.JOIN_SENT) in ILLEGAL
    assert (S.FAILED, E.JOIN_SENT) in ILLEGAL
    assert (S.UNJOINED, E.LEAVE_SENT) in ILLEGAL
    assert (S.UNJOINED, E.POLL_DEADLINE_LAPSED) in ILLEGAL
    assert (S.UNJOINED, E.SYNC_SENT) in ILLEGAL
    assert (S.LEAVING, E.LEAVE_SENT) in ILLEGAL


# -- event data ---------------------------------------------------------------------------------

def test_join_ok_without_its_data_raises_type_error_and_changes_nothing() -> None:
    m = member_in(S.JOINING)
    with pytest.raises(TypeError, match="JOIN_OK"):
        m.handle(E.JOIN_OK, generation_id=1)
    assert m.state is S.JOINING
    assert m.generation_id == NO_GENERATION


def test_unexpected_data_raises_type_error() -> None:
    m = member_in(S.UNJOINED)
    with pytest.raises(TypeError, match="JOIN_SENT"):
        m.handle(E.JOIN_SENT, member_id="x")
    assert m.state is S.UNJOINED


def test_event_data_table_names_only_events_with_data() -> None:
    assert set(EVENT_DATA) == {E.JOIN_OK, E.MEMBER_ID_REQUIRED}


# -- identity and flags through a realistic life cycle ------------------------------------------

def test_fresh_member() -> None:
    m = GroupMembership("g")
    assert m.state is S.UNJOINED
    assert m.rejoin_needed
    assert m.generation_id == NO_GENERATION
    assert m.member_id == NO_MEMBER_ID
    assert not m.in_group
    assert not m.is_stable
    assert not m.is_leader
    assert not m.is_static
    assert not m.is_closed
    assert m.generation_if_stable() is None
    assert "UNJOINED" in repr(m)


def test_kip394_member_id_required_then_join() -> None:
    m = GroupMembership("g")
    m.handle(E.JOIN_SENT)
    assert not m.rejoin_needed
    m.handle(E.MEMBER_ID_REQUIRED, member_id="consumer-1-abc")
    assert m.state is S.JOINING
    assert m.member_id == "consumer-1-abc"
    assert m.rejoin_needed  # must resend JoinGroup with this id
    m.handle(E.JOIN_SENT)
    assert not m.rejoin_needed
    m.handle(E.JOIN_OK, generation_id=1, member_id="consumer-1-abc", leader_id="consumer-1-abc",
             protocol_name="range")
    assert m.state is S.SYNCING
    assert m.is_leader
    assert m.in_group
    assert m.generation_if_stable() is None
    m.handle(E.SYNC_OK)
    assert m.is_stable
    assert m.generation_if_stable() == (1, "consumer-1-abc")


def test_join_ok_records_identity_of_a_follower() -> None:
    m = member_in(S.SYNCING)
    assert (m.generation_id, m.member_id, m.leader_id, m.protocol_name) == (7, "m-1", "m-0", "range")
    assert not m.is_leader


def test_rebalance_in_progress_while_stable_keeps_assignment_and_flags_rejoin() -> None:
    m = member_in(S.STABLE)
    assert not m.rejoin_needed
    m.handle(E.REBALANCE_IN_PROGRESS)
    assert m.is_stable
    assert m.rejoin_needed
    assert m.generation_if_stable() == (7, "m-1")
    m.handle(E.JOIN_SENT)
    assert m.state is S.JOINING
    assert not m.rejoin_needed
    assert m.generation_id == 7  # kept through the rebalance (cooperative members commit with it)


def test_rebalance_in_progress_during_sync_drops_the_round_but_keeps_identity() -> None:
    m = member_in(S.SYNCING)
    m.handle(E.REBALANCE_IN_PROGRESS)
    assert m.state is S.UNJOINED
    assert m.rejoin_needed
    assert m.member_id == "m-1"


# Where identity errors land: JOINING and LEAVING wait for the answer to their own request.
AFTER_IDENTITY_ERROR = {S.UNJOINED: S.UNJOINED, S.JOINING: S.JOINING, S.SYNCING: S.UNJOINED,
                        S.STABLE: S.UNJOINED, S.LEAVING: S.LEAVING}


@pytest.mark.parametrize("state", list(AFTER_IDENTITY_ERROR), ids=lambda s: str(s.name))
def test_unknown_member_id_resets_generation_and_member_id(state: State) -> None:
    m = member_in(state)
    assert m.handle(E.UNKNOWN_MEMBER_ID) is AFTER_IDENTITY_ERROR[state]
    assert m.generation_id == NO_GENERATION
    assert m.member_id == NO_MEMBER_ID
    assert m.leader_id is None
    assert m.protocol_name is None
    assert m.rejoin_needed


@pytest.mark.parametrize("state", [S.SYNCING, S.STABLE, S.LEAVING], ids=lambda s: str(s.name))
def test_illegal_generation_resets_generation_but_keeps_member_id(state: State) -> None:
    m = member_in(state)
    assert m.handle(E.ILLEGAL_GENERATION) is AFTER_IDENTITY_ERROR[state]
    assert m.generation_id == NO_GENERATION
    assert m.member_id == "m-1"
    assert m.rejoin_needed


def test_unknown_member_id_during_join_keeps_joining_and_the_join_is_resent() -> None:
    m = member_in(S.STABLE)
    m.handle(E.JOIN_SENT)
    # A heartbeat sent while stable answers late: the JoinGroup in flight decides what happens.
    assert m.handle(E.UNKNOWN_MEMBER_ID) is S.JOINING
    assert m.member_id == NO_MEMBER_ID
    assert m.rejoin_needed
    assert m.handle(E.JOIN_SENT) is S.JOINING
    assert m.handle(E.JOIN_OK, generation_id=8, member_id="m-2", leader_id="m-2",
                    protocol_name="range") is S.SYNCING


def test_identity_error_while_leaving_still_ends_with_leave_done() -> None:
    m = member_in(S.LEAVING)
    assert m.handle(E.UNKNOWN_MEMBER_ID) is S.LEAVING
    assert m.handle(E.LEAVE_DONE) is S.UNJOINED


# -- stale responses (tagged with the generation they were sent in) -----------------------------

@pytest.mark.parametrize("event", [E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.REBALANCE_IN_PROGRESS],
                         ids=lambda e: str(e.name))
def test_response_about_an_older_generation_is_ignored(event: Event) -> None:
    m = member_in(S.STABLE)  # generation 7
    m.handle(E.JOIN_SENT)
    m.handle(E.JOIN_OK, generation_id=8, member_id="m-1", leader_id="m-0", protocol_name="range")
    before = vars(m).copy()
    assert m.handle(event, generation_id=7) is S.SYNCING
    assert vars(m) == before
    assert m.handle(E.SYNC_OK) is S.STABLE


@pytest.mark.parametrize("event", [E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.REBALANCE_IN_PROGRESS],
                         ids=lambda e: str(e.name))
def test_response_about_the_current_generation_applies(event: Event) -> None:
    m = member_in(S.SYNCING)  # generation 7
    assert m.handle(event, generation_id=7) is S.UNJOINED
    assert m.rejoin_needed


def test_stale_event_is_still_checked_for_legality() -> None:
    m = member_in(S.CLOSED)
    with pytest.raises(IllegalMembershipTransition):
        m.handle(E.UNKNOWN_MEMBER_ID, generation_id=3)


def test_generation_tag_is_not_accepted_on_other_events() -> None:
    m = member_in(S.STABLE)
    with pytest.raises(TypeError, match="COORDINATOR_LOST"):
        m.handle(E.COORDINATOR_LOST, generation_id=7)


def test_coordinator_lost_while_stable_keeps_everything() -> None:
    m = member_in(S.STABLE)
    m.handle(E.COORDINATOR_LOST)
    assert m.is_stable
    assert not m.rejoin_needed
    assert m.generation_if_stable() == (7, "m-1")


@pytest.mark.parametrize("state", [S.JOINING, S.SYNCING])
def test_coordinator_lost_during_a_round_abandons_it(state: State) -> None:
    m = member_in(state)
    m.handle(E.COORDINATOR_LOST)
    assert m.state is S.UNJOINED
    assert m.rejoin_needed
    expected_member = "m-1" if state is S.SYNCING else NO_MEMBER_ID
    assert m.member_id == expected_member


@pytest.mark.parametrize("state", [S.JOINING, S.SYNCING, S.STABLE], ids=lambda s: str(s.name))
def test_poll_deadline_lapse_is_recorded_then_the_member_leaves_and_rejoins(state: State) -> None:
    m = member_in(state)
    assert not m.poll_deadline_lapsed
    assert m.handle(E.POLL_DEADLINE_LAPSED) is state  # a fact; leaving is the next step
    assert m.poll_deadline_lapsed
    assert m.rejoin_needed
    assert m.handle(E.LEAVE_SENT) is S.LEAVING
    assert not m.in_group
    assert m.handle(E.LEAVE_DONE) is S.UNJOINED
    assert m.member_id == NO_MEMBER_ID
    assert m.generation_id == NO_GENERATION
    assert m.rejoin_needed
    assert m.poll_deadline_lapsed  # still visible until the next join
    assert m.handle(E.JOIN_SENT) is S.JOINING
    assert not m.poll_deadline_lapsed


def test_sync_sent_is_a_step_of_syncing() -> None:
    m = member_in(S.SYNCING)
    assert m.handle(E.SYNC_SENT) is S.SYNCING
    assert m.handle(E.SYNC_OK) is S.STABLE


def test_can_handle_tells_whether_a_response_is_still_expected() -> None:
    m = member_in(S.JOINING)
    assert m.can_handle(E.JOIN_OK)
    m.handle(E.COORDINATOR_LOST)
    assert not m.can_handle(E.JOIN_OK)


def test_rejoin_needed_requested_during_sync_survives_sync_ok() -> None:
    m = member_in(S.SYNCING)
    m.handle(E.REJOIN_NEEDED)
    m.handle(E.SYNC_OK)
    assert m.is_stable
    assert m.rejoin_needed


def test_static_member_fenced_is_fatal_and_only_close_remains() -> None:
    m = member_in(S.STABLE, group_instance_id="instance-a")
    assert m.is_static
    m.handle(E.FENCED)
    assert m.state is S.FAILED
    assert m.allowed_events() == frozenset({E.CLOSE})
    assert m.member_id == "m-1"  # kept for diagnostics
    m.handle(E.CLOSE)
    assert m.is_closed


def test_close_is_idempotent_and_final() -> None:
    m = member_in(S.STABLE)
    m.handle(E.CLOSE)
    m.handle(E.CLOSE)
    assert m.is_closed
    assert m.allowed_events() == frozenset({E.CLOSE})


def test_allowed_events_of_unjoined_member() -> None:
    m = GroupMembership("g")
    allowed = m.allowed_events()
    assert E.JOIN_SENT in allowed
    assert E.JOIN_OK not in allowed
    assert E.LEAVE_SENT not in allowed
