"""What the consumer reads: the subscription (topics, pattern or manual assignment) and, for each
assigned partition, its fetch position, pause flag and pending offset reset. No I/O here.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from .config.checks import BY_DURATION, iso_duration_ms
from .errors import IllegalStateError, InvalidArgumentError
from .structs import OffsetAndMetadata, TopicPartition

_INCARNATIONS = itertools.count(1)


class SubscriptionType(Enum):
    NONE = "none"
    TOPICS = "topics"
    PATTERN = "pattern"
    MANUAL = "manual"


class ResetStrategy(Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"
    BY_DURATION = "by_duration"  # KIP-1106: the first offset at most SubscriptionState.reset_duration_ms old


@dataclass
class PartitionState:
    """Per assigned partition. `position` is the next offset to hand out (None: not yet known)."""

    position: int | None = None
    leader_epoch: int | None = None
    paused: bool = False
    reset_to: ResetStrategy | None = None  # a pending reset, resolved with ListOffsets
    high_watermark: int | None = None
    last_stable_offset: int | None = None
    log_start_offset: int | None = None
    # Newly assigned, and on_partitions_assigned has not yet returned without an error: not
    # fetched until it has (as in Java).
    awaiting_callback: bool = False
    # On its way out (a revocation's callback runs): no fetch, and no record handed out.
    pending_revocation: bool = False
    # Which assignment of this partition the state belongs to: fetched data is used only by the
    # same incarnation (a partition revoked and assigned again gets a new one).
    incarnation: int = field(default_factory=lambda: next(_INCARNATIONS), compare=False)

    @property
    def fetchable(self) -> bool:
        return not self.paused and self.position is not None and self.reset_to is None \
            and not self.awaiting_callback and not self.pending_revocation


@dataclass
class SubscriptionState:
    default_reset: ResetStrategy = ResetStrategy.LATEST
    reset_duration_ms: int = 0  # of a by_duration default_reset
    type: SubscriptionType = SubscriptionType.NONE
    topics: frozenset[str] = frozenset()
    pattern: re.Pattern[str] | None = None
    assignment: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    # False once a scan found every assigned partition fetchable (positioned, no reset pending, not
    # paused, no callback awaited, not being revoked), until a method here may have changed that.
    # poll() asks several of the questions below every call: with 10,000 partitions each scan cost
    # milliseconds. Only this class's methods change those flags (a state's position is set
    # elsewhere, but only from one offset to another).
    _unsettled: bool = field(default=True, init=False, repr=False, compare=False)

    @classmethod
    def for_reset(cls, auto_offset_reset: str) -> SubscriptionState:
        """The state of a consumer whose (validated) auto_offset_reset is ``auto_offset_reset``."""
        if auto_offset_reset.startswith(BY_DURATION):
            duration_ms = iso_duration_ms(auto_offset_reset[len(BY_DURATION):])
            assert duration_ms is not None  # checked by the settings
            return cls(default_reset=ResetStrategy.BY_DURATION, reset_duration_ms=duration_ms)
        return cls(default_reset=ResetStrategy(auto_offset_reset))

    # ------------------------------------------------------------ subscription

    def subscribe(self, topics: Iterable[str]) -> None:
        self._check_type(SubscriptionType.TOPICS)
        names = frozenset(topics)
        for name in names:
            if not isinstance(name, str) or not name:
                raise InvalidArgumentError(f"topic names must be non-empty strings, got {name!r}")
        if not names:
            self.unsubscribe()  # subscribing to nothing is unsubscribing: no partition stays assigned
            return
        self.type = SubscriptionType.TOPICS
        self.topics = names
        self.pattern = None

    def subscribe_pattern(self, pattern: str | re.Pattern[str]) -> None:
        self._check_type(SubscriptionType.PATTERN)
        if isinstance(pattern, str):
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise InvalidArgumentError(f"invalid topic pattern {pattern!r}: {exc}") from exc
        elif isinstance(pattern, re.Pattern):
            compiled = pattern
        else:
            raise InvalidArgumentError(f"a topic pattern must be a str or re.Pattern, got {pattern!r}")
        if self.pattern is not None and self.pattern == compiled:  # re.Pattern: equal pattern and flags
            return  # the same pattern again: the topics it matched stay
        self.type = SubscriptionType.PATTERN
        self.pattern = compiled
        self.topics = frozenset()

    def subscribe_to(self, topics: list[str], pattern: str | re.Pattern[str] | None) -> bool:
        """subscribe()'s topics or pattern; True when the subscription changed (the same one again,
        with a new listener say, is no change: as in Java, no reason to rejoin)."""
        before = self.type, self.topics, self.pattern
        if pattern is None:
            self.subscribe(topics)
        elif topics:
            raise InvalidArgumentError("subscribe() takes topics or a pattern, not both")
        else:
            self.subscribe_pattern(pattern)
        return (self.type, self.topics, self.pattern) != before

    def match_pattern(self, all_topics: Iterable[str]) -> bool:
        """Update the topic set from the cluster's topics; True when it changed."""
        if self.pattern is None:
            return False
        # The whole name must match, as Java's Pattern.matcher(topic).matches().
        matched = frozenset(t for t in all_topics if self.pattern.fullmatch(t))
        changed = matched != self.topics
        self.topics = matched
        return changed

    def assign_manually(self, partitions: Iterable[TopicPartition]) -> None:
        self._check_type(SubscriptionType.MANUAL)
        tps = list(partitions)
        for tp in tps:
            if not isinstance(tp, TopicPartition):
                raise InvalidArgumentError(f"assign() takes TopicPartition objects, got {tp!r}")
        self.type = SubscriptionType.MANUAL if tps else SubscriptionType.NONE
        self.topics = frozenset(tp.topic for tp in tps)
        self.set_assignment(tps)

    def unsubscribe(self) -> None:
        self.type = SubscriptionType.NONE
        self.topics = frozenset()
        self.pattern = None
        self.set_assignment(())

    def _check_type(self, wanted: SubscriptionType) -> None:
        if self.type not in (SubscriptionType.NONE, wanted):
            raise IllegalStateError(
                f"subscription to topics, to a pattern and manual assign() are mutually exclusive; "
                f"the consumer already uses {self.type.value}: call unsubscribe() first"
            )

    @property
    def uses_group(self) -> bool:
        return self.type in (SubscriptionType.TOPICS, SubscriptionType.PATTERN)

    # ------------------------------------------------------------ assignment

    def set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment, keeping the state of partitions that stay."""
        old = self.assignment
        self.assignment = {tp: old.get(tp) or PartitionState() for tp in partitions}
        self._unsettled = True

    def assigned(self) -> set[TopicPartition]:
        return set(self.assignment)

    def set_awaiting_callback(self, tps: Iterable[TopicPartition], awaiting: bool) -> None:
        self._unsettled = True
        for tp in tps:
            st = self.assignment.get(tp)
            if st is not None:
                st.awaiting_callback = awaiting

    def set_pending_revocation(self, tps: Iterable[TopicPartition]) -> None:
        self._unsettled = True
        for tp in tps:
            st = self.assignment.get(tp)
            if st is not None:
                st.pending_revocation = True

    def _settled(self) -> bool:
        """Every assigned partition fetchable (see ``_unsettled``)."""
        if self._unsettled:
            self._unsettled = not all(st.fetchable for st in self.assignment.values())
        return not self._unsettled

    def awaiting_callback(self) -> set[TopicPartition]:
        if self._settled():
            return set()
        return {tp for tp, st in self.assignment.items() if st.awaiting_callback}

    def state(self, tp: TopicPartition) -> PartitionState:
        st = self.assignment.get(tp)
        if st is None:
            raise IllegalStateError(f"{tp} is not assigned to this consumer")
        return st

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self.assignment

    def fetchable(self) -> list[TopicPartition]:
        if self._settled():
            return list(self.assignment)
        return [tp for tp, st in self.assignment.items() if st.fetchable]

    def any_fetchable(self) -> bool:
        return bool(self.assignment) if self._settled() else any(st.fetchable for st in self.assignment.values())

    def needing_position(self) -> list[TopicPartition]:
        """Partitions without a position and no reset pending: their committed offset is needed."""
        if self._settled():
            return []
        return [tp for tp, st in self.assignment.items() if st.position is None and st.reset_to is None]

    def needing_reset(self) -> list[TopicPartition]:
        if self._settled():
            return []
        return [tp for tp, st in self.assignment.items() if st.reset_to is not None]

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int | None = None) -> None:
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise InvalidArgumentError(f"seek offset must be an int >= 0, got {offset!r}")
        st = self.state(tp)
        st.position = offset
        st.leader_epoch = leader_epoch
        st.reset_to = None

    def request_reset(self, tp: TopicPartition, strategy: ResetStrategy | None = None) -> None:
        st = self.state(tp)
        st.reset_to = strategy or self.default_reset
        st.position = None
        self._unsettled = True

    def pause(self, tps: Iterable[TopicPartition]) -> None:
        self._unsettled = True
        for tp in tps:
            self.state(tp).paused = True

    def resume(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        if self._settled():
            return set()
        return {tp for tp, st in self.assignment.items() if st.paused}

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Positions of every partition with a known position: what commit() sends by default."""
        return {
            tp: OffsetAndMetadata(st.position, "", st.leader_epoch)
            for tp, st in self.assignment.items()
            if st.position is not None
        }
