"""Plain value types shared by every layer (no I/O here)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import chain
from typing import Any, NamedTuple


class GroupMembershipOperation(Enum):
    """What close() tells the group (KIP-1092, Java's CloseOptions.GroupMembershipOperation).

    LEAVE: leave now, static members too, so the partitions move at once. REMAIN: tell the group
    nothing; the member keeps its partitions until its session lapses (a static member restarting
    within the session, or a handover by session timeout). DEFAULT: dynamic members leave, static
    members remain (under the consumer protocol a static member says it will come back, epoch -2).
    """

    LEAVE = "leave"
    REMAIN = "remain"
    DEFAULT = "default"


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class OffsetAndTimestamp(NamedTuple):
    """offsets_for_times(): the earliest offset whose record timestamp is >= the one asked."""

    offset: int
    timestamp: int


class TimestampType:
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ConsumerRecord(NamedTuple):
    """One record as handed to the user. A NamedTuple: cheap to build on the hot path."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: Sequence[tuple[str, bytes | None]]
    leader_epoch: int | None = None


class ConsumerRecords(Sequence[ConsumerRecord]):
    """The result of one poll(): records in fetch order, with a per-partition view.

    The consumer passes each partition's records as a lazy sequence that builds the record tuples
    while it is iterated (see protocol/records/columns.py); ``records()``, ``by_partition()`` and
    indexing give lists.
    """

    __slots__ = ("_by_partition", "_next_offsets", "_records")

    def __init__(self, by_partition: Mapping[TopicPartition, Sequence[ConsumerRecord]] | None = None,
                 next_offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None) -> None:
        self._by_partition = dict(by_partition or {})
        self._next_offsets = dict(next_offsets or {})
        self._records: list[ConsumerRecord] | None = None

    def next_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """For each partition whose position this poll moved, the offset to commit to resume after
        it, with the leader epoch of the last batch read (KIP-1094, Java's nextOffsets()). It can
        be past the last record returned, or given with no record at all: transaction markers and
        aborted records move the position too."""
        return dict(self._next_offsets)

    def _flat(self) -> list[ConsumerRecord]:
        if self._records is None:
            self._records = list(self)
        return self._records

    def __len__(self) -> int:
        return sum(len(batch) for batch in self._by_partition.values())

    def __iter__(self) -> Iterator[ConsumerRecord]:
        # chain() instead of a generator: no generator resume per record on the hot path.
        return chain.from_iterable(self._by_partition.values())

    def __getitem__(self, index: Any) -> Any:
        return self._flat()[index]

    def __bool__(self) -> bool:
        return any(self._by_partition.values())

    def partitions(self) -> set[TopicPartition]:
        return {tp for tp, batch in self._by_partition.items() if batch}

    def records(self, tp: TopicPartition) -> list[ConsumerRecord]:
        return list(self._by_partition.get(tp, ()))

    def by_partition(self) -> dict[TopicPartition, list[ConsumerRecord]]:
        return {tp: list(records) for tp, records in self._by_partition.items()}

    def sequences(self) -> Mapping[TopicPartition, Sequence[ConsumerRecord]]:
        """Each partition's records as the consumer holds them (lazy column chunks), uncopied."""
        return self._by_partition

    def __repr__(self) -> str:
        return f"ConsumerRecords({len(self)} records from {len(self.partitions())} partitions)"


@dataclass(frozen=True, slots=True)
class OAuthBearerToken:
    """What a ``sasl_oauth_token_provider`` returns (SASL/OAUTHBEARER, KIP-255).

    ``token``: the access token sent as ``auth=Bearer <token>`` (usually a JWT). ``expires_at``: when it
    expires, in seconds since the epoch (``time.time()``); the client asks for a new one at about 80 %
    of its lifetime. ``extensions``: SASL extensions (KIP-342) sent with it, names of letters only.
    The token is kept out of ``repr``.
    """

    token: str
    expires_at: float
    extensions: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def with_lifetime(cls, token: str, lifetime: float,
                      extensions: Mapping[str, str] | None = None) -> OAuthBearerToken:
        """A token that expires ``lifetime`` seconds from now."""
        return cls(token, time.time() + lifetime, dict(extensions or {}))

    def __repr__(self) -> str:
        return f"OAuthBearerToken(token='***', expires_at={self.expires_at!r}, extensions={dict(self.extensions)!r})"
