"""SubscriptionState: topics, pattern and manual assignment, per-partition positions, resets, pauses."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite import OffsetAndMetadata, TopicPartition
from aiokafka_lite.errors import IllegalStateError, InvalidArgumentError
from aiokafka_lite.subscription import (
    PartitionState,
    ResetStrategy,
    SubscriptionState,
    SubscriptionType,
)

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
U0 = TopicPartition("u", 0)


def test_new_state_subscribes_to_nothing():
    sub = SubscriptionState()
    assert sub.type is SubscriptionType.NONE
    assert sub.topics == frozenset()
    assert sub.pattern is None
    assert sub.assigned() == set()
    assert sub.default_reset is ResetStrategy.LATEST
    assert not sub.uses_group


def test_subscribe_topics():
    sub = SubscriptionState()
    sub.subscribe(["a", "b", "a"])
    assert sub.type is SubscriptionType.TOPICS
    assert sub.topics == frozenset({"a", "b"})
    assert sub.uses_group
    sub.subscribe(["c"])  # re-subscribing replaces the topic set
    assert sub.topics == frozenset({"c"})


@pytest.mark.parametrize("bad", ["", None, 3])
def test_subscribe_rejects_bad_topic_names(bad):
    sub = SubscriptionState()
    with pytest.raises(InvalidArgumentError, match="non-empty strings"):
        sub.subscribe(["ok", bad])
    assert sub.type is SubscriptionType.NONE  # nothing changed


def test_subscribe_to_nothing_unsubscribes_and_drops_the_assignment():
    sub = SubscriptionState()
    sub.subscribe(["t"])
    sub.set_assignment([T0])
    sub.subscribe([])
    assert sub.type is SubscriptionType.NONE
    assert sub.topics == frozenset()
    assert sub.assigned() == set()


def test_subscribe_pattern_from_string_and_compiled():
    sub = SubscriptionState()
    sub.subscribe_pattern(r"^orders-.*")
    assert sub.type is SubscriptionType.PATTERN
    assert sub.pattern is not None
    assert sub.pattern.pattern == r"^orders-.*"
    assert sub.topics == frozenset()
    assert sub.uses_group
    compiled = re.compile(r"^pay")
    sub.subscribe_pattern(compiled)
    assert sub.pattern is compiled


def test_subscribe_pattern_rejects_invalid_patterns():
    sub = SubscriptionState()
    with pytest.raises(InvalidArgumentError, match="invalid topic pattern"):
        sub.subscribe_pattern("([unclosed")
    with pytest.raises(InvalidArgumentError, match=r"str or re\.Pattern"):
        sub.subscribe_pattern(42)  # type: ignore[arg-type]
    assert sub.type is SubscriptionType.NONE


def test_match_pattern_reports_changes():
    sub = SubscriptionState()
    assert sub.match_pattern(["x"]) is False  # no pattern: nothing to match
    sub.subscribe_pattern(r"orders-\d+")
    assert sub.match_pattern(["orders-1", "payments", "x-orders-2"]) is True
    assert sub.topics == frozenset({"orders-1"})  # re.match anchors at the start
    assert sub.match_pattern(["orders-1", "payments"]) is False
    assert sub.match_pattern(["orders-1", "orders-2"]) is True
    assert sub.topics == frozenset({"orders-1", "orders-2"})
    assert sub.match_pattern([]) is True
    assert sub.topics == frozenset()


def test_assign_manually():
    sub = SubscriptionState()
    sub.assign_manually([T0, U0])
    assert sub.type is SubscriptionType.MANUAL
    assert sub.topics == frozenset({"t", "u"})
    assert sub.assigned() == {T0, U0}
    assert not sub.uses_group
    sub.assign_manually([])
    assert sub.type is SubscriptionType.NONE
    assert sub.assigned() == set()


def test_assign_rejects_non_topic_partitions():
    sub = SubscriptionState()
    with pytest.raises(InvalidArgumentError, match="TopicPartition"):
        sub.assign_manually([("t", 0)])
    with pytest.raises(InvalidArgumentError, match="TopicPartition"):
        sub.assign_manually(T0)  # type: ignore[arg-type]  # a bare TopicPartition iterates its fields
    assert sub.assigned() == set()


@pytest.mark.parametrize(("first", "second"), [
    ("topics", "pattern"), ("topics", "manual"), ("pattern", "topics"), ("pattern", "manual"),
    ("manual", "topics"), ("manual", "pattern"),
])
def test_subscription_kinds_are_mutually_exclusive(first, second):
    actions = {
        "topics": lambda s: s.subscribe(["t"]),
        "pattern": lambda s: s.subscribe_pattern("t.*"),
        "manual": lambda s: s.assign_manually([T0]),
    }
    sub = SubscriptionState()
    actions[first](sub)
    with pytest.raises(IllegalStateError, match="unsubscribe"):
        actions[second](sub)
    sub.unsubscribe()
    actions[second](sub)  # allowed after unsubscribe()


def test_unsubscribe_clears_everything():
    sub = SubscriptionState()
    sub.subscribe_pattern("t.*")
    sub.match_pattern(["t"])
    sub.set_assignment([T0])
    sub.unsubscribe()
    assert sub.type is SubscriptionType.NONE
    assert sub.topics == frozenset()
    assert sub.pattern is None
    assert sub.assigned() == set()


def test_set_assignment_keeps_state_of_partitions_that_stay():
    sub = SubscriptionState()
    sub.subscribe(["t"])
    sub.set_assignment([T0, T1])
    sub.seek(T0, 10)
    sub.pause([T0])
    kept = sub.state(T0)
    dropped = sub.state(T1).incarnation
    sub.set_assignment([T0, U0])
    assert sub.state(T0) is kept
    assert sub.state(T0).position == 10
    assert sub.state(T0).paused
    assert sub.state(U0) == PartitionState()
    assert not sub.is_assigned(T1)
    assert sub.is_assigned(U0)
    sub.set_assignment([T0, U0, T1])
    assert sub.state(T1).incarnation != dropped  # assigned again: data fetched before is stale


def test_state_of_unassigned_partition_is_illegal():
    sub = SubscriptionState()
    with pytest.raises(IllegalStateError, match="not assigned"):
        sub.state(T0)


def test_positions_resets_and_fetchability():
    sub = SubscriptionState(default_reset=ResetStrategy.EARLIEST)
    sub.assign_manually([T0, T1, U0])
    # New partitions have no position and no reset: they need their committed offset.
    assert set(sub.needing_position()) == {T0, T1, U0}
    assert sub.needing_reset() == []
    assert sub.fetchable() == []
    sub.seek(T0, 5, leader_epoch=3)
    sub.request_reset(T1)  # the default strategy
    sub.request_reset(U0, ResetStrategy.LATEST)
    assert sub.needing_position() == []
    assert set(sub.needing_reset()) == {T1, U0}
    assert sub.state(T1).reset_to is ResetStrategy.EARLIEST
    assert sub.state(U0).reset_to is ResetStrategy.LATEST
    assert sub.fetchable() == [T0]
    assert sub.state(T0).leader_epoch == 3
    # seek() resolves a pending reset; request_reset() forgets the position.
    sub.seek(T1, 0)
    assert sub.state(T1).reset_to is None
    assert set(sub.fetchable()) == {T0, T1}
    sub.request_reset(T0)
    assert sub.state(T0).position is None
    assert sub.state(T0).reset_to is ResetStrategy.EARLIEST
    assert sub.fetchable() == [T1]


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None])
def test_seek_rejects_bad_offsets(bad):
    sub = SubscriptionState()
    sub.assign_manually([T0])
    with pytest.raises(InvalidArgumentError, match="seek offset"):
        sub.seek(T0, bad)
    assert sub.state(T0).position is None


def test_seek_and_reset_of_unassigned_partition_is_illegal():
    sub = SubscriptionState()
    sub.assign_manually([T0])
    with pytest.raises(IllegalStateError):
        sub.seek(T1, 0)
    with pytest.raises(IllegalStateError):
        sub.request_reset(T1)


def test_pause_and_resume():
    sub = SubscriptionState()
    sub.assign_manually([T0, T1])
    sub.seek(T0, 0)
    sub.seek(T1, 0)
    sub.pause([T0])
    assert sub.paused() == {T0}
    assert sub.fetchable() == [T1]
    assert sub.state(T0).position == 0  # pausing keeps the position
    sub.resume([T0])
    assert sub.paused() == set()
    assert set(sub.fetchable()) == {T0, T1}
    sub.resume([T1])  # resuming a partition that is not paused is harmless
    assert sub.paused() == set()
    with pytest.raises(IllegalStateError):
        sub.pause([U0])
    with pytest.raises(IllegalStateError):
        sub.resume([U0])


def test_partition_state_fetchable():
    assert not PartitionState().fetchable
    assert PartitionState(position=0).fetchable
    assert not PartitionState(position=0, paused=True).fetchable
    assert not PartitionState(position=0, reset_to=ResetStrategy.LATEST).fetchable


def test_consumed_offsets_are_known_positions_with_epochs():
    sub = SubscriptionState()
    sub.assign_manually([T0, T1, U0])
    sub.seek(T0, 7, leader_epoch=2)
    sub.seek(U0, 0)
    assert sub.consumed_offsets() == {
        T0: OffsetAndMetadata(7, "", 2),
        U0: OffsetAndMetadata(0, "", None),
    }


def test_the_same_subscription_again_is_no_change():
    """subscribe() with the same topics or pattern (a new listener, say) is no reason to rejoin, as in
    Java; the topics a pattern matched stay."""
    sub = SubscriptionState()
    assert sub.subscribe_to(["a", "b"], None)
    assert not sub.subscribe_to(["b", "a"], None)
    assert sub.subscribe_to(["a"], None)
    sub = SubscriptionState()
    assert sub.subscribe_to([], r"^a.*")
    sub.match_pattern(["a1", "a2", "b"])
    assert not sub.subscribe_to([], r"^a.*")
    assert not sub.subscribe_to([], re.compile(r"^a.*"))
    assert sub.topics == frozenset({"a1", "a2"})
    assert sub.subscribe_to([], re.compile(r"^a.*", re.IGNORECASE))
    with pytest.raises(InvalidArgumentError):
        sub.subscribe_to(["a"], r"^a.*")


# -- the settled cache: poll()'s questions answered without a scan must be the scan's answers --------

_PARTS = [TopicPartition("t", p) for p in range(4)]


def _scanned(sub: SubscriptionState) -> tuple[object, ...]:
    """What each question asks, computed from the partition states alone."""
    states = sub.assignment.items()
    return ([tp for tp, s in states if s.fetchable], any(s.fetchable for _, s in states),
            [tp for tp, s in states if s.position is None and s.reset_to is None],
            [tp for tp, s in states if s.reset_to is not None], {tp for tp, s in states if s.awaiting_callback},
            {tp for tp, s in states if s.paused})


def _answered(sub: SubscriptionState) -> tuple[object, ...]:
    return (sub.fetchable(), sub.any_fetchable(), sub.needing_position(), sub.needing_reset(),
            sub.awaiting_callback(), sub.paused())


_STEPS = st.lists(st.tuples(
    st.sampled_from(["assign", "seek", "reset", "pause", "resume", "await", "awaited", "revoke", "ask"]),
    st.lists(st.sampled_from(_PARTS), max_size=4, unique=True)), max_size=40)


@given(_STEPS)
@settings(max_examples=300, deadline=None, database=None)
def test_every_question_matches_a_scan_after_any_sequence_of_changes(
        steps: list[tuple[str, list[TopicPartition]]]) -> None:
    sub = SubscriptionState()
    for op, tps in steps:
        held = [tp for tp in tps if sub.is_assigned(tp)]
        if op == "assign":
            sub.set_assignment(tps)
        elif op == "seek":
            for tp in held:
                sub.seek(tp, 5)
        elif op == "reset":
            for tp in held:
                sub.request_reset(tp)
        elif op == "pause":
            sub.pause(held)
        elif op == "resume":
            sub.resume(held)
        elif op in ("await", "awaited"):
            sub.set_awaiting_callback(held, op == "await")
        elif op == "revoke":
            sub.set_pending_revocation(held)
        assert _answered(sub) == _scanned(sub), (op, tps)  # "ask" only asks: the cache is set or kept
