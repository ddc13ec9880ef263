"""Partition assignors run by the group leader: "range", "roundrobin" and "cooperative-sticky".

"range" and "roundrobin" give exactly the assignment the Java client gives for the same input,
so a group may mix our members with Java/librdkafka ones whoever is leader. Java orders members
the same way in both (AbstractPartitionAssignor.MemberInfo): static members (with a
group.instance.id, KIP-345) first, by instance id, then dynamic members by member id; strings
compare as Java's String.compareTo does (by UTF-16 code unit).

"cooperative-sticky" follows KIP-429: members keep the partitions they own as long as the
assignment stays balanced, and a partition that moves from one live owner to another is left
unassigned for one round (its owner revokes it and rejoins, then it is handed out). It is
deterministic and balanced but its choices need not match Java's move for move, which is fine:
only the leader runs the assignor.

Rack-aware assignment (KIP-881) is not done: partition replica racks are not an input here.
"""

from __future__ import annotations

import difflib
import struct
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Protocol

from ...errors import ConfigError
from ...protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from ...structs import TopicPartition

Subscriptions = Mapping[str, ConsumerProtocolSubscription]
Assignments = dict[str, ConsumerProtocolAssignment]


class RebalanceProtocol(Enum):
    EAGER = "eager"              # revoke everything before rejoining
    COOPERATIVE = "cooperative"  # keep what you own; revoke only what the leader moves (KIP-429)


class PartitionAssignor(Protocol):
    @property
    def name(self) -> str:
        """The protocol name sent in JoinGroup (``partition.assignment.strategy``)."""
        ...

    @property
    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]: ...

    def subscription_user_data(self, generation_id: int) -> bytes | None:
        """User data for this member's subscription."""
        ...

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Subscriptions) -> Assignments:
        """Map every member id in ``subscriptions`` to its assignment. Topics absent from
        ``partitions_per_topic`` (no metadata yet) get no partitions."""
        ...


def java_order(text: str) -> bytes:
    """A sort key ordering strings like Java's String.compareTo (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


def member_order(member_id: str, sub: ConsumerProtocolSubscription) -> tuple[int, bytes]:
    """Java's member order: static members by instance id first, then dynamic ones by member id."""
    if sub.group_instance_id is not None:
        return 0, java_order(sub.group_instance_id)
    return 1, java_order(member_id)


def sorted_members(subscriptions: Subscriptions) -> list[str]:
    return sorted(subscriptions, key=lambda m: member_order(m, subscriptions[m]))


def _partitions_of(topic: str, partitions_per_topic: Mapping[str, int]) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(max(0, partitions_per_topic.get(topic, 0)))]


def _tp_order(tp: TopicPartition) -> tuple[bytes, int]:
    return java_order(tp.topic), tp.partition


def _to_assignments(members: Iterable[str],
                    chosen: Mapping[str, Iterable[TopicPartition]]) -> Assignments:
    return {m: ConsumerProtocolAssignment(tuple(sorted(chosen.get(m, ()), key=_tp_order)))
            for m in members}


class _EagerAssignor:
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, generation_id: int) -> bytes | None:
        return None


class RangeAssignor(_EagerAssignor):
    """Per topic: members subscribed to it, in Java order, each get a contiguous range; the
    first ``partitions % members`` of them get one extra."""

    name = "range"

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Subscriptions) -> Assignments:
        chosen: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        ordered = sorted_members(subscriptions)
        topics_of = {m: frozenset(sub.topics) for m, sub in subscriptions.items()}
        for topic in set().union(*topics_of.values()):
            members = [m for m in ordered if topic in topics_of[m]]
            partitions = _partitions_of(topic, partitions_per_topic)
            base, extra = divmod(len(partitions), len(members))
            start = 0
            for index, member in enumerate(members):
                length = base + (1 if index < extra else 0)
                chosen[member].extend(partitions[start:start + length])
                start += length
        return _to_assignments(subscriptions, chosen)


class RoundRobinAssignor(_EagerAssignor):
    """All partitions of all subscribed topics, sorted, dealt out to members (Java order) in a
    circle; a member not subscribed to a partition's topic is skipped."""

    name = "roundrobin"

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Subscriptions) -> Assignments:
        chosen: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members = sorted_members(subscriptions)
        topics_of = {m: frozenset(sub.topics) for m, sub in subscriptions.items()}
        position = 0
        for topic in sorted(set().union(*topics_of.values()), key=java_order):
            for tp in _partitions_of(topic, partitions_per_topic):
                # Ends: the topic came from some member's subscription.
                while topic not in topics_of[members[position]]:
                    position = (position + 1) % len(members)
                chosen[members[position]].append(tp)
                position = (position + 1) % len(members)
        return _to_assignments(subscriptions, chosen)


_GENERATION = struct.Struct(">i")


class CooperativeStickyAssignor:
    """Sticky and balanced; partitions changing owner are withheld for one round (KIP-429)."""

    name = "cooperative-sticky"
    supported_protocols: tuple[RebalanceProtocol, ...] = (
        RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def subscription_user_data(self, generation_id: int) -> bytes | None:
        # The generation as an int32, as Java's cooperative-sticky members send it, for leaders
        # that only read subscription v0/v1 (v2+ also carries it in its own field).
        return _GENERATION.pack(generation_id)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Subscriptions) -> Assignments:
        members = sorted_members(subscriptions)
        rank = {m: i for i, m in enumerate(members)}
        eligible = {m: frozenset(t for t in subscriptions[m].topics if partitions_per_topic.get(t, 0) > 0)
                    for m in members}
        kept = _kept_partitions(subscriptions, partitions_per_topic, eligible)
        current = {m: set(tps) for m, tps in kept.items()}
        taken = {tp for tps in kept.values() for tp in tps}
        topics = sorted({t for m in members for t in eligible[m]}, key=java_order)
        for topic in topics:
            for tp in _partitions_of(topic, partitions_per_topic):
                if tp not in taken:
                    target = min((m for m in members if topic in eligible[m]),
                                 key=lambda m: (len(current[m]), rank[m]))
                    current[target].add(tp)
        _balance(current, kept, eligible, members, rank)
        return _withhold_transfers(current, subscriptions, members)


def claim_generation(sub: ConsumerProtocolSubscription) -> int:
    """The generation in which the member owned its partitions (-1 if unknown)."""
    if sub.generation_id >= 0:
        return sub.generation_id
    if sub.user_data is not None and len(sub.user_data) == _GENERATION.size:
        claimed: int = _GENERATION.unpack(sub.user_data)[0]
        return claimed
    return -1


def _kept_partitions(subscriptions: Subscriptions, partitions_per_topic: Mapping[str, int],
                     eligible: Mapping[str, frozenset[str]]) -> dict[str, set[TopicPartition]]:
    """Owned partitions each member may keep: still existing, still subscribed, and not also
    claimed by a member of a newer generation (a tie between claimants keeps it for nobody)."""
    claims: dict[TopicPartition, list[tuple[int, str]]] = {}
    for member, sub in subscriptions.items():
        for tp in set(sub.owned_partitions):
            if tp.topic in eligible[member] and 0 <= tp.partition < partitions_per_topic[tp.topic]:
                claims.setdefault(tp, []).append((claim_generation(sub), member))
    kept: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    for tp, claimants in claims.items():
        newest = max(generation for generation, _ in claimants)
        winners = [member for generation, member in claimants if generation == newest]
        if len(winners) == 1:
            kept[winners[0]].add(tp)
    return kept


def _balance(current: dict[str, set[TopicPartition]], kept: Mapping[str, set[TopicPartition]],
             eligible: Mapping[str, frozenset[str]], members: list[str], rank: Mapping[str, int]) -> None:
    """Move single partitions from a member to an eligible one holding at least two fewer until
    no such move exists. Each move lowers the sum of squared loads, so this ends."""
    while (move := _find_move(current, kept, eligible, members, rank)) is not None:
        tp, source, target = move
        current[source].remove(tp)
        current[target].add(tp)


def _find_move(current: Mapping[str, set[TopicPartition]], kept: Mapping[str, set[TopicPartition]],
               eligible: Mapping[str, frozenset[str]], members: list[str],
               rank: Mapping[str, int]) -> tuple[TopicPartition, str, str] | None:
    for source in sorted(members, key=lambda m: (-len(current[m]), rank[m])):
        load = len(current[source])
        lighter = sorted((m for m in members if len(current[m]) < load - 1),
                         key=lambda m: (len(current[m]), rank[m]))
        if not lighter:
            continue
        # Move partitions the source did not own before first: fewer revocations.
        for tp in sorted(current[source], key=lambda tp: (tp in kept[source], _tp_order(tp))):
            for target in lighter:
                if tp.topic in eligible[target]:
                    return tp, source, target
    return None


def _withhold_transfers(current: Mapping[str, set[TopicPartition]], subscriptions: Subscriptions,
                        members: list[str]) -> Assignments:
    """KIP-429: a partition another member still claims is not handed out this round, unless the
    new owner's own claim is the only newest one; the other claimant sees it missing from its
    assignment, revokes it and rejoins, and the next round hands it out."""
    claims: dict[TopicPartition, list[tuple[int, str]]] = {}
    for member, sub in subscriptions.items():
        for tp in set(sub.owned_partitions):
            claims.setdefault(tp, []).append((claim_generation(sub), member))

    def may_take(member: str, tp: TopicPartition) -> bool:
        claimants = claims.get(tp, [])
        if all(claimant == member for _, claimant in claimants):
            return True
        newest = max(generation for generation, _ in claimants)
        return [c for g, c in claimants if g == newest] == [member]

    chosen = {m: [tp for tp in current[m] if may_take(m, tp)] for m in members}
    return _to_assignments(members, chosen)


ASSIGNORS: dict[str, type[PartitionAssignor]] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}


def lookup_assignor(name: str) -> PartitionAssignor:
    """A new assignor for a ``partition_assignment_strategy`` name."""
    cls = ASSIGNORS.get(name)
    if cls is None:
        hint = difflib.get_close_matches(name, ASSIGNORS, n=1)
        suggestion = f"; did you mean {hint[0]!r}?" if hint else ""
        raise ConfigError(f"partition_assignment_strategy: unknown assignor {name!r}; "
                          f"allowed: {', '.join(sorted(ASSIGNORS))}{suggestion}")
    return cls()


def rebalance_protocol(assignors: Iterable[PartitionAssignor]) -> RebalanceProtocol:
    """As Java: the most advanced protocol every configured assignor supports. Java's default
    list (range, cooperative-sticky) is therefore eager; cooperative-sticky alone is cooperative."""
    chosen = list(assignors)
    common = set(RebalanceProtocol)
    for assignor in chosen:
        common &= set(assignor.supported_protocols)
    if not common:
        names = ", ".join(a.name for a in chosen)
        raise ConfigError(f"partition_assignment_strategy ({names}): these assignors have no rebalance "
                          "protocol in common (eager or cooperative); list assignors of one kind")
    return RebalanceProtocol.COOPERATIVE if RebalanceProtocol.COOPERATIVE in common else RebalanceProtocol.EAGER
