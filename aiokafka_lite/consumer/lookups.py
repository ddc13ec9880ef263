"""The look-ups behind position(), partitions_for() and list_topics(), and the checks of the
partitions a call is given. The offset look-ups themselves are offsets.OffsetLookup's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from .._net.cluster import Cluster
from ..errors import IllegalStateError, InvalidArgumentError
from ..structs import TopicPartition
from ..subscription import SubscriptionState


def partitions_arg(tps: Iterable[TopicPartition], what: str) -> list[TopicPartition]:
    """The partitions a call asks about; a bare string or a non-TopicPartition is a misuse."""
    if isinstance(tps, str | TopicPartition):
        raise InvalidArgumentError(f"{what} takes a collection of TopicPartition, got {tps!r}")
    wanted = list(tps)
    for tp in wanted:
        if not isinstance(tp, TopicPartition):
            raise InvalidArgumentError(f"{what} takes TopicPartition objects, got {tp!r}")
    return wanted


def partition_args(tps: tuple[Any, ...], what: str) -> tuple[TopicPartition, ...]:
    """pause()/resume() take partitions as arguments (``pause(tp1, tp2)``), not one collection."""
    for tp in tps:
        if not isinstance(tp, TopicPartition):
            unpack = isinstance(tp, Iterable) and not isinstance(tp, str | bytes)
            hint = f"; to pass a collection, unpack it: {what}(*partitions)" if unpack else ""
            raise InvalidArgumentError(f"{what}() takes TopicPartition arguments, got {tp!r}{hint}")
    return tps


async def position_of(sub: SubscriptionState, tp: TopicPartition,
                      update_position: Callable[[], Awaitable[None]]) -> int:
    """The position of `tp`, looked up (update_position) until it has one."""
    # Looked at again after every await: a seek, a reset or a revoke and re-assign may
    # have replaced the state the lookup was for (the loop ends with the caller's timeout).
    while True:
        if not sub.is_assigned(tp):
            raise IllegalStateError(f"{tp} is no longer assigned: you can only check the position "
                                    "for partitions assigned to this consumer")
        position = sub.state(tp).position
        if position is not None:
            return position
        await update_position()


async def topic_partitions(cluster: Cluster, names: list[str] | None) -> dict[str, list[TopicPartition]]:
    """The partitions of the topics `names` (None: of every topic), from fresh metadata."""
    await cluster.refresh_metadata(names, timeout=None)
    cluster.raise_topic_errors(names or ())
    # exclude_internal_topics is about subscribing by pattern; listing shows every topic, as in Java.
    wanted = names if names is not None else cluster.topics()
    return {t: [TopicPartition(t, p) for p in sorted(cluster.partitions_for(t) or ())] for t in wanted
            if cluster.partitions_for(t)}
