"""One partition's part of a fetch response, from its arrival to its hand-out: ``CompletedFetch``
(the raw data, decoded lazily by ``PartitionRecords``, with the water marks it carries), the
deserializers applied to its records, and the poison record (one a deserializer fails on) that
stops it. No I/O here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import RecordDeserializationError
from ..liveness.deadlines import own_failure
from ..protocol.records.columns import BadRecord, RecordChunks, RecordColumns
from ..protocol.records.decode import PartitionRecords
from ..structs import ConsumerRecord, TopicPartition
from ..subscription import PartitionState

Deserializer = Callable[[bytes | None], Any]
Records = RecordChunks
# What converting records gave: the records up to the first that failed, and that one's chunk and
# row with the deserializer's exception (None: every record converted).
Converted = tuple[Records, tuple[RecordColumns, BadRecord] | None]
# Converts the records of one hand-out (the deserializers, or poll_arrow()'s native value column).
ValueConverter = Callable[[Records], Converted]

NO_RECORDS = RecordChunks([])


@dataclass(slots=True, eq=False)
class CompletedFetch:
    """One partition's part of a fetch response, waiting to be handed out."""

    tp: TopicPartition
    node_id: int
    incarnation: int  # the partition's assignment when the fetch was sent (PartitionState.incarnation)
    position: int  # where this data continues: must equal the partition's position to be used
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: PartitionRecords | None  # None when error_code != 0
    size: int
    marks_applied: bool = False
    data_end: int | None = None  # the offset after this data's last complete batch
    data_end_epoch: int = -1  # the leader epoch of that batch
    diverging: tuple[int, int] | None = None  # the leader's log differs (KIP-320): (epoch, end offset)
    # A deserializer failed on the record at ``position``: raised by every hand-out until a seek
    # (as Java's CompletedFetch keeps its cachedRecordException).
    poison: RecordDeserializationError | None = None

    def current_state(self, assignment: Mapping[TopicPartition, PartitionState]) -> PartitionState | None:
        """The partition's state if this data is still wanted: same assignment, same position."""
        state = assignment.get(self.tp)
        if state is None or self.incarnation != state.incarnation or state.position != self.position:
            return None
        return state

    def apply_marks(self, state: PartitionState) -> None:
        """Copy the water marks to ``state`` (this data's current state), once."""
        if self.marks_applied:
            return
        self.marks_applied = True
        if self.high_watermark >= 0:
            state.high_watermark = self.high_watermark
        if self.last_stable_offset >= 0:
            state.last_stable_offset = self.last_stable_offset
        if self.log_start_offset >= 0:
            state.log_start_offset = self.log_start_offset


def poisoned(cf: CompletedFetch, state: PartitionState, good: Records, columns: RecordColumns,
             bad: BadRecord) -> Records:
    """The records before the one that failed to deserialize (its error if none); the position
    stops on that one, and its error is kept to be raised by every hand-out until a seek moves
    the partition."""
    raw = columns[bad.row]  # as the broker sent it: the keys and values are still bytes there
    stop_at(cf, state, good, raw)
    cf.poison = RecordDeserializationError(
        cf.tp, raw.offset, bad.origin, raw.key, raw.value, raw.timestamp, raw.timestamp_type,
        raw.headers, raw.leader_epoch, bad.cause)
    if not good:
        raise cf.poison
    return good


def stop_at(cf: CompletedFetch, state: PartitionState, good: Records, raw: ConsumerRecord) -> None:
    """The position stops on ``raw``, a record not handed out, after ``good``, those that were."""
    # As when records are handed out: the epoch of the batch the position comes after.
    epoch = good.chunks[-1].leader_epoch if good else raw.leader_epoch if raw.offset > cf.position else None
    if epoch is not None:
        state.leader_epoch = epoch
    state.position = cf.position = raw.offset
    cf.data_end = None  # no fetching ahead of a partition that cannot go on


def converter(key_deserializer: Deserializer | None,
              value_deserializer: Deserializer | None) -> ValueConverter | None:
    """Applies the deserializers column by column, stopping at the first record one of them raises
    on (None: records pass as they are)."""
    if key_deserializer is None and value_deserializer is None:
        return None
    kd: Deserializer = own_failure(key_deserializer) if key_deserializer is not None else _identity
    vd: Deserializer = own_failure(value_deserializer) if value_deserializer is not None else _identity

    def convert(records: Records) -> Converted:
        out: list[RecordColumns] = []
        for chunk in records.chunks:
            converted, bad = chunk.converted_until_failure(kd, vd)
            if converted:
                out.append(converted)
            if bad is not None:
                return RecordChunks(out), (chunk, bad)
        return RecordChunks(out), None

    return convert


def _identity(data: bytes | None) -> Any:
    return data
