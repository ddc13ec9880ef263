"""The prefetch pipeline: one long-poll Fetch in flight per broker, a bounded buffer of fetched bytes.

Flow: ``send_fetches()`` starts one fetch task per broker leading a fetchable partition that has
nothing buffered; each response partition becomes a ``_CompletedFetch`` holding the raw bytes,
decoded lazily by ``PartitionRecords`` as ``fetched_records()`` hands records out. Memory stays
bounded: at most one completed fetch per partition, and no new fetch for a partition until its
buffered data is used up. A task whose fetch succeeded starts the next round itself, so the
pipeline keeps prefetching between polls.

Data is checked when handed out, not when it arrives: a partition revoked, re-assigned or seeked
since its fetch was sent is dropped then (the partition's incarnation and position must still match).
"""

from __future__ import annotations

# The public API contract gives every awaitable a `timeout` (see DESIGN.md), implemented with
# exactly one asyncio.timeout() per call, which is what ASYNC109 asks for anyway.
import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .._net.backoff import Backoff
from .._net.failure_log import FailureLog
from ..errors import (
    ERROR_CODE_BY_NAME,
    BrokerError,
    CorruptRecordError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LogTruncationError,
    OffsetOutOfRangeError,
    ProtocolDecodeError,
    RecordDeserializationError,
    is_retriable,
)
from ..protocol.messages import FETCH
from ..protocol.record_columns import BadRecord, RecordChunks, RecordColumns
from ..protocol.records import PartitionRecords, fetch_continuation
from ..structs import TopicPartition
from .epoch_validation import EpochEnd, epoch_ends, supported
from .fetch_session import FetchPlan, FetchSession
from .log_truncation import check_divergence
from .offsets import READ_COMMITTED, ClusterLike, ConnectionLike
from .subscription import PartitionState, ResetStrategy, SubscriptionState

log = logging.getLogger(__name__)

# Fetch v13+ names topics by id (KIP-516): that needs the topic-id map from metadata on the way out
# and back. v12 is the newest version naming topics, and Kafka 4.x still serves it (KIP-896
# removed v0-v3 only); it is also the first with last_fetched_epoch (KIP-320).
MAX_FETCH_VERSION = 12
LAST_FETCHED_EPOCH_VERSION = 12  # older Fetch versions cannot see a diverged log: validate first

# How long to keep fetching from a follower the leader pointed us to (KIP-392), before asking the
# leader again; Kafka's default metadata.max.age.ms.
PREFERRED_REPLICA_SECONDS = 300.0

_OFFSET_OUT_OF_RANGE = ERROR_CODE_BY_NAME["OFFSET_OUT_OF_RANGE"]
_CORRUPT_MESSAGE = ERROR_CODE_BY_NAME["CORRUPT_MESSAGE"]

Deserializer = Callable[[bytes | None], Any]
Records = RecordChunks
# What converting records gave: the records up to the first that failed, and that one's chunk and
# row with the deserializer's exception (None: every record converted).
Converted = tuple[Records, tuple[RecordColumns, BadRecord] | None]


class FetchTarget(NamedTuple):
    """What a Fetch asks of one partition (-1: epoch unknown, the broker checks nothing)."""

    offset: int
    current_leader_epoch: int  # the leader's epoch in our metadata: a stale leader refuses us
    last_fetched_epoch: int  # the epoch of the record before ``offset``: a diverged log says so


@dataclass(slots=True, eq=False)
class _CompletedFetch:
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


class Fetcher:
    """Prefetches records for the fetchable partitions of ``subscription`` and hands them out."""

    def __init__(self, cluster: ClusterLike, subscription: SubscriptionState, *,
                 fetch_min_bytes: int = 1, fetch_max_wait_ms: int = 500,
                 fetch_max_bytes: int = 52_428_800, max_partition_fetch_bytes: int = 1_048_576,
                 isolation_level: int = 0, check_crcs: bool = True, request_timeout: float = 30.0,
                 key_deserializer: Deserializer | None = None,
                 value_deserializer: Deserializer | None = None,
                 client_rack: str | None = None, retry_backoff: float = 0.1,
                 retry_backoff_max: float = 1.0, max_fetch_version: int = MAX_FETCH_VERSION) -> None:
        self._cluster = cluster
        self._subscription = subscription
        self._min_bytes = fetch_min_bytes
        self._max_wait_ms = fetch_max_wait_ms
        self._max_bytes = fetch_max_bytes
        self._partition_max_bytes = max_partition_fetch_bytes
        self._isolation_level = isolation_level
        self._check_crcs = check_crcs
        self._request_timeout = request_timeout
        self._convert = _converter(key_deserializer, value_deserializer)
        self._rack = client_rack or ""
        self._retry_backoff = retry_backoff
        self._retry_backoff_max = retry_backoff_max
        self._max_fetch_version = max_fetch_version  # lower only to test what older brokers get
        # Per broker: failed fetches back off exponentially (KIP-580) and are said once.
        self._node_failures: dict[int, tuple[Backoff, FailureLog]] = {}
        # Set when a partition's leader is unknown or moved; the poll path refreshes and clears it.
        self.metadata_refresh_needed = False
        self._completed: dict[TopicPartition, _CompletedFetch] = {}  # insertion order: hand-out turn
        # One fetch ahead per partition: the data that continues _completed[tp], fetched while
        # _completed[tp] is handed out, so the consumer never waits for a whole round trip.
        self._next: dict[TopicPartition, _CompletedFetch] = {}
        self._in_flight: dict[int, asyncio.Task[None]] = {}  # by node id
        self._in_flight_tps: set[TopicPartition] = set()
        self._errors: deque[Exception] = deque()
        self._node_backoff: dict[int, float] = {}  # node id -> loop time before which not to fetch
        self._partition_backoff: dict[TopicPartition, float] = {}
        self._retry_timers: dict[int, asyncio.TimerHandle] = {}
        self._preferred: dict[TopicPartition, tuple[int, float]] = {}  # tp -> (node id, until)
        self._sessions: dict[int, FetchSession[FetchTarget]] = {}  # by node id (KIP-227)
        self._fetch_versions: dict[int, int] = {}  # by node id, once connected
        # tp -> (leader epoch in metadata, consumed epoch) its position was last checked at (KIP-320)
        self._epochs_checked: dict[TopicPartition, tuple[int, int]] = {}
        self._data_ready = asyncio.Event()
        self._closed = False

    # ------------------------------------------------------------------ metrics

    def has_buffered(self) -> bool:
        """True when a partition that is not paused has data (or an error) waiting."""
        assignment = self._subscription.assignment
        for tp in self._completed:
            state = assignment.get(tp)
            if state is None or not state.paused:
                return True
        return False

    def in_flight(self) -> int:
        """Fetch requests currently in flight (at most one per broker)."""
        return len(self._in_flight)

    def fetch_sources(self) -> dict[TopicPartition, int | None]:
        """Per assigned partition, the broker its next fetch goes to: a preferred read replica
        (KIP-392) or the leader (None: no leader known)."""
        return {tp: self._fetch_node(tp, None) for tp in self._subscription.assignment}

    def sessions(self) -> dict[int, dict[str, int]]:
        """Per broker: its fetch session (id 0: none) and how many full and incremental fetches went out."""
        return {node: {"session_id": st.session_id, "epoch": st.epoch, "partitions": len(st.partitions),
                       "full_fetches": st.full_requests, "incremental_fetches": st.incremental_requests,
                       "partitions_sent": st.partitions_sent}
                for node, st in sorted(self._sessions.items())}

    def buffered_bytes(self) -> int:
        return sum(cf.size for cf in self._completed.values()) + sum(cf.size for cf in self._next.values())

    # ------------------------------------------------------------------ sending

    def send_fetches(self) -> int:
        """Start a fetch to every broker that has work and none in flight; returns how many started."""
        if self._closed:
            return 0
        loop = asyncio.get_running_loop()
        checks: dict[int, dict[TopicPartition, FetchTarget]] = {}
        plans = self._plan_fetches(loop.time(), checks)
        assignment = self._subscription.assignment
        for node_id, targets in checks.items():  # before fetching on from that broker
            if node_id in self._in_flight:
                continue
            incarnations = {tp: assignment[tp].incarnation for tp in targets}
            self._in_flight[node_id] = loop.create_task(
                self._check_epochs(node_id, targets, incarnations),
                name=f"aiokafka-lite leader epoch check on broker {node_id}")
            self._in_flight_tps.update(targets)
        started = 0
        for node_id, offsets in plans.items():
            if node_id in self._in_flight:
                continue  # its epoch check goes first
            incarnations = {tp: assignment[tp].incarnation for tp in offsets}
            task = loop.create_task(self._fetch(node_id, offsets, incarnations),
                                    name=f"aiokafka-lite fetch from broker {node_id}")
            self._in_flight[node_id] = task
            self._in_flight_tps.update(offsets)
            started += 1
        return started

    def _plan_fetches(self, now: float, checks: dict[int, dict[TopicPartition, FetchTarget]]
                      ) -> dict[int, dict[TopicPartition, FetchTarget]]:
        """Per broker, what to fetch; ``checks`` gets, per leader, the positions to check with
        OffsetForLeaderEpoch before fetching on (KIP-320, for brokers without Fetch v12)."""
        plans: dict[int, dict[TopicPartition, FetchTarget]] = {}
        busy = self._next.keys() | self._in_flight_tps
        assignment = self._subscription.assignment
        for tp in self._subscription.fetchable():
            if tp in busy or self._partition_backoff.get(tp, 0.0) > now:
                continue
            leader_epoch = self._cluster.leader_epoch_for(tp)  # once: both the check and the fetch need it
            check = self._epoch_check(tp, assignment[tp], leader_epoch)
            if check is not None:
                leader = self._cluster.leader_for(tp)
                if leader is not None and leader >= 0 and tp not in self._completed:
                    checks.setdefault(leader, {})[tp] = check
                continue
            node_id = self._fetch_node(tp, now)
            if node_id is None:
                self.metadata_refresh_needed = True
                continue
            if node_id in self._in_flight or self._node_backoff.get(node_id, 0.0) > now:
                continue
            target = self._fetch_target(tp, assignment[tp], -1 if leader_epoch is None else leader_epoch)
            if target is not None:
                plans.setdefault(node_id, {})[tp] = target
        return plans

    def _fetch_target(self, tp: TopicPartition, state: PartitionState, current: int) -> FetchTarget | None:
        """Where the next fetch of ``tp`` starts: its position, or the end of the data still being
        handed out (None: wait, that data ends in an error, a seek made it stale, or it is empty).
        ``current``: the leader epoch in our metadata (-1: unknown)."""
        cf = self._completed.get(tp)
        if cf is None:
            if state.position is None:
                return None
            return FetchTarget(state.position, current, -1 if state.leader_epoch is None else state.leader_epoch)
        if cf.position != state.position or cf.incarnation != state.incarnation or cf.data_end is None:
            return None
        return FetchTarget(cf.data_end, current, cf.data_end_epoch)

    def _epoch_check(self, tp: TopicPartition, state: PartitionState, current: int | None) -> FetchTarget | None:
        """The position to check before fetching ``tp`` again, if its leader (epoch ``current`` in
        our metadata) changed since the last check and Fetch cannot see a diverged log on that
        broker (None: fetch on)."""
        if state.position is None or state.leader_epoch is None or current is None or current < 0:
            return None
        epochs = (current, state.leader_epoch)
        if self._epochs_checked.get(tp) == epochs:
            return None
        leader = self._cluster.leader_for(tp)
        version = None if leader is None else self._fetch_versions.get(leader)
        if version is not None and version >= LAST_FETCHED_EPOCH_VERSION:
            self._epochs_checked[tp] = epochs  # the next Fetch carries the epoch: the broker checks
            return None
        return FetchTarget(state.position, current, state.leader_epoch)

    async def _check_epochs(self, node_id: int, targets: dict[TopicPartition, FetchTarget],
                            incarnations: Mapping[TopicPartition, int]) -> None:
        """Learn the broker's Fetch version and, below v12, ask OffsetForLeaderEpoch where each
        position's epoch ends on the leader; then fetch on."""
        try:
            conn: ConnectionLike = await self._cluster.connection(node_id, timeout=self._request_timeout)
            self._fetch_versions[node_id] = conn.version_for(FETCH, self._max_fetch_version)
            if self._fetch_versions[node_id] >= LAST_FETCHED_EPOCH_VERSION or not supported(conn):
                # Fetch checks by itself; or the broker is too old to ask at all (Java skips too).
                for tp, target in targets.items():
                    self._epochs_checked[tp] = (target.current_leader_epoch, target.last_fetched_epoch)
            else:
                asked = {tp: (t.current_leader_epoch, t.last_fetched_epoch) for tp, t in targets.items()}
                for tp, answer in (await epoch_ends(conn, asked, self._request_timeout)).items():
                    self._epoch_answered(tp, targets[tp], incarnations[tp], answer)
            self._fetch_succeeded(node_id)
        except Exception as exc:
            self._fetch_failed(node_id, exc)
            return
        finally:
            self._in_flight.pop(node_id, None)
            self._in_flight_tps.difference_update(targets)
        self.send_fetches()

    def _epoch_answered(self, tp: TopicPartition, target: FetchTarget, incarnation: int, answer: EpochEnd) -> None:
        state = self._subscription.assignment.get(tp)
        if state is None or state.incarnation != incarnation or state.position != target.offset:
            return  # revoked or seeked meanwhile: the new position gets its own check
        if answer.error_code:
            if not is_retriable(answer.error_code):
                self._errors.append(BrokerError(answer.error_code, f"OffsetForLeaderEpoch for {tp}"))
            self.metadata_refresh_needed = True  # e.g. FENCED_LEADER_EPOCH: our metadata is behind
            self._partition_backoff[tp] = asyncio.get_running_loop().time() + self._retry_backoff
            return
        try:
            check_divergence(self._subscription, tp, target.offset, answer.leader_epoch, answer.end_offset)
        except LogTruncationError as exc:
            self._errors.append(exc)  # raised from the next poll; asked again after a backoff
            self._partition_backoff[tp] = asyncio.get_running_loop().time() + self._retry_backoff
            self._data_ready.set()
            return
        if state.leader_epoch is not None:
            self._epochs_checked[tp] = (target.current_leader_epoch, state.leader_epoch)

    def _fetch_node(self, tp: TopicPartition, now: float | None) -> int | None:
        """The preferred read replica while it lasts, else the leader. ``now`` None (metrics, maybe
        outside the loop): a lapsed preferred replica is still named; the next fetch plan drops it."""
        preferred = self._preferred.get(tp)
        if preferred is not None:
            if now is None or preferred[1] > now:
                return preferred[0]
            del self._preferred[tp]
        leader = self._cluster.leader_for(tp)
        return leader if leader is not None and leader >= 0 else None

    def _request_body(self, plan: FetchPlan[FetchTarget]) -> dict[str, Any]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, target in plan.send.items():
            topics.setdefault(tp.topic, []).append({
                "partition": tp.partition,
                "current_leader_epoch": target.current_leader_epoch,
                "fetch_offset": target.offset,
                "last_fetched_epoch": target.last_fetched_epoch,
                "log_start_offset": -1,
                "partition_max_bytes": self._partition_max_bytes,
            })
        forgotten: dict[str, list[int]] = {}
        for tp in plan.forget:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        return {
            "replica_id": -1,
            "max_wait_ms": self._max_wait_ms,
            "min_bytes": self._min_bytes,
            "max_bytes": self._max_bytes,
            "isolation_level": self._isolation_level,
            "session_id": plan.session_id,
            "session_epoch": plan.epoch,
            "topics": [{"topic": topic, "partitions": parts} for topic, parts in topics.items()],
            "forgotten_topics_data": [{"topic": topic, "partitions": parts} for topic, parts in forgotten.items()],
            "rack_id": self._rack,
        }

    async def _fetch(self, node_id: int, targets: dict[TopicPartition, FetchTarget],
                     incarnations: Mapping[TopicPartition, int]) -> None:
        loop = asyncio.get_running_loop()
        began = loop.time()
        stored: bool | None = None  # None: the fetch failed
        session = self._sessions.setdefault(node_id, FetchSession[FetchTarget]())
        try:
            conn: ConnectionLike = await self._cluster.connection(node_id, timeout=self._request_timeout)
            version = self._fetch_versions[node_id] = conn.version_for(FETCH, self._max_fetch_version)
            plan = session.plan(targets, version)
            # The broker holds the request up to max_wait_ms before answering: allow for that.
            timeout = self._request_timeout + self._max_wait_ms / 1000
            response = await conn.send(FETCH, version, self._request_body(plan), timeout=timeout)
            if session.answered(plan, response.get("error_code", 0), response.get("session_id", 0)):
                stored = self._store_response(node_id, targets, incarnations, response)
            else:
                # Sessions end when the broker evicts them (its cache is full): as in Java, INFO.
                log.info("broker %d ended fetch session %d: %s; the next fetch is a full one", node_id,
                         plan.session_id, BrokerError(response["error_code"]).name)
                stored = True  # nothing stored, but fetch again at once (a full fetch)
            self._fetch_succeeded(node_id)
        except Exception as exc:
            session.failed()
            self._fetch_failed(node_id, exc)
        except BaseException:  # cancelled: whether the broker applied the request is unknown
            session.failed()
            raise
        finally:
            self._in_flight.pop(node_id, None)
            self._in_flight_tps.difference_update(targets)
        if stored is None:
            return
        # Keep prefetching the partitions that got nothing new. A broker that answers "nothing"
        # without holding the long poll would make that a busy loop: back off instead.
        if stored or loop.time() - began >= self._max_wait_ms / 2000:
            self.send_fetches()
        else:
            self._retry_later(node_id)

    def _fetch_failed(self, node_id: int, exc: Exception) -> None:
        failures = self._node_failures.get(node_id)
        if failures is None:
            failures = self._node_failures[node_id] = (
                Backoff(self._retry_backoff, self._retry_backoff_max),
                # A broker restart fails fetches too: normal operation, never a WARNING.
                FailureLog(log, f"fetch from broker {node_id}", warn_after_failures=None))
        backoff, said = failures
        backoff.failed(time.monotonic())
        delay = backoff.delay()
        said.failed(exc, then=f"retrying in {delay:.3f} s")
        if not _transient(exc):
            self._errors.append(exc)  # raised once from the next fetched_records()
        self.metadata_refresh_needed = True
        self._forget_preferred(node_id)
        self._retry_later(node_id, delay)
        self._data_ready.set()

    def _fetch_succeeded(self, node_id: int) -> None:
        failures = self._node_failures.pop(node_id, None)
        if failures is not None:
            failures[1].recovered()

    def _retry_later(self, node_id: int, delay: float | None = None) -> None:
        """No fetch to ``node_id`` for `delay` (one retry backoff); then send_fetches() runs by itself."""
        delay = self._retry_backoff if delay is None else delay
        loop = asyncio.get_running_loop()
        self._node_backoff[node_id] = loop.time() + delay
        timer = self._retry_timers.pop(node_id, None)
        if timer is not None:
            timer.cancel()
        if not self._closed:
            self._retry_timers[node_id] = loop.call_later(delay, self._retry, node_id)

    def _retry(self, node_id: int) -> None:
        self._retry_timers.pop(node_id, None)
        self.send_fetches()

    def _forget_preferred(self, node_id: int) -> None:
        for tp in [tp for tp, (node, _until) in self._preferred.items() if node == node_id]:
            del self._preferred[tp]

    # ------------------------------------------------------------------ receiving

    def _store_response(self, node_id: int, targets: Mapping[TopicPartition, FetchTarget],
                        incarnations: Mapping[TopicPartition, int],
                        response: Mapping[str, Any]) -> bool:
        """Buffer each partition's data; True if anything was buffered."""
        if response.get("error_code"):
            raise BrokerError(response["error_code"], f"Fetch from broker {node_id}")
        stored = False
        for topic in response["responses"]:
            name = topic["topic"]
            for part in topic["partitions"]:
                tp = TopicPartition(name, part["partition_index"])
                target = targets.get(tp)
                if target is None:
                    continue  # not asked for (a confused broker): ignore
                completed = self._completed_fetch(node_id, tp, target.offset, incarnations[tp], part)
                if completed is not None:
                    if tp in self._completed:
                        self._next[tp] = completed  # fetched ahead: continues the current data
                    else:
                        self._completed[tp] = completed
                    stored = True
        if stored:
            self._data_ready.set()
        return stored

    def _completed_fetch(self, node_id: int, tp: TopicPartition, position: int, incarnation: int,
                         part: Mapping[str, Any]) -> _CompletedFetch | None:
        code = part["error_code"]
        data = part["records"]
        self._note_preferred_replica(node_id, tp, part["preferred_read_replica"])
        completed = _CompletedFetch(
            tp, node_id, incarnation, position, code, part["high_watermark"], part["last_stable_offset"],
            part["log_start_offset"], None, 0 if data is None else len(data))
        diverging = part.get("diverging_epoch")
        if code == 0 and diverging is not None and (diverging["epoch"] >= 0 or diverging["end_offset"] >= 0):
            completed.diverging = diverging["epoch"], diverging["end_offset"]
            return completed  # the broker sends no records with it
        if code == 0 and not data:
            self._apply_marks(completed)  # nothing new, but the lag is worth knowing
            return None
        if code == 0:
            aborted = part["aborted_transactions"]
            completed.records = PartitionRecords(
                tp.topic, tp.partition, data, position, check_crcs=self._check_crcs,
                read_committed=self._isolation_level == READ_COMMITTED,
                aborted_transactions=[(a["producer_id"], a["first_offset"]) for a in aborted or ()])
            end = fetch_continuation(data)
            if end is not None and end[0] > position:
                completed.data_end, completed.data_end_epoch = end
        return completed

    def _note_preferred_replica(self, node_id: int, tp: TopicPartition, replica: int) -> None:
        if replica >= 0 and replica != node_id:
            until = asyncio.get_running_loop().time() + PREFERRED_REPLICA_SECONDS
            self._preferred[tp] = (replica, until)
            log.debug("fetching %s from its preferred read replica %d", tp, replica)

    def _apply_marks(self, cf: _CompletedFetch) -> None:
        state = self._current_state(cf)
        if state is None or cf.marks_applied:
            return
        cf.marks_applied = True
        if cf.high_watermark >= 0:
            state.high_watermark = cf.high_watermark
        if cf.last_stable_offset >= 0:
            state.last_stable_offset = cf.last_stable_offset
        if cf.log_start_offset >= 0:
            state.log_start_offset = cf.log_start_offset

    def _current_state(self, cf: _CompletedFetch) -> PartitionState | None:
        """The partition's state if this data is still wanted: same assignment, same position."""
        state = self._subscription.assignment.get(cf.tp)
        if state is None or cf.incarnation != state.incarnation or state.position != cf.position:
            return None
        return state

    # ------------------------------------------------------------------ handing out

    def fetched_records(self, max_records: int) -> dict[TopicPartition, Records]:
        """Up to ``max_records`` buffered records, taking partitions in turn; positions advance.

        A stored error (from a fetch task, or one met after records were already collected) is
        raised from here, once. A record a deserializer fails on is different: the records before it
        are handed out, then its RecordDeserializationError is raised by every call (the partition
        next in line, as in Java) until a seek moves the partition past it.
        """
        if self._errors:
            raise self._errors.popleft()
        out: dict[TopicPartition, Records] = {}
        left = max_records
        for tp in list(self._completed):
            if left <= 0:
                break
            try:
                records = self._drain(self._completed[tp], left)
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
                cf = self._completed.get(tp)
                if cf is not None and cf.poison is not None:
                    break  # stopped before a record that fails to deserialize: the next call raises
                if cf is not None:  # more left: this partition goes to the back of the line
                    self._completed[tp] = self._completed.pop(tp)
        return out

    def _drain(self, cf: _CompletedFetch, limit: int) -> Records:
        state = self._current_state(cf)
        if state is None:
            self._finish(cf.tp)  # revoked, re-assigned or seeked since the fetch was sent
            return _NO_RECORDS
        if state.pending_revocation:
            self._finish(cf.tp)  # being revoked: none of its records is handed out any more
            return _NO_RECORDS
        if state.paused:
            return _NO_RECORDS  # kept for when the partition resumes
        self._apply_marks(cf)
        records = cf.records
        if cf.diverging is not None:
            self._finish(cf.tp)
            check_divergence(self._subscription, cf.tp, cf.position, *cf.diverging)
            return _NO_RECORDS
        if records is None:
            self._finish(cf.tp)
            self._partition_error(cf)
            return _NO_RECORDS
        if cf.poison is not None:
            raise cf.poison.with_traceback(None)  # the same error each time, its traceback not piling up
        start = cf.position
        try:
            chunk = records.take(limit)
        except Exception:
            self._finish(cf.tp)  # position unchanged: a refetch meets the same error
            raise
        if chunk and self._convert is not None:
            chunk, bad = self._convert(chunk)
            if bad is not None:
                return self._poisoned(cf, state, chunk, *bad)
        state.position = cf.position = records.position
        if records.position_leader_epoch is not None:
            state.leader_epoch = records.position_leader_epoch
        if records.exhausted:
            self._finish(cf.tp)
            if not chunk and records.record_too_large and records.position == start:
                raise KafkaError(
                    f"the record batch at offset {cf.position} of {cf.tp.topic}-{cf.tp.partition} is "
                    f"larger than max_partition_fetch_bytes={self._partition_max_bytes}; raise it")
        return chunk

    def _poisoned(self, cf: _CompletedFetch, state: PartitionState, good: Records, columns: RecordColumns,
                  bad: BadRecord) -> Records:
        """The records before the one that failed to deserialize (its error if none); the position
        stops on that one, and its error is kept to be raised by every hand-out until a seek moves
        the partition."""
        raw = columns[bad.row]  # as the broker sent it: the keys and values are still bytes there
        # As when records are handed out: the epoch of the batch the position comes after.
        epoch = good.chunks[-1].leader_epoch if good else raw.leader_epoch if raw.offset > cf.position else None
        if epoch is not None:
            state.leader_epoch = epoch
        state.position = cf.position = raw.offset
        cf.data_end = None  # no fetching ahead of a partition that cannot go on
        cf.poison = RecordDeserializationError(
            cf.tp, raw.offset, bad.origin, raw.key, raw.value, raw.timestamp, raw.timestamp_type,
            raw.headers, raw.leader_epoch, bad.cause)
        if not good:
            raise cf.poison
        return good

    def _finish(self, tp: TopicPartition) -> None:
        """The current data of ``tp`` is done with: the data fetched ahead, if any, takes its place."""
        del self._completed[tp]
        ahead = self._next.pop(tp, None)
        if ahead is not None:
            self._completed[tp] = ahead

    def _partition_error(self, cf: _CompletedFetch) -> None:
        tp, code = cf.tp, cf.error_code
        where = f"{tp.topic}-{tp.partition} at offset {cf.position} (broker {cf.node_id})"
        if tp in self._preferred and self._preferred[tp][0] == cf.node_id:
            del self._preferred[tp]  # a follower could not serve us: back to the leader
            log.info("preferred read replica failed for %s: %s", where, BrokerError(code).name)
            return
        if code == _OFFSET_OUT_OF_RANGE:
            self._offset_out_of_range(cf, where)
        elif code == _CORRUPT_MESSAGE:
            raise CorruptRecordError("the broker reports a corrupt message", tp.topic, tp.partition,
                                     cf.position)
        elif is_retriable(code):
            log.info("fetch for %s: %s; refreshing metadata", where, BrokerError(code).name)
            self.metadata_refresh_needed = True
            self._partition_backoff[tp] = asyncio.get_running_loop().time() + self._retry_backoff
        else:
            raise BrokerError(code, f"Fetch for {where}")

    def _offset_out_of_range(self, cf: _CompletedFetch, where: str) -> None:
        if self._subscription.default_reset is ResetStrategy.NONE:
            raise OffsetOutOfRangeError(
                f"fetch offset {cf.position} is out of range for {cf.tp.topic}-{cf.tp.partition} "
                f"(log start {cf.log_start_offset}, high watermark {cf.high_watermark}) and "
                f"auto_offset_reset='none': seek() to a valid offset")
        log.info("fetch offset out of range for %s: resetting to %s", where,
                 self._subscription.default_reset.value)
        self._subscription.request_reset(cf.tp)

    # ------------------------------------------------------------------ waiting and closing

    def wake(self) -> None:
        """End a wait_for_data() early: the poll path has something else to do (e.g. rejoin)."""
        self._data_ready.set()

    async def wait_for_data(self, timeout: float | None) -> None:
        """Return when records (or an error) are ready to hand out, or after ``timeout`` seconds."""
        if self._errors or self._closed or self.has_buffered():
            return
        self._data_ready.clear()
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                await self._data_ready.wait()
        except TimeoutError:
            if not scope.expired():
                raise

    async def close(self) -> None:
        """Cancel in-flight fetches and drop buffered data (idempotent)."""
        self._closed = True
        for timer in self._retry_timers.values():
            timer.cancel()
        self._retry_timers.clear()
        tasks = list(self._in_flight.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)  # the caller's own cancellation still propagates
        self._in_flight.clear()
        self._in_flight_tps.clear()
        self._completed.clear()
        self._next.clear()
        self._data_ready.set()  # wake any waiter: nothing more will arrive


_NO_RECORDS = RecordChunks([])


def _converter(key_deserializer: Deserializer | None,
               value_deserializer: Deserializer | None) -> Callable[[Records], Converted] | None:
    """Applies the deserializers column by column, stopping at the first record one of them raises
    on (None: records pass as they are)."""
    if key_deserializer is None and value_deserializer is None:
        return None
    kd: Deserializer = key_deserializer or _identity
    vd: Deserializer = value_deserializer or _identity

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


def _transient(exc: Exception) -> bool:
    """Network trouble the fetcher retries by itself (as Java's poll does), never shown to poll()."""
    if isinstance(exc, CorruptRecordError):
        return False
    if isinstance(exc, KafkaConnectionError | KafkaTimeoutError | ProtocolDecodeError):
        return True
    return isinstance(exc, BrokerError) and exc.retriable
