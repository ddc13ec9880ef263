"""The revocation that close() or unsubscribe() runs: while it runs, the listener and the tasks
it starts may still use the consumer (commit, position...), as in Java, though the consumer is
closed or unsubscribed for everyone else. A context variable marks that context."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator, Mapping

from ..structs import OffsetAndMetadata, TopicPartition


@dataclasses.dataclass(frozen=True)
class Revocation:
    """`owner`: the consumer's parts (parts.ConsumerParts) whose revocation this is. `offsets`:
    what was consumed from the partitions being revoked by unsubscribe(), committed as the
    member that owned them."""

    owner: object
    offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None


_REVOKING: contextvars.ContextVar[Revocation | None] = contextvars.ContextVar("aiokafka_lite_revoking", default=None)


def revocation_of(owner: object) -> Revocation | None:
    """The revocation of `owner` running in this context, if any."""
    revocation = _REVOKING.get()
    return revocation if revocation is not None and revocation.owner is owner else None


def revoking_context(owner: object, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> contextvars.Context:
    """A copy of this context marked as `owner`'s revocation: unsubscribe()'s task runs in it."""
    context = contextvars.copy_context()
    context.run(_REVOKING.set, Revocation(owner, offsets))
    return context


@contextlib.contextmanager
def revoking(owner: object) -> Iterator[None]:
    """Marks this context as `owner`'s revocation (close()'s) while the block runs."""
    token = _REVOKING.set(Revocation(owner))
    try:
        yield
    finally:
        _REVOKING.reset(token)
