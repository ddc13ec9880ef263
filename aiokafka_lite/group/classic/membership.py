"""The consumer-group membership state machine, as data.

Everything that affects the state machine lives in this module (the h11 rule): the states, the
events, the transition table and the side effects of each event on the member's identity
(generation id, member id, leader, protocol) and on the ``rejoin_needed`` flag. The I/O shell
sends requests, turns what happened into an :class:`Event` and calls
:meth:`GroupMembership.handle`; an event that is not legal in the current state is a bug in the
shell and raises :class:`IllegalMembershipTransition` at once.

States::

    UNJOINED --JOIN_SENT--> JOINING --JOIN_OK--> SYNCING --SYNC_OK--> STABLE --JOIN_SENT--> JOINING
    JOINING/SYNCING/STABLE --LEAVE_SENT--> LEAVING --LEAVE_DONE--> UNJOINED
    any live state --FENCED/FATAL_ERROR--> FAILED;  any state --CLOSE--> CLOSED

The rules behind the table:

* While a JoinGroup round is in progress every answer that means "send JoinGroup again" keeps
  the member in JOINING (JOIN_SENT is legal there): MEMBER_ID_REQUIRED (KIP-394, with the id
  to use), REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION. Only COORDINATOR_LOST
  abandons the round (back to UNJOINED, identity kept).
* UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION mean our identity is stale: reset the generation (and
  for UNKNOWN_MEMBER_ID the member id too; after ILLEGAL_GENERATION the coordinator still knows
  the member id, and rejoining with it saves a MEMBER_ID_REQUIRED round trip). In SYNCING and
  STABLE they drop the member to UNJOINED; JOINING and LEAVING keep waiting for the answer to
  their own request. They are legal in every live state because heartbeat and commit responses
  can bring them late.
* A response that carries the generation it was sent in (``generation_id=...`` on
  UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS) is ignored when that is no
  longer the current generation: it is about a generation we have already left behind.
* REBALANCE_IN_PROGRESS while STABLE keeps the assignment and only flags a rejoin; during
  SYNCING the round is lost, so back to UNJOINED.
* POLL_DEADLINE_LAPSED records the lapse and flags a rejoin without changing the state; the
  shell then leaves with LEAVE_SENT. After LEAVE_DONE the member id and generation are gone: the
  coordinator forgot us.
* COORDINATOR_LOST leaves a STABLE member STABLE: it keeps its assignment and heartbeats again
  once a coordinator is found, which says UNKNOWN_MEMBER_ID if it evicted us meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

from ...errors import IllegalStateError

NO_GENERATION = -1
NO_MEMBER_ID = ""


class State(Enum):
    UNJOINED = "unjoined"   # not a member (or the last round was abandoned)
    JOINING = "joining"     # a JoinGroup round is in progress
    SYNCING = "syncing"     # joined a generation, waiting for SyncGroup
    STABLE = "stable"       # has the assignment of the current generation
    LEAVING = "leaving"     # LeaveGroup sent (or about to be)
    FAILED = "failed"       # fatal error (fenced, not authorized...): only close() is left
    CLOSED = "closed"


class Event(Enum):
    JOIN_SENT = "join_sent"
    MEMBER_ID_REQUIRED = "member_id_required"       # data: member_id
    JOIN_OK = "join_ok"                             # data: generation_id, member_id, leader_id,
                                                    #       protocol_name
    SYNC_SENT = "sync_sent"
    SYNC_OK = "sync_ok"
    REJOIN_NEEDED = "rejoin_needed"                 # local: subscription or metadata changed
    REBALANCE_IN_PROGRESS = "rebalance_in_progress"  # optional data: generation_id (see above)
    UNKNOWN_MEMBER_ID = "unknown_member_id"          # optional data: generation_id
    ILLEGAL_GENERATION = "illegal_generation"        # optional data: generation_id
    COORDINATOR_LOST = "coordinator_lost"
    POLL_DEADLINE_LAPSED = "poll_deadline_lapsed"
    LEAVE_SENT = "leave_sent"
    LEAVE_DONE = "leave_done"                       # answered, failed or skipped (static member)
    FENCED = "fenced"                               # FENCED_INSTANCE_ID (KIP-345)
    FATAL_ERROR = "fatal_error"                     # e.g. GROUP_AUTHORIZATION_FAILED
    CLOSE = "close"


class IllegalMembershipTransition(IllegalStateError):
    """An event arrived in a state that does not allow it: a bug in the caller."""

    def __init__(self, state: State, event: Event) -> None:
        super().__init__(f"group membership: event {event.name} is not allowed in state {state.name}")
        self.state = state
        self.event = event


S, E = State, Event
LIVE_STATES = (S.UNJOINED, S.JOINING, S.SYNCING, S.STABLE, S.LEAVING)
IN_GROUP_STATES = frozenset({S.JOINING, S.SYNCING, S.STABLE})

TRANSITIONS: dict[tuple[State, Event], State] = {
    (S.UNJOINED, E.JOIN_SENT): S.JOINING,
    (S.UNJOINED, E.REJOIN_NEEDED): S.UNJOINED,
    (S.UNJOINED, E.REBALANCE_IN_PROGRESS): S.UNJOINED,
    (S.UNJOINED, E.COORDINATOR_LOST): S.UNJOINED,

    (S.JOINING, E.JOIN_SENT): S.JOINING,
    (S.JOINING, E.MEMBER_ID_REQUIRED): S.JOINING,
    (S.JOINING, E.REBALANCE_IN_PROGRESS): S.JOINING,
    (S.JOINING, E.JOIN_OK): S.SYNCING,
    (S.JOINING, E.UNKNOWN_MEMBER_ID): S.JOINING,
    (S.JOINING, E.ILLEGAL_GENERATION): S.JOINING,
    (S.JOINING, E.REJOIN_NEEDED): S.JOINING,
    (S.JOINING, E.COORDINATOR_LOST): S.UNJOINED,

    (S.SYNCING, E.SYNC_SENT): S.SYNCING,
    (S.SYNCING, E.SYNC_OK): S.STABLE,
    (S.SYNCING, E.REJOIN_NEEDED): S.SYNCING,
    (S.SYNCING, E.REBALANCE_IN_PROGRESS): S.UNJOINED,
    (S.SYNCING, E.COORDINATOR_LOST): S.UNJOINED,

    (S.STABLE, E.JOIN_SENT): S.JOINING,
    (S.STABLE, E.REJOIN_NEEDED): S.STABLE,
    (S.STABLE, E.REBALANCE_IN_PROGRESS): S.STABLE,
    (S.STABLE, E.COORDINATOR_LOST): S.STABLE,

    (S.LEAVING, E.LEAVE_DONE): S.UNJOINED,
    (S.LEAVING, E.REJOIN_NEEDED): S.LEAVING,
    (S.LEAVING, E.REBALANCE_IN_PROGRESS): S.LEAVING,
    (S.LEAVING, E.COORDINATOR_LOST): S.LEAVING,  # the LeaveGroup then fails: LEAVE_DONE follows
    (S.LEAVING, E.UNKNOWN_MEMBER_ID): S.LEAVING,  # late answers while LeaveGroup is in flight
    (S.LEAVING, E.ILLEGAL_GENERATION): S.LEAVING,

    (S.FAILED, E.CLOSE): S.CLOSED,
    (S.CLOSED, E.CLOSE): S.CLOSED,  # close() is idempotent
}
for _state in LIVE_STATES:
    TRANSITIONS.setdefault((_state, E.UNKNOWN_MEMBER_ID), S.UNJOINED)
    TRANSITIONS.setdefault((_state, E.ILLEGAL_GENERATION), S.UNJOINED)
    TRANSITIONS[(_state, E.FENCED)] = S.FAILED
    TRANSITIONS[(_state, E.FATAL_ERROR)] = S.FAILED
    TRANSITIONS[(_state, E.CLOSE)] = S.CLOSED
for _state in IN_GROUP_STATES:
    TRANSITIONS[(_state, E.LEAVE_SENT)] = S.LEAVING
    TRANSITIONS[(_state, E.POLL_DEADLINE_LAPSED)] = _state
del _state

# The keyword data each event must carry; every other event carries none.
EVENT_DATA: dict[Event, frozenset[str]] = {
    E.MEMBER_ID_REQUIRED: frozenset({"member_id"}),
    E.JOIN_OK: frozenset({"generation_id", "member_id", "leader_id", "protocol_name"}),
}
# Data an event may carry: the generation a response was sent in, to recognise stale ones.
EVENT_OPTIONAL_DATA: dict[Event, frozenset[str]] = {
    E.UNKNOWN_MEMBER_ID: frozenset({"generation_id"}),
    E.ILLEGAL_GENERATION: frozenset({"generation_id"}),
    E.REBALANCE_IN_PROGRESS: frozenset({"generation_id"}),
}


class GroupMembership:
    """One member's state and identity in its group."""

    def __init__(self, group_id: str, group_instance_id: str | None = None) -> None:
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.state = State.UNJOINED
        self.generation_id = NO_GENERATION
        self.member_id = NO_MEMBER_ID
        self.leader_id: str | None = None
        self.protocol_name: str | None = None
        self.rejoin_needed = True  # a subscribed member that never joined must join
        self.poll_deadline_lapsed = False  # set by POLL_DEADLINE_LAPSED until the next JOIN_SENT

    def handle(self, event: Event, **data: Any) -> State:
        """Apply one event; returns the new state. Raises before changing anything if illegal."""
        new_state = TRANSITIONS.get((self.state, event))
        if new_state is None:
            raise IllegalMembershipTransition(self.state, event)
        _check_data(event, data)
        if self._is_stale(event, data):
            return self.state
        _EFFECTS.get(event, _no_effect)(self, data)
        self.state = new_state
        return new_state

    def _is_stale(self, event: Event, data: dict[str, Any]) -> bool:
        """A response about a generation we have already left (Java: generationUnchanged())."""
        sent_in = data.get("generation_id", self.generation_id)
        return event in EVENT_OPTIONAL_DATA and sent_in != self.generation_id

    def can_handle(self, event: Event) -> bool:
        """Whether ``event`` is legal now, e.g. whether a JoinGroup response is still expected."""
        return (self.state, event) in TRANSITIONS

    def allowed_events(self) -> frozenset[Event]:
        return frozenset(event for (state, event) in TRANSITIONS if state is self.state)

    @property
    def is_stable(self) -> bool:
        return self.state is State.STABLE

    @property
    def in_group(self) -> bool:
        """Joining, syncing or stable: a member the coordinator knows, with a session to keep."""
        return self.state in IN_GROUP_STATES

    @property
    def is_leader(self) -> bool:
        return self.member_id != NO_MEMBER_ID and self.leader_id == self.member_id

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_closed(self) -> bool:
        return self.state is State.CLOSED

    def generation_if_stable(self) -> tuple[int, str] | None:
        """(generation id, member id) for commits, or None while not stable."""
        if self.state is not State.STABLE:
            return None
        return self.generation_id, self.member_id

    def __repr__(self) -> str:
        return (f"GroupMembership(group_id={self.group_id!r}, state={self.state.name}, "
                f"generation_id={self.generation_id}, member_id={self.member_id!r}, "
                f"rejoin_needed={self.rejoin_needed})")

    # -- side effects, one per event (see _EFFECTS) ----------------------------------------

    def _reset_generation(self) -> None:
        self.generation_id = NO_GENERATION
        self.leader_id = None
        self.protocol_name = None
        self.rejoin_needed = True

    def _reset_member(self) -> None:
        self._reset_generation()
        self.member_id = NO_MEMBER_ID


def _check_data(event: Event, data: dict[str, Any]) -> None:
    required = EVENT_DATA.get(event, frozenset())
    optional = EVENT_OPTIONAL_DATA.get(event, frozenset())
    if not required <= set(data) <= required | optional:
        raise TypeError(f"event {event.name} takes data {sorted(required)} "
                        f"(optional: {sorted(optional)}), got {sorted(data)}")


def _no_effect(m: GroupMembership, data: dict[str, Any]) -> None:
    pass


def _join_sent(m: GroupMembership, data: dict[str, Any]) -> None:
    m.rejoin_needed = False
    m.poll_deadline_lapsed = False


def _poll_deadline_lapsed(m: GroupMembership, data: dict[str, Any]) -> None:
    m.poll_deadline_lapsed = True
    m.rejoin_needed = True  # after leaving, the next poll() rejoins


def _member_id_required(m: GroupMembership, data: dict[str, Any]) -> None:
    m.member_id = data["member_id"]
    m.rejoin_needed = True  # resend JoinGroup now, with this id


def _join_ok(m: GroupMembership, data: dict[str, Any]) -> None:
    m.generation_id = data["generation_id"]
    m.member_id = data["member_id"]
    m.leader_id = data["leader_id"]
    m.protocol_name = data["protocol_name"]


def _flag_rejoin(m: GroupMembership, data: dict[str, Any]) -> None:
    m.rejoin_needed = True


def _coordinator_lost(m: GroupMembership, data: dict[str, Any]) -> None:
    # Only a round in flight is lost; a stable member carries on with the next coordinator.
    if m.state in (State.JOINING, State.SYNCING):
        m.rejoin_needed = True


def _illegal_generation(m: GroupMembership, data: dict[str, Any]) -> None:
    # The coordinator still knows the member id; rejoining with it avoids a MEMBER_ID_REQUIRED trip.
    m._reset_generation()


def _unknown_member_id(m: GroupMembership, data: dict[str, Any]) -> None:
    m._reset_member()


_EFFECTS: dict[Event, Callable[[GroupMembership, dict[str, Any]], None]] = {
    E.JOIN_SENT: _join_sent,
    E.MEMBER_ID_REQUIRED: _member_id_required,
    E.JOIN_OK: _join_ok,
    E.REJOIN_NEEDED: _flag_rejoin,
    E.REBALANCE_IN_PROGRESS: _flag_rejoin,
    E.POLL_DEADLINE_LAPSED: _poll_deadline_lapsed,
    E.COORDINATOR_LOST: _coordinator_lost,
    E.ILLEGAL_GENERATION: _illegal_generation,
    E.UNKNOWN_MEMBER_ID: _unknown_member_id,
    E.LEAVE_DONE: _unknown_member_id,  # after leaving, the coordinator has forgotten us
}
