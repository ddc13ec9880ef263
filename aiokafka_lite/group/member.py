"""The group member as the rest of the consumer sees it, whatever the group protocol.

The poll path, close() and metrics() talk to a :class:`GroupMember` only. Each group protocol is
one implementation in a module of its own, where a reader finds what a rebalance does:

- ``group/classic/member.py``: JoinGroup/SyncGroup/Heartbeat (KIP-62), eager or cooperative (KIP-429);
- ``group/consumer_protocol/member.py``: ConsumerGroupHeartbeat, the broker assigns (KIP-848).

A member changes the consumer's assignment, runs the rebalance listener and commits through the
:class:`MemberHost` it is given (the consumer); it never reaches into the consumer otherwise.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import CommitFailedError
from ..structs import GroupMembershipOperation, OffsetAndMetadata, TopicPartition

if TYPE_CHECKING:
    from .._net.cluster import Cluster
    from ..config import ConsumerConfig
    from ..liveness.health import HealthInputs
    from ..subscription import SubscriptionState


def standalone_commit_refused(group_id: str) -> CommitFailedError:
    """An assign()ed consumer's commit (no generation or member epoch) to a group with members:
    the broker takes those only while the group is empty, whatever the group protocol."""
    return CommitFailedError(
        f"commit failed: group {group_id!r} has active members, and a consumer that "
        "assigns its partitions with assign() commits from outside the group, which Kafka "
        "allows only while the group is empty. Give this consumer a group_id of its own, "
        "or subscribe() to join the group.")


def generation_moved(group_id: str) -> CommitFailedError:
    """A commit whose request failed (connection lost) is not sent again once the membership it
    was made in has ended (a new generation, or a rejoin after fencing or a lapse): the partitions
    may belong to another member by now, as Java binds a commit to its generation."""
    return CommitFailedError(
        f"commit failed: the member of group {group_id!r} lost its generation and rejoined while the "
        "commit was being retried, so the offsets were not committed in the new one. The partitions "
        "may already be owned by another member, which will process the uncommitted records again.")


class ListenerEvent(enum.Enum):
    ASSIGNED = "on_partitions_assigned"
    REVOKED = "on_partitions_revoked"
    LOST = "on_partitions_lost"


@dataclass
class RebalanceCounts:
    """Partitions moved by the last completed rebalance (for metrics())."""

    assigned: int = 0
    revoked: int = 0
    lost: int = 0


class MemberHost(Protocol):
    """What a member needs of the consumer it belongs to."""

    @property
    def config(self) -> ConsumerConfig: ...

    def subscription_state(self) -> SubscriptionState: ...

    @property
    def cluster(self) -> Cluster: ...

    async def run_listener(self, event: ListenerEvent, partitions: set[TopicPartition]) -> None:
        """Call the rebalance listener once (poll clock paused: its time counts, KIP-62)."""

    async def commit_before_revoke(self, partitions: set[TopicPartition]) -> None:
        """With auto-commit: commit what was consumed from ``partitions``, behind earlier commits;
        a failure is logged, not raised (the revocation goes on)."""

    async def refresh_pattern(self) -> bool:
        """Pattern subscription: match the cluster's topics again; True when the set changed."""

    async def until_polled(self) -> None:
        """Return once a poll() waits for the rebalance step: listener callbacks run only then,
        and polls wait for the step until callbacks_done() (or the step's end)."""

    def callbacks_done(self) -> None:
        """The step's callbacks are over (it may go on waiting for the broker)."""

    async def drain_commits(self) -> None:
        """Wait for every commit made so far (the listener's commit_async calls included)."""

    def member_joined(self) -> None:
        """A new generation or member epoch: restart the poll clock, reschedule auto-commit."""

    def wake(self) -> None:
        """A poll() waiting for records should look at the member again now."""


class GroupMember(ABC):
    """One consumer's membership in its group, for one group protocol."""

    protocol: str  # "classic" | "consumer": the group.protocol setting
    group_id: str

    # -- the poll path ------------------------------------------------------------------

    @abstractmethod
    def rebalance_due(self) -> bool:
        """The poll path must run rebalance_step() (join, reconcile, or retry a callback)."""

    @abstractmethod
    async def rebalance_step(self) -> None:
        """One rebalance as the poll path runs it: a task the consumer owns, which survives a
        lapsed poll() and is cancelled only by close() (poll_steps.py)."""

    def keeps_fetching_while_rebalancing(self) -> bool:
        """poll() hands out records of the partitions kept while rebalance_step() waits for the
        broker (cooperative: JoinGroup and SyncGroup); the step then calls host.until_polled()
        before any listener callback. False: poll() always waits for the step."""
        return False

    @abstractmethod
    def before_poll(self) -> None:
        """Start of every poll() pass: apply what background liveness learned; raise its fatal
        error, if any."""

    def after_poll(self) -> None:  # noqa: B027 (optional hook)
        """End of a poll() pass (after rebalance_step): e.g. refresh the heartbeat thread's snapshot."""

    @abstractmethod
    def subscription_changed(self, reason: str) -> None:
        """subscribe()/unsubscribe() or a pattern now matching other topics: rejoin or tell the broker."""

    def watched_topics(self) -> set[str]:
        """Topics beyond the subscription whose metadata this member watches (classic leader)."""
        return set()

    def metadata_refreshed(self, partition_counts: Mapping[str, int]) -> None:  # noqa: B027 (optional hook)
        """Partition counts after a metadata refresh (the classic protocol rejoins on a change)."""

    # -- liveness -----------------------------------------------------------------------

    @abstractmethod
    async def stop_liveness(self) -> None:
        """Stop heartbeating (close, or before a forced shutdown). Idempotent."""

    @property
    @abstractmethod
    def fatal_error(self) -> BaseException | None:
        """An error that ended the membership (fenced, unauthorized...), raised from the next call."""

    # -- state ------------------------------------------------------------------------

    @property
    @abstractmethod
    def is_stable(self) -> bool:
        """In the group with a current assignment: commits as a member are allowed."""

    @property
    @abstractmethod
    def mid_join(self) -> bool:
        """A join request may be in flight on the coordinator connection (close() starts over)."""

    # -- offsets ----------------------------------------------------------------------

    @abstractmethod
    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout: float | None,
                     standalone: bool = False) -> None:
        """OffsetCommit as this member (or, standalone, from outside the group)."""

    @abstractmethod
    async def fetch_committed(self, tps: Iterable[TopicPartition], timeout: float | None
                              ) -> dict[TopicPartition, OffsetAndMetadata | None]: ...

    @abstractmethod
    def commit_generation(self) -> Hashable:
        """What a commit is bound to (compared, never read): the classic generation and member
        id; under KIP-848 the membership (the member epoch moves on at every assignment, a
        rejoin after fencing or a lapse starts a new membership). See generation_moved()."""

    # -- leaving ------------------------------------------------------------------------

    @abstractmethod
    async def leave(self, reason: str, timeout: float | None,
                    operation: GroupMembershipOperation = GroupMembershipOperation.DEFAULT) -> bool:
        """Leave the group (True when the broker was told). ``operation`` is close()'s choice
        (KIP-1092): whether a static member leaves too, or the broker is told nothing."""

    # -- metrics ------------------------------------------------------------------------

    @abstractmethod
    def metrics(self) -> dict[str, Any]:
        """group_id, group_protocol, state, generation or member epoch, member id, rebalance
        counts (assigned/revoked/lost in the last rebalance), heartbeat counters."""

    @abstractmethod
    def health_inputs(self) -> HealthInputs:
        """What liveness/health.py needs to say whether the membership is healthy."""
