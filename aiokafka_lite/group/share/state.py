"""The KIP-932 share-group member, as data: no I/O, no clocks.

Everything that affects the member's state lives here (the h11 rule): the states, the events, the
transition table, the member id and epoch, the heartbeat interval, the assignment (by topic id),
which fields each ShareGroupHeartbeat carries, and what each answer means (errors.py classifies
the codes). The I/O shell (member.py) sends what :meth:`ShareMachine.heartbeat_request` builds
and feeds the answers to :meth:`ShareMachine.on_heartbeat_response`. An event the current state
does not allow is a bug in the shell: :class:`IllegalShareTransition`.

A share member is much simpler than a consumer-group one: the broker tracks records, not
partitions, so nothing is owned, revoked, reconciled or committed. The assignment only says which
partitions the member may fetch from (several members may share one).

States::

    UNSUBSCRIBED --SUBSCRIBED--> JOINING --HEARTBEAT_OK--> STABLE
    JOINING or STABLE --FENCED--> JOINING (epoch 0, same member id, no assignment)
    JOINING or STABLE --LEAVE_REQUESTED or POLL_LAPSED--> LEAVING
    LEAVING --LEAVE_DONE--> UNSUBSCRIBED;  LEAVING --LAPSE_LEAVE_DONE--> STALE --REJOIN--> JOINING
    any state --FATAL--> FATAL (only close() is left)

The member id is made here, once per member, and kept across rejoins (KIP-932 v1: the broker never
assigns it). Epoch 0 joins, -1 leaves.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ...errors import IllegalStateError
from ...structs import TopicPartition
from ..heartbeat_verdicts import Verdict
from ..member_ids import new_member_id
from .errors import classify

JOIN_EPOCH = 0
LEAVE_EPOCH = -1

TopicIdPartitions = frozenset[tuple[uuid.UUID, int]]


class State(Enum):
    UNSUBSCRIBED = "unsubscribed"  # not in the group, not trying to be
    JOINING = "joining"            # heartbeating with epoch 0
    STABLE = "stable"              # in the group with an epoch from the broker
    LEAVING = "leaving"            # the leave heartbeat (epoch -1) is due or in flight
    STALE = "stale"                # left after a poll lapse; the next poll rejoins
    FATAL = "fatal"                # e.g. unauthorized, no share groups: close() only


class Event(Enum):
    SUBSCRIBED = "subscribed"
    HEARTBEAT_OK = "heartbeat_ok"
    FENCED = "fenced"              # UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH
    POLL_LAPSED = "poll_lapsed"    # max_poll_interval_ms passed without a poll
    LEAVE_REQUESTED = "leave_requested"
    LEAVE_DONE = "leave_done"      # the leave was answered, failed or skipped
    LAPSE_LEAVE_DONE = "lapse_leave_done"  # the same, for the leave a poll lapse caused
    REJOIN = "rejoin"              # a poll after a lapse
    FATAL = "fatal"


S, E = State, Event
IN_GROUP = frozenset({S.JOINING, S.STABLE})

TRANSITIONS: dict[tuple[State, Event], State] = {
    (S.UNSUBSCRIBED, E.SUBSCRIBED): S.JOINING,
    (S.UNSUBSCRIBED, E.LEAVE_REQUESTED): S.UNSUBSCRIBED,
    (S.LEAVING, E.LEAVE_DONE): S.UNSUBSCRIBED,
    (S.LEAVING, E.LAPSE_LEAVE_DONE): S.STALE,
    (S.LEAVING, E.LEAVE_REQUESTED): S.LEAVING,
    (S.LEAVING, E.SUBSCRIBED): S.LEAVING,
    (S.STALE, E.REJOIN): S.JOINING,
    (S.STALE, E.SUBSCRIBED): S.STALE,  # the new topics go out with the rejoin
    (S.STALE, E.LEAVE_REQUESTED): S.UNSUBSCRIBED,  # already out of the group
    (S.FATAL, E.LEAVE_REQUESTED): S.FATAL,  # nothing to leave: the broker ended the membership
}
for _s in IN_GROUP:
    TRANSITIONS[(_s, E.SUBSCRIBED)] = _s  # a new subscription goes out in the next heartbeat
    TRANSITIONS[(_s, E.HEARTBEAT_OK)] = S.STABLE
    TRANSITIONS[(_s, E.FENCED)] = S.JOINING
    TRANSITIONS[(_s, E.LEAVE_REQUESTED)] = S.LEAVING
    TRANSITIONS[(_s, E.POLL_LAPSED)] = S.LEAVING
for _s in State:
    TRANSITIONS[(_s, E.FATAL)] = S.FATAL


class IllegalShareTransition(IllegalStateError):
    def __init__(self, state: State, event: Event) -> None:
        super().__init__(f"share member: event {event.name} is not allowed in state {state.name}")
        self.state = state
        self.event = event


@dataclass
class ShareMachine:
    group_id: str
    rack_id: str | None = None
    member_id: str = field(default_factory=new_member_id)
    state: State = State.UNSUBSCRIBED
    member_epoch: int = JOIN_EPOCH
    heartbeat_interval_ms: int | None = None
    topics: frozenset[str] = frozenset()  # the subscription
    assignment: TopicIdPartitions = frozenset()  # the partitions the broker last assigned
    assignments: int = 0  # answers that carried an assignment (a changed one, or the first)
    joins: int = 0  # answers that took the member from epoch 0 into the group
    fenced: int = 0
    names: dict[uuid.UUID, str] = field(default_factory=dict)  # topic ids resolved so far
    fatal: BaseException | None = None
    _sent_topics: frozenset[str] | None = None  # what the broker has (None: send in full)
    _pending_topics: frozenset[str] | None = None  # what the heartbeat in flight carries

    # ------------------------------------------------------------ transitions

    def handle(self, event: Event) -> State:
        nxt = TRANSITIONS.get((self.state, event))
        if nxt is None:
            raise IllegalShareTransition(self.state, event)
        self.state = nxt
        return nxt

    def fail(self, error: BaseException) -> None:
        """The membership is over (a fatal answer, or the shell found it so): close() only."""
        self.fatal = error
        self.handle(E.FATAL)
        self.assignment = frozenset()

    def subscribe(self, topics: Iterable[str]) -> None:
        """A new subscription (not empty: an empty one is a leave, request_leave())."""
        wanted = frozenset(topics)
        if not wanted:
            raise ValueError("a share member subscribes to at least one topic (leave() to stop)")
        self.topics = wanted
        self.handle(E.SUBSCRIBED)

    @property
    def in_group(self) -> bool:
        """Joined: the broker gave this member an epoch and it has not left since."""
        return self.state is S.STABLE and self.member_epoch > 0

    @property
    def wants_heartbeat(self) -> bool:
        return self.state in IN_GROUP

    # ------------------------------------------------------------ heartbeat requests

    def heartbeat_request(self) -> dict[str, Any]:
        """The next heartbeat's body; fields the broker already has go out as null."""
        if self.state is S.LEAVING:
            return self.leave_request()
        if self.state not in IN_GROUP:
            raise IllegalStateError(f"share member: no heartbeat to send in state {self.state.name}")
        joining = self.member_epoch == JOIN_EPOCH
        send_topics = joining or self._sent_topics != self.topics
        self._pending_topics = self.topics if send_topics else self._sent_topics
        return {
            "group_id": self.group_id, "member_id": self.member_id, "member_epoch": self.member_epoch,
            "rack_id": self.rack_id if joining else None,
            "subscribed_topic_names": sorted(self.topics) if send_topics else None,
        }

    def leave_request(self) -> dict[str, Any]:
        self._pending_topics = None
        return {"group_id": self.group_id, "member_id": self.member_id, "member_epoch": LEAVE_EPOCH,
                "rack_id": None, "subscribed_topic_names": None}

    def heartbeat_failed(self) -> None:
        """No answer (connection lost, timeout, coordinator moved): send every field next time."""
        self._pending_topics = None
        self._sent_topics = None

    # ------------------------------------------------------------ heartbeat responses

    def on_heartbeat_response(self, response: Mapping[str, Any]) -> Verdict:
        """Apply one heartbeat answer; the verdict tells the shell what to do next."""
        verdict = classify(response["error_code"], self.group_id, response.get("error_message"))
        if verdict.fatal is not None:
            self.fail(verdict.fatal)
        elif self.state not in IN_GROUP:
            pass  # a late answer to a heartbeat sent before a leave: the leave wins
        elif verdict.fenced:
            self.handle(E.FENCED)
            self.fenced += 1
            self._reset()
        elif verdict.retry:
            self.heartbeat_failed()
        else:
            self._accept(response)
        return verdict

    def _accept(self, response: Mapping[str, Any]) -> None:
        self._sent_topics, self._pending_topics = self._pending_topics, None
        epoch = response["member_epoch"]
        if self.member_epoch == JOIN_EPOCH and epoch > 0:
            self.joins += 1
        self.member_epoch = epoch
        if response.get("member_id"):
            self.member_id = response["member_id"]  # v1 echoes ours; kept as the broker has it
        if response.get("heartbeat_interval_ms", 0) > 0:
            self.heartbeat_interval_ms = response["heartbeat_interval_ms"]
        assignment = response.get("assignment")
        if assignment is not None:  # null: unchanged
            self.assignment = frozenset((t["topic_id"], p) for t in assignment["topic_partitions"]
                                        for p in t["partitions"])
            self.assignments += 1
        self.handle(E.HEARTBEAT_OK)

    # ------------------------------------------------------------ the assignment by name

    def resolve(self, resolve: Callable[[uuid.UUID], str | None]) -> frozenset[uuid.UUID]:
        """Name the assigned topic ids through ``resolve`` (the metadata cache); the ids it
        cannot name yet are returned (the shell refreshes the metadata and asks again)."""
        unresolved = set()
        for topic_id, _ in self.assignment:
            if topic_id not in self.names:
                name = resolve(topic_id)
                if name is None:
                    unresolved.add(topic_id)
                else:
                    self.names[topic_id] = name
        return frozenset(unresolved)

    def named_assignment(self) -> frozenset[TopicPartition]:
        """The assigned partitions whose topic ids are named (see resolve())."""
        return frozenset(TopicPartition(self.names[t], p) for t, p in self.assignment if t in self.names)

    # ------------------------------------------------------------ leaving and rejoining

    def poll_lapsed(self) -> None:
        self.handle(E.POLL_LAPSED)

    def request_leave(self) -> None:
        self.handle(E.LEAVE_REQUESTED)
        if self.state is not S.LEAVING:
            self._reset()

    def leave_done(self, lapsed: bool) -> None:
        """The leave heartbeat was answered (or could not be sent): out of the group; after a poll
        lapse STALE, until the next poll rejoins."""
        self.handle(E.LAPSE_LEAVE_DONE if lapsed else E.LEAVE_DONE)
        self._reset()

    def rejoin(self) -> None:
        self.handle(E.REJOIN)
        self._reset()

    def _reset(self) -> None:
        self.member_epoch = JOIN_EPOCH
        self.assignment = frozenset()
        self.heartbeat_failed()
