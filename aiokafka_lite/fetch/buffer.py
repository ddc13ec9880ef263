"""The fetcher's buffer: completed fetches and stored errors waiting to be handed out, the hand-out
itself, and the event a poll waits on for them.

Per partition at most two completed fetches: the current one (``completed``, in hand-out turn) and
the one fetched ahead that continues it (``ahead``). Data is checked when handed out, not when it
arrives: a partition revoked, re-assigned or seeked since its fetch was sent is dropped then (the
partition's incarnation and position must still match).
"""

from __future__ import annotations

# The public API contract gives every awaitable a `timeout` (see DESIGN.md), implemented with
# exactly one asyncio.timeout() per call, which is what ASYNC109 asks for anyway.
import asyncio
from collections import deque
from collections.abc import Callable, Mapping

from ..errors import DeserializerNotReadyError, KafkaError, RecordDeserializationError
from ..protocol.records.columns import BadRecord, RecordColumns
from ..structs import OffsetAndMetadata, TopicPartition
from ..subscription import PartitionState, SubscriptionState
from .completed import NO_RECORDS, CompletedFetch, Records, ValueConverter, poisoned, stop_at
from .log_truncation import check_divergence


class FetchBuffer:
    """Completed fetches of ``subscription``'s partitions, handed out in turn; ``partition_error``
    handles a partition's error code when its turn comes (it may raise)."""

    def __init__(self, subscription: SubscriptionState, *, convert: ValueConverter | None,
                 partition_max_bytes: int, partition_error: Callable[[CompletedFetch], None]) -> None:
        self._subscription = subscription
        self._convert = convert
        self._partition_max_bytes = partition_max_bytes  # named in the record-too-large error
        self._partition_error = partition_error
        self._completed: dict[TopicPartition, CompletedFetch] = {}  # insertion order: hand-out turn
        # One fetch ahead per partition: the data that continues _completed[tp], fetched while
        # _completed[tp] is handed out, so the consumer never waits for a whole round trip.
        self._next: dict[TopicPartition, CompletedFetch] = {}
        self._errors: deque[Exception] = deque()
        self._data_ready = asyncio.Event()
        # Where the last fetched_records() call moved each partition's position (KIP-1094).
        self._moved: dict[TopicPartition, OffsetAndMetadata] = {}
        # A deserializer that must do I/O before it can decode a partition's next record: the poll
        # path awaits its prepare() before the next hand-out (DeserializerNotReadyError).
        self._not_ready: DeserializerNotReadyError | None = None
        # metrics(): records handed out, and the bytes (as fetched) of the data wholly handed out.
        # Counted once per hand-out and per partition's data, never per record.
        self.records_consumed = 0
        self.bytes_consumed = 0

    @property
    def completed(self) -> Mapping[TopicPartition, CompletedFetch]:
        """The data each partition is handing out now."""
        return self._completed

    @property
    def ahead(self) -> Mapping[TopicPartition, CompletedFetch]:
        """The data fetched ahead, continuing ``completed``."""
        return self._next

    def has_buffered(self) -> bool:
        """True when a partition that is not paused has data (or an error) waiting."""
        assignment = self._subscription.assignment
        for tp in self._completed:
            state = assignment.get(tp)
            if state is None or not state.paused:
                return True
        return False

    def buffered_bytes(self) -> int:
        return sum(cf.size for cf in self._completed.values()) + sum(cf.size for cf in self._next.values())

    # ------------------------------------------------------------------ filling

    def store(self, completed: CompletedFetch) -> None:
        """Buffer a partition's data: it continues the data being handed out, if any."""
        if completed.tp in self._completed:
            self._next[completed.tp] = completed  # fetched ahead: continues the current data
        else:
            self._completed[completed.tp] = completed

    def add_error(self, exc: Exception) -> None:
        """Raise ``exc`` once, from the next fetched_records()."""
        self._errors.append(exc)

    def wake(self) -> None:
        """End a wait() early: data or an error arrived, or the poll path has something else to do."""
        self._data_ready.set()

    def clear(self) -> None:
        """Drop the buffered data and wake any waiter (stored errors stay)."""
        self._completed.clear()
        self._next.clear()
        self._data_ready.set()

    async def wait(self, timeout: float | None) -> None:
        """Return when records (or an error) are ready to hand out, or after ``timeout`` seconds."""
        if self._errors or self.has_buffered():
            return
        self._data_ready.clear()
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                await self._data_ready.wait()
        except TimeoutError:
            if not scope.expired():
                raise

    # ------------------------------------------------------------------ handing out

    def fetched_records(self, max_records: int,
                        convert: ValueConverter | None = None) -> dict[TopicPartition, Records]:
        """Up to ``max_records`` buffered records, taking partitions in turn; positions advance.
        ``convert`` stands in for the deserializers this once (poll_arrow()'s native value column).

        A stored error (from a fetch task, or one met after records were already collected) is
        raised from here, once. A record a deserializer fails on is different: the records before it
        are handed out, then its RecordDeserializationError is raised by every call (the partition
        next in line, as in Java) until a seek moves the partition past it.
        """
        self._moved.clear()
        if self._errors:
            raise self._errors.popleft()
        out: dict[TopicPartition, Records] = {}
        left = max_records
        for tp in list(self._completed):
            if left <= 0:
                break
            try:
                records = self._drain(self._completed[tp], left, convert or self._convert)
            except RecordDeserializationError:
                if not out:
                    raise
                break  # the partition stays on it: raised by the next call, unless a seek moves past it
            except Exception as exc:
                if not out:
                    raise
                self._errors.append(exc)  # hand out what we have; raise on the next call
                break
            if records:
                out[tp] = records
                left -= len(records)
            if self._not_ready is not None:
                break  # the next partitions likely need the same preparation: it goes first
            if records:
                cf = self._completed.get(tp)
                if cf is not None and cf.poison is not None:
                    break  # stopped before a record that fails to deserialize: the next call raises
                if cf is not None:  # more left: this partition goes to the back of the line
                    self._completed[tp] = self._completed.pop(tp)
        self.records_consumed += max_records - left
        return out

    def next_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Where the last fetched_records() call moved each partition's position."""
        return dict(self._moved)

    def take_not_ready(self) -> DeserializerNotReadyError | None:
        """The deserializer's error that stopped the last hand-out (once): its prepare() is due
        before the next."""
        not_ready, self._not_ready = self._not_ready, None
        return not_ready

    def not_ready_pending(self) -> bool:
        return self._not_ready is not None

    def _drain(self, cf: CompletedFetch, limit: int, convert: ValueConverter | None) -> Records:
        state = cf.current_state(self._subscription.assignment)
        if state is None:
            self._finish(cf.tp)  # revoked, re-assigned or seeked since the fetch was sent
            return NO_RECORDS
        if state.pending_revocation:
            self._finish(cf.tp)  # being revoked: none of its records is handed out any more
            return NO_RECORDS
        if state.paused:
            return NO_RECORDS  # kept for when the partition resumes
        cf.apply_marks(state)
        records = cf.records
        if cf.diverging is not None:
            self._finish(cf.tp)
            check_divergence(self._subscription, cf.tp, cf.position, *cf.diverging)
            return NO_RECORDS
        if records is None:
            self._finish(cf.tp)
            self._partition_error(cf)
            return NO_RECORDS
        if cf.poison is not None:
            raise cf.poison.with_traceback(None)  # the same error each time, its traceback not piling up
        start = cf.position
        try:
            chunk = records.take(limit)
        except Exception:
            self._finish(cf.tp)  # position unchanged: a refetch meets the same error
            raise
        if chunk and convert is not None:
            chunk, bad = convert(chunk)
            if bad is not None and isinstance(bad[1].cause, DeserializerNotReadyError):
                return self._stop_not_ready(cf, state, start, chunk, *bad)
            if bad is not None:
                chunk = poisoned(cf, state, chunk, *bad)
                self._moved[cf.tp] = OffsetAndMetadata(cf.position, "", state.leader_epoch)
                return chunk
        state.position = cf.position = records.position
        if records.position_leader_epoch is not None:
            state.leader_epoch = records.position_leader_epoch

        if cf.position != start:
            self._moved[cf.tp] = OffsetAndMetadata(cf.position, "", state.leader_epoch)
        if records.exhausted:
            self._finish(cf.tp)
            self.bytes_consumed += cf.size
            if not chunk and records.record_too_large and records.position == start:
                raise KafkaError(
                    f"the record batch at offset {cf.position} of {cf.tp.topic}-{cf.tp.partition} is "
                    f"larger than max_partition_fetch_bytes={self._partition_max_bytes}; raise it")
        return chunk

    def _stop_not_ready(self, cf: CompletedFetch, state: PartitionState, start: int, good: Records,
                        columns: RecordColumns, bad: BadRecord) -> Records:
        """Not a poison record: the records before it go out, and it comes after its deserializer's
        prepare(). This data is dropped from it on and fetched again (a new schema's first record
        is rare; the taken records cannot be put back)."""
        assert isinstance(bad.cause, DeserializerNotReadyError)
        self._not_ready = bad.cause
        stop_at(cf, state, good, columns[bad.row])
        if cf.position != start:
            self._moved[cf.tp] = OffsetAndMetadata(cf.position, "", state.leader_epoch)
        del self._completed[cf.tp]
        self._next.pop(cf.tp, None)  # it continued the dropped data
        return good

    def _finish(self, tp: TopicPartition) -> None:
        """The current data of ``tp`` is done with: the data fetched ahead, if any, takes its place."""
        del self._completed[tp]
        ahead = self._next.pop(tp, None)
        if ahead is not None:
            self._completed[tp] = ahead
