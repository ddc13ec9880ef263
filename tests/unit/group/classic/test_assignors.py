"""Assignors: Java's documented outputs, Java's member ordering, properties, cooperative rounds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite.errors import ConfigError
from aiokafka_lite.group.classic.assignors import (
    ASSIGNORS,
    CooperativeStickyAssignor,
    PartitionAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    java_order,
    lookup_assignor,
    sorted_members,
)
from aiokafka_lite.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from aiokafka_lite.structs import TopicPartition as TP

Sub = ConsumerProtocolSubscription


def tps(spec: str) -> list[TP]:
    """'t0p0 t1p2' -> [TP('t0', 0), TP('t1', 2)]."""
    result = []
    for item in spec.split():
        topic, _, partition = item.rpartition("p")
        result.append(TP(topic, int(partition)))
    return result


def assigned(assignor: PartitionAssignor, partitions: Mapping[str, int],
             subs: Mapping[str, Sub]) -> dict[str, list[TP]]:
    result = assignor.assign(partitions, subs)
    assert set(result) == set(subs)
    return {m: list(a.partitions()) for m, a in result.items()}


# -- Java's documented examples -----------------------------------------------------------------

def test_range_java_doc_example() -> None:
    subs = {"C0": Sub(["t0", "t1"]), "C1": Sub(["t0", "t1"])}
    assert assigned(RangeAssignor(), {"t0": 3, "t1": 3}, subs) == {
        "C0": tps("t0p0 t0p1 t1p0 t1p1"),
        "C1": tps("t0p2 t1p2"),
    }


def test_roundrobin_java_doc_example() -> None:
    subs = {"C0": Sub(["t0", "t1"]), "C1": Sub(["t0", "t1"])}
    assert assigned(RoundRobinAssignor(), {"t0": 3, "t1": 3}, subs) == {
        "C0": tps("t0p0 t0p2 t1p1"),
        "C1": tps("t0p1 t1p0 t1p2"),
    }


def test_roundrobin_java_doc_uneven_subscriptions_example() -> None:
    subs = {"C0": Sub(["t0"]), "C1": Sub(["t0", "t1"]), "C2": Sub(["t0", "t1", "t2"])}
    assert assigned(RoundRobinAssignor(), {"t0": 1, "t1": 2, "t2": 3}, subs) == {
        "C0": tps("t0p0"),
        "C1": tps("t1p0"),
        "C2": tps("t1p1 t2p0 t2p1 t2p2"),
    }


def test_range_mixed_topics() -> None:
    subs = {"consumer1": Sub(["topic1"]), "consumer2": Sub(["topic1", "topic2"]),
            "consumer3": Sub(["topic1"])}
    assert assigned(RangeAssignor(), {"topic1": 3, "topic2": 2}, subs) == {
        "consumer1": tps("topic1p0"),
        "consumer2": tps("topic1p1 topic2p0 topic2p1"),
        "consumer3": tps("topic1p2"),
    }


def test_range_first_members_get_the_extra_partitions() -> None:
    subs = {m: Sub(["t"]) for m in ("c", "a", "b")}
    assert assigned(RangeAssignor(), {"t": 5}, subs) == {
        "a": tps("tp0 tp1"), "b": tps("tp2 tp3"), "c": tps("tp4")}


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor()],
                         ids=lambda a: a.name)
def test_more_members_than_partitions(assignor: PartitionAssignor) -> None:
    subs = {f"m{i}": Sub(["t"]) for i in range(4)}
    result = assigned(assignor, {"t": 2}, subs)
    assert sorted(tp for parts in result.values() for tp in parts) == tps("tp0 tp1")
    assert sorted(len(parts) for parts in result.values()) == [0, 0, 1, 1]


def test_more_members_than_partitions_range_and_roundrobin_pick_the_first_members() -> None:
    subs = {f"m{i}": Sub(["t"]) for i in range(4)}
    expected = {"m0": tps("tp0"), "m1": tps("tp1"), "m2": [], "m3": []}
    assert assigned(RangeAssignor(), {"t": 2}, subs) == expected
    assert assigned(RoundRobinAssignor(), {"t": 2}, subs) == expected


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor()],
                         ids=lambda a: a.name)
def test_members_without_topics_and_topics_without_metadata_get_nothing(
        assignor: PartitionAssignor) -> None:
    subs = {"idle": Sub([]), "busy": Sub(["t", "unknown-topic"])}
    assert assigned(assignor, {"t": 2, "empty": 0}, subs) == {"idle": [], "busy": tps("tp0 tp1")}


@pytest.mark.parametrize("assignor", [RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor()],
                         ids=lambda a: a.name)
def test_no_members_no_assignment(assignor: PartitionAssignor) -> None:
    assert assignor.assign({"t": 3}, {}) == {}


# -- Java's member order (AbstractPartitionAssignor.MemberInfo) ----------------------------------

def test_member_order_static_first_by_instance_id_then_dynamic_by_member_id() -> None:
    subs = {"a": Sub([]), "b": Sub([], group_instance_id="y"), "c": Sub([], group_instance_id="x"),
            "d": Sub([])}
    assert sorted_members(subs) == ["c", "b", "a", "d"]


def test_member_order_all_static_ignores_member_ids() -> None:
    subs = {"a": Sub([], group_instance_id="y"), "b": Sub([], group_instance_id="z"),
            "c": Sub([], group_instance_id="x")}
    assert sorted_members(subs) == ["c", "a", "b"]


def test_static_members_keep_their_range_across_restarts() -> None:
    """A static member's range follows its instance id, not its (new) member id."""
    before = {"m-9": Sub(["t"], group_instance_id="inst-a"), "m-1": Sub(["t"], group_instance_id="inst-b")}
    after = {"m-0": Sub(["t"], group_instance_id="inst-a"), "m-1": Sub(["t"], group_instance_id="inst-b")}
    assert assigned(RangeAssignor(), {"t": 4}, before)["m-9"] == tps("tp0 tp1")
    assert assigned(RangeAssignor(), {"t": 4}, after)["m-0"] == tps("tp0 tp1")


def test_roundrobin_uses_the_same_member_order() -> None:
    subs = {"a": Sub(["t"]), "z": Sub(["t"], group_instance_id="i")}
    assert assigned(RoundRobinAssignor(), {"t": 3}, subs) == {"z": tps("tp0 tp2"), "a": tps("tp1")}


def test_strings_compare_like_java_utf16() -> None:
    # U+1F600 sorts after U+FF5E by code point but before it by UTF-16 code unit (0xD83D < 0xFF5E).
    assert "\U0001f600" > "\uff5e"
    assert sorted(["\uff5e", "\U0001f600"], key=java_order) == ["\U0001f600", "\uff5e"]
    assert java_order("ab") < java_order("abc") < java_order("b")


# -- differential check against aiokafka's Java-compatible range/roundrobin ---------------------

member_ids = st.sampled_from([f"consumer-{i}" for i in range(8)])
topic_names = st.sampled_from(["a", "b", "c", "d", "e"])
groups = st.dictionaries(member_ids, st.sets(topic_names, max_size=5), min_size=1, max_size=8)
partition_counts = st.dictionaries(topic_names, st.integers(0, 12), max_size=5)


class _Cluster:
    def __init__(self, counts: Mapping[str, int]) -> None:
        self.counts = counts

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return set(range(self.counts[topic])) if topic in self.counts else None


@settings(max_examples=200, deadline=None)
@given(members=groups, counts=partition_counts)
def test_range_and_roundrobin_agree_with_aiokafka(members: dict[str, set[str]],
                                                 counts: dict[str, int]) -> None:
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

    subs = {m: Sub(sorted(topics)) for m, topics in members.items()}
    theirs_in = {m: ConsumerProtocolMemberMetadata(0, sorted(topics), b"") for m, topics in members.items()}
    for ours, theirs in ((RangeAssignor(), RangePartitionAssignor),
                         (RoundRobinAssignor(), RoundRobinPartitionAssignor)):
        expected = {m: sorted(TP(t, p) for t, ps in a.assignment for p in ps)
                    for m, a in theirs.assign(_Cluster(counts), theirs_in).items()}
        assert {m: sorted(p) for m, p in assigned(ours, counts, subs).items()} == expected


# -- properties -----------------------------------------------------------------------------------

def check_complete_and_valid(result: Mapping[str, list[TP]], counts: Mapping[str, int],
                             subs: Mapping[str, Sub]) -> None:
    """Every partition of a subscribed topic exactly once, each to a subscribed member."""
    owners = Counter(tp for parts in result.values() for tp in parts)
    subscribed = {t for s in subs.values() for t in s.topics}
    expected = {TP(t, p) for t in subscribed for p in range(counts.get(t, 0))}
    assert set(owners) == expected
    assert all(n == 1 for n in owners.values())
    for member, parts in result.items():
        assert all(tp.topic in subs[member].topics for tp in parts)


@given(members=groups, counts=partition_counts,
       assignor=st.sampled_from([RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor()]))
def test_every_partition_assigned_once_to_a_subscribed_member(
        members: dict[str, set[str]], counts: dict[str, int], assignor: PartitionAssignor) -> None:
    subs = {m: Sub(sorted(topics)) for m, topics in members.items()}
    check_complete_and_valid(assigned(assignor, counts, subs), counts, subs)


@given(n_members=st.integers(1, 10), counts=partition_counts.filter(bool),
       assignor=st.sampled_from([RoundRobinAssignor(), CooperativeStickyAssignor()]))
def test_equal_subscriptions_are_balanced_within_one(n_members: int, counts: dict[str, int],
                                                     assignor: PartitionAssignor) -> None:
    subs = {f"m{i}": Sub(sorted(counts)) for i in range(n_members)}
    loads = [len(p) for p in assigned(assignor, counts, subs).values()]
    assert max(loads) - min(loads) <= 1


@given(members=groups, counts=partition_counts)
def test_range_gives_contiguous_per_topic_ranges_balanced_within_one(
        members: dict[str, set[str]], counts: dict[str, int]) -> None:
    subs = {m: Sub(sorted(topics)) for m, topics in members.items()}
    result = assigned(RangeAssignor(), counts, subs)
    for topic in {t for ts in members.values() for t in ts}:
        per_member = [[tp.partition for tp in parts if tp.topic == topic]
                      for m, parts in result.items() if topic in members[m]]
        sizes = [len(p) for p in per_member]
        assert max(sizes) - min(sizes) <= 1
        for numbers in per_member:
            assert numbers == list(range(numbers[0], numbers[0] + len(numbers))) if numbers else True


# -- cooperative-sticky ----------------------------------------------------------------------------

def sticky_round(counts: Mapping[str, int], topics: Mapping[str, list[str]],
                 owned: Mapping[str, list[TP]], generation: int) -> dict[str, list[TP]]:
    subs = {m: Sub(topics[m], owned_partitions=owned.get(m, []), generation_id=generation)
            for m in topics}
    return assigned(CooperativeStickyAssignor(), counts, subs)


def test_sticky_keeps_a_balanced_assignment_unchanged() -> None:
    topics = {"a": ["t"], "b": ["t"]}
    owned = {"a": tps("tp1 tp3"), "b": tps("tp0 tp2")}  # not what range/roundrobin would pick
    assert sticky_round({"t": 4}, topics, owned, 3) == owned


def test_new_member_gets_partitions_after_the_owner_revokes_them() -> None:
    counts = {"t": 6}
    owned = {"a": tps("tp0 tp1 tp2"), "b": tps("tp3 tp4 tp5")}
    topics = {"a": ["t"], "b": ["t"], "c": ["t"]}
    first = sticky_round(counts, topics, owned, 1)
    # Each old member gives up one partition; the newcomer gets nothing yet (KIP-429).
    assert first["c"] == []
    assert len(first["a"]) == 2
    assert len(first["b"]) == 2
    assert set(first["a"]) <= set(owned["a"])
    assert set(first["b"]) <= set(owned["b"])
    # The owners revoke what they lost and rejoin: the freed partitions go to the newcomer.
    second = sticky_round(counts, topics, first, 2)
    assert second["a"] == first["a"]
    assert second["b"] == first["b"]
    assert sorted(second["c"]) == sorted(set(tps("tp0 tp1 tp2 tp3 tp4 tp5")) - set(first["a"] + first["b"]))


def test_partitions_of_a_departed_member_are_handed_out_at_once() -> None:
    owned = {"a": tps("tp0 tp1")}  # "b" left; its tp2, tp3 are owned by nobody now
    result = sticky_round({"t": 4}, {"a": ["t"], "c": ["t"]}, owned, 5)
    assert result["a"] == tps("tp0 tp1")
    assert result["c"] == tps("tp2 tp3")


def test_conflicting_claims_newer_generation_wins() -> None:
    subs = {"a": Sub(["t"], owned_partitions=tps("tp0"), generation_id=4),
            "b": Sub(["t"], owned_partitions=tps("tp0"), generation_id=5)}
    result = assigned(CooperativeStickyAssignor(), {"t": 2}, subs)
    assert result["b"] == tps("tp0")
    assert result["a"] == tps("tp1")


def test_conflicting_claims_same_generation_nobody_keeps_and_it_is_withheld() -> None:
    subs = {"a": Sub(["t"], owned_partitions=tps("tp0"), generation_id=4),
            "b": Sub(["t"], owned_partitions=tps("tp0"), generation_id=4)}
    result = assigned(CooperativeStickyAssignor(), {"t": 2}, subs)
    assert tps("tp0")[0] not in result["a"] + result["b"]
    assert result["b"] == tps("tp1") or result["a"] == tps("tp1")


def test_generation_from_user_data_when_subscription_predates_v2() -> None:
    assignor = CooperativeStickyAssignor()
    subs = {"a": Sub(["t"], user_data=assignor.subscription_user_data(9), owned_partitions=tps("tp0")),
            "b": Sub(["t"], user_data=assignor.subscription_user_data(8), owned_partitions=tps("tp0"))}
    assert assigned(assignor, {"t": 2}, subs) == {"a": tps("tp0"), "b": tps("tp1")}


def test_owned_partitions_of_unsubscribed_or_vanished_topics_are_dropped() -> None:
    subs = {"a": Sub(["t"], owned_partitions=tps("tp0 tp7 gonep0"), generation_id=1),
            "b": Sub(["t", "u"], owned_partitions=tps("up0"), generation_id=1)}
    result = assigned(CooperativeStickyAssignor(), {"t": 2, "u": 1}, subs)
    assert tps("tp0")[0] in result["a"]
    assert tps("up0")[0] in result["b"]
    assert sorted(result["a"] + result["b"]) == tps("tp0 tp1 up0")


def test_balancing_moves_partitions_the_member_did_not_own_first() -> None:
    # "a" owns 3 of 4; a newcomer joins. Unowned tp3 should go to the newcomer directly.
    result = sticky_round({"t": 4}, {"a": ["t"], "b": ["t"]}, {"a": tps("tp0 tp1 tp2")}, 1)
    assert result["b"] == tps("tp3")  # unowned, so handed out now, not withheld
    assert len(result["a"]) == 2  # one of its own is withheld for the next round


@settings(max_examples=100, deadline=None)
@given(members=st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True),
       joiners=st.lists(st.sampled_from("ijklmn"), max_size=3, unique=True),
       leavers=st.integers(0, 3), n_partitions=st.integers(0, 30))
def test_cooperative_rounds_converge_without_double_ownership(
        members: list[str], joiners: list[str], leavers: int, n_partitions: int) -> None:
    counts = {"t": n_partitions}
    topics = {m: ["t"] for m in members}
    owned = sticky_round(counts, topics, {}, 1)
    # Membership changes: some leave, some join; owners revoke what they lose, then rejoin.
    for m in members[:leavers]:
        topics.pop(m, None)
        owned.pop(m, None)
    topics.update({m: ["t"] for m in joiners})
    if not topics:
        return
    for generation in range(2, 5):
        result = sticky_round(counts, topics, owned, generation)
        holders = Counter(tp for parts in result.values() for tp in parts)
        assert all(n == 1 for n in holders.values())
        for m, parts in result.items():  # nothing owned by someone else is handed out
            others = {tp for o, ps in owned.items() if o != m for tp in ps}
            assert not set(parts) & others
        owned = result
    # Two rounds suffice: revoke, then hand out. The result is complete and balanced.
    assert sum(len(p) for p in owned.values()) == n_partitions
    loads = [len(p) for p in owned.values()]
    assert max(loads) - min(loads) <= 1


@st.composite
def claims(draw: st.DrawFn) -> tuple[int, dict[str, Sub]]:
    """Any claims a leader may be given: overlapping, stale, tied, or without a generation."""
    n_partitions = draw(st.integers(1, 14))
    members = draw(st.lists(st.sampled_from("abcde"), min_size=2, max_size=5, unique=True))
    owned: dict[str, set[int]] = {m: set() for m in members}
    for p in range(n_partitions):
        for m in draw(st.lists(st.sampled_from(members), max_size=2, unique=True)):
            owned[m].add(p)
    return n_partitions, {m: Sub(["t"], owned_partitions=[TP("t", p) for p in sorted(owned[m])],
                                 generation_id=draw(st.sampled_from([-1, 3, 4, 5])))
                          for m in members}


@settings(max_examples=500, deadline=None)
@given(claims())
def test_an_assignment_that_asks_nobody_to_revoke_is_complete_and_balanced(
        given_claims: tuple[int, dict[str, Sub]]) -> None:
    # Such an assignment starts no further round, so it is what the group keeps: were a member left
    # short here, it would stay short (issue 40 asked whether a member could starve this way).
    n_partitions, subs = given_claims
    result = assigned(CooperativeStickyAssignor(), {"t": n_partitions}, subs)
    if all(set(sub.owned_partitions) <= set(result[m]) for m, sub in subs.items()):
        assert sorted(tp.partition for parts in result.values() for tp in parts) == list(range(n_partitions))
        loads = [len(parts) for parts in result.values()]
        assert max(loads) - min(loads) <= 1, result


# -- registry -------------------------------------------------------------------------------------

def test_registry_and_lookup() -> None:
    assert set(ASSIGNORS) == {"range", "roundrobin", "cooperative-sticky"}
    for name in ASSIGNORS:
        assignor = lookup_assignor(name)
        assert assignor.name == name


def test_lookup_unknown_assignor_names_the_choices_and_suggests() -> None:
    with pytest.raises(ConfigError, match="roundrobin") as info:
        lookup_assignor("round-robin")
    assert "did you mean 'roundrobin'" in str(info.value)
    with pytest.raises(ConfigError, match="allowed: cooperative-sticky, range, roundrobin"):
        lookup_assignor("zzz")


def test_rebalance_protocols_and_user_data() -> None:
    assert RangeAssignor().supported_protocols == (RebalanceProtocol.EAGER,)
    assert RoundRobinAssignor().subscription_user_data(3) is None
    sticky = CooperativeStickyAssignor()
    assert RebalanceProtocol.COOPERATIVE in sticky.supported_protocols
    assert sticky.subscription_user_data(3) == b"\x00\x00\x00\x03"


def test_assignments_are_consumer_protocol_assignments() -> None:
    result = RangeAssignor().assign({"t": 1}, {"m": Sub(["t"])})
    assert result == {"m": ConsumerProtocolAssignment(tps("tp0"))}


def test_a_claim_without_any_generation_loses_to_one_with_a_generation() -> None:
    subs = {"old": Sub(["t"], owned_partitions=tps("tp0")),  # v0/v1 member, no user data
            "new": Sub(["t"], owned_partitions=tps("tp0"), generation_id=0)}
    assert assigned(CooperativeStickyAssignor(), {"t": 2}, subs) == {"old": tps("tp1"), "new": tps("tp0")}
