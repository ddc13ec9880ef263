"""The KIP-848 consumer group member, as data: no I/O, no clocks.

Everything that affects the member's state lives here (the h11 rule): the states, the events,
the transition table, the member epoch and id, the target assignment and the reconciliation plan
toward it, which fields each ConsumerGroupHeartbeat carries, and what each error code means.
The I/O shell (member.py) sends what :meth:`Kip848Machine.heartbeat_request` builds, feeds
the answers to :meth:`Kip848Machine.on_heartbeat_response`, and runs the plan in the poll path. An
event the current state does not allow is a bug in the shell: :class:`IllegalKip848Transition`.

States (as Java's MemberState)::

    UNSUBSCRIBED --SUBSCRIBED--> JOINING --HEARTBEAT_OK--> RECONCILING or STABLE
    RECONCILING --RECONCILED--> ACKNOWLEDGING --HEARTBEAT_OK--> STABLE (or RECONCILING: new target)
    STABLE --HEARTBEAT_OK with a new target--> RECONCILING
    any member state --FENCED--> FENCED --LOST_DONE--> JOINING (epoch 0, same member id)
    any member state --LEAVE_REQUESTED--> PREPARE_LEAVING --LEAVE_SENT--> LEAVING --LEAVE_DONE-->
        UNSUBSCRIBED, or STALE after a poll lapse (POLL_LAPSED) --REJOIN--> JOINING
    any state --FATAL--> FATAL (only close() is left)

KIP-1082: the member id is generated here once per consumer and kept across rejoins; the broker
never assigns it (v1). A member epoch of 0 joins, -1 leaves, -2 leaves as a static member that
will come back with the same instance id.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ...errors import IllegalStateError
from ...structs import TopicPartition
from ...subscription import SubscriptionState, SubscriptionType
from ..heartbeat_verdicts import Verdict
from ..member_ids import new_member_id
from .errors import classify

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

TopicIdPartitions = frozenset[tuple[uuid.UUID, int]]


class State(Enum):
    UNSUBSCRIBED = "unsubscribed"        # not in the group, not trying to be
    JOINING = "joining"                  # heartbeating with epoch 0
    RECONCILING = "reconciling"          # a target assignment differs from what is owned
    ACKNOWLEDGING = "acknowledging"      # reconciled: the next heartbeat reports the owned set
    STABLE = "stable"                    # owns its target assignment
    FENCED = "fenced"                    # the broker dropped this epoch: partitions are lost
    PREPARE_LEAVING = "prepare_leaving"  # a leave heartbeat is due
    LEAVING = "leaving"                  # the leave heartbeat is in flight
    STALE = "stale"                      # left after a poll lapse; the next poll() rejoins
    FATAL = "fatal"                      # e.g. fenced instance id, unauthorized: close() only


class Event(Enum):
    SUBSCRIBED = "subscribed"
    HEARTBEAT_OK = "heartbeat_ok"        # data: the response
    RECONCILED = "reconciled"            # data: the plan that was carried out
    FENCED = "fenced"                    # FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID
    LOST_DONE = "lost_done"              # the poll path gave up the lost partitions
    POLL_LAPSED = "poll_lapsed"          # max_poll_interval_ms passed without poll()
    LEAVE_REQUESTED = "leave_requested"  # close() or unsubscribe()
    LEAVE_SENT = "leave_sent"
    LEAVE_DONE = "leave_done"            # answered, failed or skipped
    LAPSE_LEAVE_DONE = "lapse_leave_done"  # the same, for the leave a poll lapse caused
    REJOIN = "rejoin"                    # poll() after a lapse
    FATAL = "fatal"


S, E = State, Event
IN_GROUP = frozenset({S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE})
HEARTBEATING = IN_GROUP | {S.PREPARE_LEAVING}
DECIDE = S.RECONCILING  # placeholder in the table: the data decides between RECONCILING and STABLE

TRANSITIONS: dict[tuple[State, Event], State] = {
    (S.UNSUBSCRIBED, E.SUBSCRIBED): S.JOINING,
    (S.UNSUBSCRIBED, E.LEAVE_REQUESTED): S.UNSUBSCRIBED,
    (S.STALE, E.REJOIN): S.JOINING,
    (S.STALE, E.LEAVE_REQUESTED): S.UNSUBSCRIBED,
    (S.STALE, E.SUBSCRIBED): S.STALE,
    (S.FENCED, E.LOST_DONE): S.JOINING,
    (S.FENCED, E.FENCED): S.FENCED,
    (S.FENCED, E.SUBSCRIBED): S.FENCED,
    (S.FENCED, E.LEAVE_REQUESTED): S.UNSUBSCRIBED,  # the broker has already dropped us
    (S.PREPARE_LEAVING, E.LEAVE_SENT): S.LEAVING,
    (S.PREPARE_LEAVING, E.LEAVE_DONE): S.UNSUBSCRIBED,
    (S.PREPARE_LEAVING, E.LEAVE_REQUESTED): S.PREPARE_LEAVING,
    (S.LEAVING, E.LEAVE_DONE): S.UNSUBSCRIBED,
    (S.PREPARE_LEAVING, E.LAPSE_LEAVE_DONE): S.STALE,
    (S.LEAVING, E.LAPSE_LEAVE_DONE): S.STALE,
    (S.LEAVING, E.LEAVE_REQUESTED): S.LEAVING,
    # Late answers to a heartbeat sent before the leave: the leave wins.
    (S.PREPARE_LEAVING, E.HEARTBEAT_OK): S.PREPARE_LEAVING,
    (S.LEAVING, E.HEARTBEAT_OK): S.LEAVING,
    (S.PREPARE_LEAVING, E.FENCED): S.PREPARE_LEAVING,
    (S.LEAVING, E.FENCED): S.LEAVING,
}
for _s in IN_GROUP:
    TRANSITIONS[(_s, E.HEARTBEAT_OK)] = DECIDE
    TRANSITIONS[(_s, E.FENCED)] = S.FENCED
    TRANSITIONS[(_s, E.LEAVE_REQUESTED)] = S.PREPARE_LEAVING
    TRANSITIONS[(_s, E.POLL_LAPSED)] = S.PREPARE_LEAVING
    TRANSITIONS[(_s, E.SUBSCRIBED)] = _s  # a new subscription goes out in the next heartbeat
TRANSITIONS[(S.RECONCILING, E.RECONCILED)] = S.ACKNOWLEDGING
for _s in State:
    TRANSITIONS[(_s, E.FATAL)] = S.FATAL


class IllegalKip848Transition(IllegalStateError):
    def __init__(self, state: State, event: Event) -> None:
        super().__init__(f"KIP-848 member: event {event.name} is not allowed in state {state.name}")
        self.state = state
        self.event = event


@dataclass(frozen=True)
class Subscription:
    """What the member asks the broker for: topic names, or a broker-side regex (v1+)."""

    topics: frozenset[str] = frozenset()
    regex: str | None = None


@dataclass(frozen=True)
class Plan:
    """One reconciliation step: revoke what the target dropped, then add what it brought."""

    epoch: int
    revoke: frozenset[TopicPartition]
    add: frozenset[TopicPartition]
    keep: frozenset[TopicPartition]
    owned_after: TopicIdPartitions  # what will be owned (and acknowledged) when it is carried out
    unresolved: frozenset[uuid.UUID]  # topic ids the metadata cannot name yet: added later

    @property
    def assignment_after(self) -> frozenset[TopicPartition]:
        return self.keep | self.add


@dataclass
class _Sent:
    """The fields the broker has from us (None: send in full next time)."""

    subscription: Subscription | None = None
    rebalance_timeout_ms: int | None = None
    assignor: str | None = None
    owned: TopicIdPartitions | None = None


@dataclass
class Kip848Machine:
    group_id: str
    instance_id: str | None = None
    rebalance_timeout_ms: int = 300000
    server_assignor: str | None = None
    rack_id: str | None = None
    member_id: str = field(default_factory=new_member_id)
    state: State = State.UNSUBSCRIBED
    member_epoch: int = JOIN_EPOCH
    heartbeat_interval_ms: int | None = None
    subscription: Subscription = field(default_factory=Subscription)
    target: TopicIdPartitions | None = None  # the last assignment the broker sent
    owned: TopicIdPartitions = frozenset()
    names: dict[uuid.UUID, str] = field(default_factory=dict)  # topic ids resolved so far
    fatal: BaseException | None = None
    leave_permanently: bool = False  # a static member's leave says it will not come back (epoch -1)
    joins: int = 0  # answers that took the member from epoch 0 into the group: one per membership
    _sent: _Sent = field(default_factory=_Sent)
    _pending: _Sent | None = None  # what the heartbeat in flight carries

    # ------------------------------------------------------------ transitions

    def handle(self, event: Event) -> State:
        nxt = TRANSITIONS.get((self.state, event))
        if nxt is None:
            raise IllegalKip848Transition(self.state, event)
        if nxt is DECIDE and (self.state, event) in _DECIDED:
            nxt = S.RECONCILING if self.reconciliation_needed() else S.STABLE
        self.state = nxt
        return nxt

    def reconciliation_needed(self) -> bool:
        return self.target is not None and self.target != self.owned

    def subscribe(self, subscription: Subscription) -> None:
        self.subscription = subscription
        self.handle(E.SUBSCRIBED)

    @property
    def in_group(self) -> bool:
        return self.state in IN_GROUP and self.member_epoch > 0

    @property
    def wants_heartbeat(self) -> bool:
        return self.state in HEARTBEATING

    # ------------------------------------------------------------ heartbeat requests

    def heartbeat_request(self) -> dict[str, Any]:
        """The next heartbeat's body; fields the broker already has go out as null."""
        if self.state is S.PREPARE_LEAVING:
            return self._leave_request()
        full = self.member_epoch == JOIN_EPOCH
        sent = _Sent() if full else self._sent
        body: dict[str, Any] = {
            "group_id": self.group_id, "member_id": self.member_id, "member_epoch": self.member_epoch,
            "instance_id": self.instance_id, "rack_id": self.rack_id if full else None,
            "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None,
        }
        pending = _Sent(sent.subscription, sent.rebalance_timeout_ms, sent.assignor, sent.owned)
        if sent.rebalance_timeout_ms != self.rebalance_timeout_ms:
            body["rebalance_timeout_ms"] = pending.rebalance_timeout_ms = self.rebalance_timeout_ms
        if sent.subscription != self.subscription:
            pending.subscription = self.subscription
            if self.subscription.regex is not None:
                body["subscribed_topic_regex"] = self.subscription.regex
            else:
                body["subscribed_topic_names"] = sorted(self.subscription.topics)
        if sent.assignor != self.server_assignor or full:
            body["server_assignor"] = pending.assignor = self.server_assignor
        if sent.owned != self.owned:
            body["topic_partitions"] = owned_field(self.owned)
            pending.owned = self.owned
        self._pending = pending
        return body

    def _leave_request(self) -> dict[str, Any]:
        self._pending = None
        return leave_body(self.group_id, self.member_id, self.instance_id, self.leave_permanently)

    def heartbeat_failed(self) -> None:
        """No answer (connection lost, timeout, coordinator moved): resend every field next time."""
        self._pending = None
        self._sent = _Sent()

    # ------------------------------------------------------------ heartbeat responses

    def on_heartbeat_response(self, response: Mapping[str, Any], carried: bool = True) -> Verdict:
        """Apply one heartbeat answer; the verdict tells the shell what to do next. ``carried``
        False: it answered a keep-alive (every field null), not the request built last."""
        code = response["error_code"]
        verdict = classify(code, self.group_id, response.get("error_message"))
        if verdict.fatal is not None:
            self.fatal = verdict.fatal
            self.handle(E.FATAL)
            return verdict
        if verdict.fenced:
            self.heartbeat_failed()
            self.handle(E.FENCED)
            return verdict
        if verdict.retry:
            self.heartbeat_failed()
            return verdict
        if self.state in (S.PREPARE_LEAVING, S.LEAVING):
            return verdict
        if carried:
            self._sent, self._pending = self._pending or _Sent(), None
        if self.member_epoch == JOIN_EPOCH and response["member_epoch"] > 0:
            self.joins += 1
        self.member_epoch = response["member_epoch"]
        if response.get("heartbeat_interval_ms", 0) > 0:
            self.heartbeat_interval_ms = response["heartbeat_interval_ms"]
        assignment = response.get("assignment")
        if assignment is not None:
            self.target = frozenset((t["topic_id"], p) for t in assignment["topic_partitions"]
                                    for p in t["partitions"])
        self.handle(E.HEARTBEAT_OK)
        return verdict

    # ------------------------------------------------------------ reconciliation

    def plan(self, resolve: Callable[[uuid.UUID], str | None]) -> Plan | None:
        """What the poll path must do to reach the target (None: nothing). Topic ids are named
        through ``resolve`` (the metadata cache); ids it cannot name wait for a refresh."""
        if self.state is not S.RECONCILING or self.target is None:
            return None
        for topic_id, _ in self.target:
            if topic_id not in self.names:
                name = resolve(topic_id)
                if name is not None:
                    self.names[topic_id] = name
        resolved = frozenset(tp for tp in self.target if tp[0] in self.names)
        unresolved = frozenset(t for t, _ in self.target if t not in self.names)
        kept = self.owned & self.target
        return Plan(
            epoch=self.member_epoch,
            revoke=self._named(self.owned - self.target),
            add=self._named(resolved - self.owned),
            keep=self._named(kept),
            owned_after=kept | resolved,
            unresolved=unresolved,
        )

    def owned_partitions(self) -> frozenset[TopicPartition]:
        """The partitions this member holds now (those pending revocation included)."""
        return self._named(self.owned)

    def _named(self, tps: TopicIdPartitions) -> frozenset[TopicPartition]:
        return frozenset(TopicPartition(self.names[t], p) for t, p in tps)

    def reconciled(self, plan: Plan) -> bool:
        """The plan was carried out. False when the member moved on meanwhile (fenced, left):
        the result is void and the poll path handles the new state."""
        if self.state is not S.RECONCILING:
            return False
        self.owned = plan.owned_after
        if plan.unresolved:
            return True  # still RECONCILING: the rest once the metadata names the topics
        self.handle(E.RECONCILED)
        return True

    # ------------------------------------------------------------ fencing, leaving, rejoining

    def lost_done(self) -> None:
        """The lost partitions were given up: rejoin with epoch 0 and the same member id."""
        self._reset_assignment()
        self.handle(E.LOST_DONE)

    def poll_lapsed(self) -> None:
        self.handle(E.POLL_LAPSED)

    def request_leave(self, permanently: bool = False) -> None:
        """``permanently``: a static member leaves as a dynamic one does (close() with LEAVE)."""
        self.leave_permanently = permanently
        self.handle(E.LEAVE_REQUESTED)

    def leave_sent(self) -> None:
        self.handle(E.LEAVE_SENT)

    def leave_done(self, lapsed: bool) -> None:
        """The leave heartbeat was answered (or could not be sent). After a poll lapse the member
        is STALE: it still holds its partitions until the next poll() gives them up as lost."""
        self.handle(E.LAPSE_LEAVE_DONE if lapsed else E.LEAVE_DONE)
        self.member_epoch = JOIN_EPOCH
        self.target = None
        self.heartbeat_failed()
        if not lapsed:
            self.owned = frozenset()

    def rejoin(self) -> None:
        self._reset_assignment()
        self.handle(E.REJOIN)

    def _reset_assignment(self) -> None:
        self.member_epoch = JOIN_EPOCH
        self.target = None
        self.owned = frozenset()
        self.heartbeat_failed()


_DECIDED = frozenset((s, E.HEARTBEAT_OK) for s in IN_GROUP)


def leave_body(group_id: str, member_id: str, instance_id: str | None, permanently: bool = False
               ) -> dict[str, Any]:
    """The leave heartbeat: epoch -1, or -2 for a static member that will come back."""
    epoch = STATIC_LEAVE_EPOCH if instance_id is not None and not permanently else LEAVE_EPOCH
    return {"group_id": group_id, "member_id": member_id, "member_epoch": epoch, "instance_id": instance_id}


def keepalive_body(body: Mapping[str, Any], epoch: int) -> dict[str, Any]:
    """``body`` as a keep-alive at ``epoch``: every field the broker already has goes out null."""
    return {**body, "member_epoch": epoch, "rack_id": None, "rebalance_timeout_ms": -1,
            "subscribed_topic_names": None, "subscribed_topic_regex": None, "server_assignor": None,
            "topic_partitions": None}


def owned_field(owned: TopicIdPartitions) -> list[dict[str, Any]]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for topic_id, partition in owned:
        by_topic.setdefault(topic_id, []).append(partition)
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items(), key=str)]


# Python regex syntax that the broker's RE2J reads differently or refuses (lookaround,
# backreferences, \Z, inline flags): such patterns are matched client-side.
_NOT_RE2 = re.compile(r"\(\?[=!<]|\\[1-9]|\(\?P[=<]|\\Z|\(\?[a-zA-Z]+\)")


def broker_regex_usable(pattern: re.Pattern[str] | None, heartbeat_version: int | None) -> bool:
    """KIP-848's broker-side regex needs ConsumerGroupHeartbeat v1 and a pattern RE2J reads as
    Python does (full-name match on both sides); otherwise the client matches and sends names."""
    return (pattern is not None and (heartbeat_version or 0) >= 1
            and not _NOT_RE2.search(pattern.pattern) and pattern.flags & ~re.UNICODE == 0)


def subscription_for(sub: SubscriptionState, heartbeat_version: int | None) -> Subscription:
    if sub.type is SubscriptionType.PATTERN and sub.pattern is not None \
            and broker_regex_usable(sub.pattern, heartbeat_version):
        return Subscription(regex=sub.pattern.pattern)
    return Subscription(topics=frozenset(sub.topics))
