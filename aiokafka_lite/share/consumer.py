"""The ShareConsumer users hold (KIP-932 share groups: queue semantics on Kafka topics).

It owns a cluster, a share group member (group/share ShareMember: heartbeats, the poll-deadline
watchdog), a share fetcher (fetch/share/fetcher.py ShareFetcher: ShareFetch, ShareAcknowledge) and
the share lag's refresher (lag.py ShareLag, for metrics()), and closes them. Several tasks may
poll it, or iterate it with ``async for``, at once: each record is handed to one of them, and
held.py keeps the acknowledgement mode per task. Every awaitable method is bounded (KIP-266,
liveness/deadlines.py)."""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._net.cluster import Cluster
from ..config import ConsumerConfig
from ..errors import (
    ConsumerClosedError,
    DeserializerNotReadyError,
    IllegalStateError,
    InvalidArgumentError,
    InvalidRecordStateError,
    KafkaError,
)
from ..fetch.share.fetcher import AckResults, ShareFetcher
from ..fetch.share.ledger import AckType
from ..fetch.share.records import ShareRecord
from ..group.share.member import ShareMember
from ..group.share.state import State
from ..liveness.closing import Closing, cancel
from ..liveness.deadlines import (
    DEFAULT,
    Timeout,
    bounded,
    check_timeout,
    closed_not_cancelled,
    prepare_deserializer,
    resolve_timeout,
)
from ..structs import TopicPartition
from .acks import AckCounts, Acknowledging, Renewing, ack_type_of, deserialize
from .held import HeldRecords
from .kept import KeptRecords
from .lag import ShareLag
from .lifecycle import StartOnce
from .wiring import make_cluster, make_fetcher, make_member, share_config

log = logging.getLogger("aiokafka_lite.share")

POLL_DEFAULT_TIMEOUT = 1.0
_WAKE_EVERY = 0.5  # seconds: a poll waiting for records looks at the member's state this often

CommitCallback = Callable[[AckResults, BaseException | None], Any]


class ShareConsumer:
    """An asyncio consumer of a KIP-932 share group. See docs/share.md."""

    def __init__(self, *topics: str, **settings: Any) -> None:
        self._init(ConsumerConfig.from_kwargs(**settings), topics)

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any], *topics: str) -> ShareConsumer:
        """Build from Java-style names: {"bootstrap.servers": ..., "group.id": ...,
        "share.acknowledgement.mode": "explicit"}."""
        self = cls.__new__(cls)
        self._init(ConsumerConfig.from_properties(properties), topics)
        return self

    def _init(self, config: ConsumerConfig, topics: Iterable[str]) -> None:
        self.config = share_config(config)
        self.explicit = config.share_acknowledgement_mode == "explicit"
        self._topics: frozenset[str] = frozenset()
        self._cluster: Cluster | None = None
        self._connecting: Cluster | None = None  # the start attempt's: why it cannot reach the cluster
        self._member: ShareMember | None = None
        self._fetcher: ShareFetcher | None = None
        self._startup = StartOnce(self._start_once, self._is_closed, self.config.default_api_timeout)
        self._closing = Closing("share close")
        self._held = HeldRecords(self._task_ended)
        self._held.explicit = self.explicit
        self._lag = ShareLag(config.group_id or "", config.share_lag_refresh_ms, config.request_timeout)
        self._kept = KeptRecords()  # behind a record the deserializer failed on: the next polls' first
        self._commits: set[asyncio.Task[AckResults]] = set()
        self._lapse_end: asyncio.Task[None] | None = None  # ending the share sessions after a poll lapse
        self._on_results: Callable[[AckResults], Any] | None = None
        self.counts = AckCounts()
        self._polls = 0
        self._deserialization_error: KafkaError | None = None
        self._not_ready: DeserializerNotReadyError | None = None  # a deserializer to prepare (a schema lookup)
        topic_list = list(topics)
        if topic_list:
            self.subscribe(topic_list)

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        startup = getattr(self, "_startup", None)
        if startup is not None and startup.attempted and not self._closing.closed:
            _warn(f"unclosed ShareConsumer (group {self.config.group_id!r}): call close() or use 'async with'",
                  ResourceWarning, source=self)

    # ------------------------------------------------------------ life cycle

    async def __aenter__(self) -> ShareConsumer:
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, timeout: Timeout = DEFAULT) -> None:
        """Connect (bounded by the timeout). Called by `async with`, and by every call needing the
        cluster within that call's own timeout; an attempt outlasting it goes on as an owned task."""
        limit = self._open_call(timeout)
        await bounded(self._startup.ensure_started(), limit, "connecting to the bootstrap servers", self._is_closed)

    async def _start_once(self) -> None:
        cluster = self._connecting = make_cluster(self.config)
        try:
            await cluster.bootstrap(timeout=None)  # bounded by each caller waiting for it
        except BaseException:
            await cluster.close()
            raise
        self._cluster = cluster
        self._member = make_member(self.config, cluster, self._assignment_changed)
        self._fetcher = make_fetcher(self.config, cluster, self._member.member_id)
        self._lag.start(cluster, self._member.assignment)
        if self._topics:
            self._member.subscribe(self._topics)

    async def close(self, timeout: float | None = 30.0) -> None:
        """Send pending acknowledgements (implicit mode: accept what was handed out; records
        fetched but never handed out are released), end the share sessions and leave the group,
        within ``timeout`` (None: request_timeout_ms); then by force: every owned task cancelled
        and awaited, every connection closed. Other tasks' calls end with ConsumerClosedError.
        Idempotent; a cancelled close() closes by force, then re-raises."""
        timeout = check_timeout(timeout)
        limit = self.config.request_timeout if timeout is None else timeout
        await self._closing.close(timeout, lambda: self._close_gracefully(limit), self._close_by_force)

    async def _close_gracefully(self, limit: float) -> None:
        member, fetcher = self._member, self._fetcher
        if member is None or fetcher is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        if not self.explicit:
            self._decide(self._held.every(), AckType.ACCEPT)
        self._decide(self._kept.drop(), AckType.RELEASE)  # never handed out: given back, as the fetcher's own
        self._results(await fetcher.close(max(deadline - loop.time(), 0.0)))
        await member.close(max(deadline - loop.time(), 0.0))

    async def _close_by_force(self) -> None:
        await self._startup.stop()
        for task in list(self._commits):
            await cancel(task)
        await cancel(self._lapse_end)
        await self._lag.stop()
        if self._member is not None:
            await self._member.stop()
        if self._fetcher is not None:
            await self._fetcher.close(0.0)  # idempotent: what the graceful part did not reach
        if self._cluster is not None:
            await self._cluster.close()

    @property
    def closed(self) -> bool:
        return self._closing.closed

    def _is_closed(self) -> bool:
        return self._closing.closed

    def _check_open(self) -> None:
        if self._closing.closed:
            raise ConsumerClosedError("the share consumer is closed")

    def _open_call(self, timeout: Timeout) -> float | None:
        self._check_open()
        return resolve_timeout(timeout, self.config)

    async def _ready(self) -> tuple[ShareMember, ShareFetcher]:
        await self._startup.ensure_started()
        self._check_open()
        assert self._member is not None
        assert self._fetcher is not None
        return self._member, self._fetcher

    # ------------------------------------------------------------ subscription

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group for these topics (or change them); an empty list unsubscribes."""
        self._check_open()
        wanted = frozenset([topics] if isinstance(topics, str) else topics)
        if not wanted:
            self.unsubscribe()
            return
        self._topics = wanted
        if self._member is not None:
            self._member.subscribe(wanted)

    def unsubscribe(self) -> None:
        """Leave the group (in the background); records fetched and not handed out are released."""
        self._check_open()
        self._topics = frozenset()
        if self._member is not None:
            self._member.subscribe(())
        if self._fetcher is not None:
            self._assign(self._fetcher, ())

    def subscription(self) -> set[str]:
        self._check_open()
        return set(self._topics)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the broker gives this member to fetch from (shared with other members)."""
        self._check_open()
        return set() if self._member is None else self._member.assignment()

    def _assignment_changed(self) -> None:
        member, fetcher = self._member, self._fetcher
        if fetcher is None or member is None:
            return
        self._lag.assignment_changed()
        self._assign(fetcher, member.assignment() if self._topics else ())
        if member.state is State.STALE and self._lapse_end is None and not self._closing.closed:
            # Left at the poll deadline: what this member holds goes to the live members now, not
            # when its locks lapse; its tasks' records (and those kept) are no longer its to acknowledge.
            self._held.forget()
            self._kept.drop()
            self._lapse_end = asyncio.get_running_loop().create_task(
                self._end_sessions(fetcher), name="aiokafka-lite share sessions end (poll lapse)")

    def _assign(self, fetcher: ShareFetcher, tps: Iterable[TopicPartition]) -> None:
        """The fetcher's partitions now; kept records of a partition that left are released, as the
        fetcher releases its buffered ones."""
        wanted = set(tps)
        fetcher.assign(wanted)
        self._decide(self._kept.outside(wanted), AckType.RELEASE)

    async def _end_sessions(self, fetcher: ShareFetcher) -> None:
        try:
            self._results(await fetcher.end_sessions(self.config.request_timeout))
        finally:
            self._lapse_end = None

    # ------------------------------------------------------------ poll

    async def poll(self, timeout: float = POLL_DEFAULT_TIMEOUT, max_records: int | None = None) -> list[ShareRecord]:
        """Acquired records for this task, waiting up to ``timeout`` seconds; empty on timeout.
        Implicit mode first accepts what this task got before; explicit mode refuses
        (IllegalStateError) while this task holds a record it has not acknowledged."""
        self._check_open()
        limit_s = check_timeout(timeout, none_ok=False, what="poll timeout")
        limit = self.config.max_poll_records if max_records is None else max_records
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgumentError(f"max_records must be an int >= 1, got {max_records!r}")
        if not self._topics:
            raise IllegalStateError("poll() before subscribe()")
        task = asyncio.current_task()
        self._settle_task(task)
        self._polls += 1
        try:
            with closed_not_cancelled(self._is_closed, "poll()"):
                async with asyncio.timeout(limit_s) as scope:
                    member, fetcher = await self._ready()
                    return self._poll_once(member, fetcher, task, limit) or await self._wait_for_records(
                        member, fetcher, task, limit, scope.when())
        except TimeoutError:
            return []

    def _settle_task(self, task: Any) -> None:
        held = self._held.of_task(task)
        if not held:
            return
        if self.explicit:
            raise IllegalStateError(f"this task holds {len(held)} records it has not acknowledged: in explicit "
                                    "mode acknowledge each record before polling again")
        self._decide(held, AckType.ACCEPT)

    async def _wait_for_records(self, member: ShareMember, fetcher: ShareFetcher, task: Any,
                                limit: int, deadline: float | None) -> list[ShareRecord]:
        while True:
            not_ready, self._not_ready = self._not_ready, None
            if not_ready is not None:
                await prepare_deserializer(not_ready, deadline)
            else:
                await fetcher.wait_for_data(_WAKE_EVERY)
            self._check_open()
            records = self._poll_once(member, fetcher, task, limit)
            if records:
                return records

    def _poll_once(self, member: ShareMember, fetcher: ShareFetcher, task: Any, limit: int) -> list[ShareRecord]:
        member.before_poll()  # the poll clock; a stored fatal error; a rejoin after a lapse
        error, self._deserialization_error = self._deserialization_error, None
        if error is not None:
            raise error
        if fetcher.assignment() != member.assignment():
            self._assign(fetcher, member.assignment())
        self._results(fetcher.take_acknowledgement_results())
        records = self._kept.take(limit)  # behind a bad record: before anything fetched since
        if len(records) < limit:
            records += [r for rs in fetcher.fetched_records(limit - len(records), strict=False).values() for r in rs]
        if not records:
            fetcher.send_fetches()
            return records
        good, error, bad, behind = deserialize(records, self.config.key_deserializer, self.config.value_deserializer)
        self._held.hand_out(task, good)
        self.counts.handed(good)
        if error is None or bad is None:
            return good
        if isinstance(error.__cause__, DeserializerNotReadyError):
            # Not a bad record: it and those behind it stay acquired and go first once the
            # deserializer is prepared (a poll() awaits that when it has nothing else to hand out).
            self._kept.keep([bad, *behind])
            self._not_ready = error.__cause__
            return good
        # The bad record alone is released: the ones behind it stay acquired, their delivery counts
        # untouched, and go first at the poll after the error's (any task's).
        self._decide([bad], AckType.RELEASE)
        self._kept.keep(behind)
        if not good:
            raise error
        self._deserialization_error = error  # raised by the next poll, after these are handed out
        return good

    def __aiter__(self) -> ShareConsumer:
        return self

    async def __anext__(self) -> ShareRecord:
        """One record at a time for this task (so many tasks may iterate at once); ends when the
        consumer closes. Implicit mode accepts this task's previous record on each step."""
        while True:
            if self._closing.closed:
                raise StopAsyncIteration
            try:
                records = await self.poll(POLL_DEFAULT_TIMEOUT, max_records=1)
            except ConsumerClosedError:
                raise StopAsyncIteration from None
            if records:
                return records[0]

    # ------------------------------------------------------------ acknowledgements

    def acknowledge(self, record: ShareRecord, type: AckType | str = "accept") -> None:
        """Decide a handed-out record (explicit mode): "accept" (done), "release" (deliver it
        again, to any member), "reject" (never again), or "renew" (still working: extend its lock,
        on brokers with ShareAcknowledge v2). Sent with the next fetch from its broker, or by commit().
        A delivery whose lock lapsed and that was acquired again (``delivery_count`` one higher) is
        refused with InvalidRecordStateError: the newer delivery is the one to decide."""
        self._check_open()
        if not self.explicit:
            raise IllegalStateError("acknowledge() needs share_acknowledgement_mode='explicit'; implicit mode "
                                    "accepts each record when its task polls again")
        kind = ack_type_of(type)
        fetcher = self._fetcher
        if fetcher is None:
            raise IllegalStateError("acknowledge(): no record was handed out yet")
        current = self._held.current(record)  # the ledger knows offsets only; this, the delivery
        if current is not None and current.delivery_count != record.delivery_count:
            raise _lapsed(record, f"it was delivered again (delivery_count {current.delivery_count})")
        try:
            fetcher.acknowledge(record, kind)
        except IllegalStateError as exc:
            if current is None:
                raise
            # Handed out and undecided, yet the ledger awaits it no more: it was acquired again.
            raise _lapsed(record, "the broker acquired it again") from exc
        finally:
            if kind is not AckType.RENEW:
                self._held.decided(record)
        self.counts.count(kind)

    def acknowledging(self, record: ShareRecord) -> Acknowledging:
        """``with share.acknowledging(record):`` (or ``async with``) keeps the record's lock while the
        block runs (as ``renewing()``), accepts the record when the block ends normally and releases
        it when the block raises, cancellation included."""
        if not self.explicit:
            raise IllegalStateError("acknowledging() needs share_acknowledgement_mode='explicit'")
        return Acknowledging(self, record, self.renewing(record))

    def renewing(self, record: ShareRecord) -> Renewing:
        """``with share.renewing(record):`` (or ``async with``): while the block runs, the record's
        acquisition lock is renewed before it lapses (KIP-1222 RENEW, brokers with ShareAcknowledge
        v2), for at most share_lock_renewal_max_ms, so the broker does not hand it to another member
        meanwhile. The decision stays the caller's; a renewal that fails is logged, never raised.
        Nothing is kept for a delivery no longer this task's to decide, or once the consumer is closed."""
        keep = self._fetcher is not None and not self._closing.closed and self._held.holds(record)
        return Renewing(self._fetcher if keep else None, record)

    def holds(self, record: ShareRecord) -> bool:
        """This delivery of ``record`` was handed out and awaits a decision (False for an earlier
        delivery whose lock lapsed and which came back with a higher ``delivery_count``)."""
        return self._held.holds(record)

    def set_acknowledgement_commit_callback(self, callback: Callable[[AckResults], Any] | None) -> None:
        """Called from poll() and close() with the results of acknowledgements that went with
        fetches (per partition: None, or the error), as Java's AcknowledgementCommitCallback."""
        self._on_results = callback

    def _decide(self, records: list[ShareRecord], kind: AckType) -> None:
        """Decide ``records`` alike, at once; one decided already, or acquired again after its
        lock lapsed, is skipped (the ledger no longer awaits it)."""
        self._held.decided_all(records)
        if self._fetcher is not None:
            self.counts.count(kind, self._fetcher.acknowledge_all(records, kind))

    def _task_ended(self, records: list[ShareRecord], kind: AckType) -> None:
        if not self._closing.closed:
            self._decide(records, kind)

    def _results(self, results: AckResults) -> None:
        if not results:
            return
        self.counts.results(results)
        if self._on_results is not None:
            self._on_results(results)

    async def commit(self, timeout: Timeout = DEFAULT) -> AckResults:
        """Send every pending acknowledgement now (implicit mode: accept every record handed
        out) and return each partition's result: None, or the error (as Java's commitSync, which
        raises nothing for a partition's failure; KafkaTimeoutError for those not answered in time)."""
        limit = self._open_call(timeout)
        return await bounded(self._own_commit(limit), None, "commit", self._is_closed)

    def commit_async(self, callback: CommitCallback | None = None) -> asyncio.Future[AckResults]:
        """Start a commit() (bounded by default_api_timeout_ms); the future and ``callback(results,
        error)`` get its outcome (ConsumerClosedError when close() stopped it)."""
        self._check_open()
        task = self._own_commit(self.config.default_api_timeout)
        task.add_done_callback(_retrieve)
        if callback is not None:
            task.add_done_callback(lambda f: callback(*_outcome(f)))
        return task

    def _own_commit(self, limit: float | None) -> asyncio.Task[AckResults]:
        task = asyncio.get_running_loop().create_task(self._commit(limit), name="aiokafka-lite share commit")
        self._commits.add(task)
        task.add_done_callback(self._commits.discard)
        return task

    async def _commit(self, limit: float | None) -> AckResults:
        loop = asyncio.get_running_loop()
        deadline = None if limit is None else loop.time() + limit
        _, fetcher = await bounded(self._ready(), limit, "commit (connecting)", self._is_closed)
        if not self.explicit:
            self._decide(self._held.every(), AckType.ACCEPT)
        results = await fetcher.commit(None if deadline is None else max(deadline - loop.time(), 0.0))
        self.counts.commits += 1
        self.counts.results(results)
        return results

    # ------------------------------------------------------------ metrics

    def metrics(self) -> dict[str, Any]:
        """A snapshot: the member's (state, epoch, heartbeats, poll lapses...), the share sessions,
        records acquired, handed out (by delivery count), held and lapsed, acknowledgements by type
        and their results, lock renewals, and the share lag per assigned partition (as the Consumer's
        ``lag``; the coordinator's figure, asked every share_lag_refresh_ms: None until known)."""
        figures: dict[str, Any] = {
            "client_id": self.config.client_id, "group_id": self.config.group_id,
            "started": self._startup.started, "closed": self._closing.closed, "polls": self._polls,
            "bootstrap_failures": self._startup.failures(self._connecting),  # until start() succeeds
            "acknowledgement_mode": "explicit" if self.explicit else "implicit",
            "records_held": len(self._held), "records_kept": len(self._kept), **self.counts.as_dict(),
            "lag": self._lag.snapshot(), "lag_refresh": self._lag.metrics()}  # share/lag.py
        if self._member is not None:
            figures["member"] = self._member.metrics()
        if self._fetcher is not None:
            figures["share_sessions"] = self._fetcher.sessions()
            figures["fetches_in_flight"] = self._fetcher.in_flight()
            figures["lock_renewals"] = self._fetcher.renewal_metrics()
            figures.update(self._fetcher.record_counts())  # records_acquired, records_lapsed
        return figures


def _lapsed(record: ShareRecord, why: str) -> InvalidRecordStateError:
    return InvalidRecordStateError(
        f"the delivery of {record.topic}-{record.partition} offset {record.offset} with delivery_count "
        f"{record.delivery_count} is no longer this consumer's to decide: its acquisition lock lapsed and {why}; "
        "only the newer delivery may be acknowledged", record)


def _outcome(fut: asyncio.Future[AckResults]) -> tuple[AckResults, BaseException | None]:
    if fut.cancelled():
        return {}, ConsumerClosedError("the commit was cancelled")
    error = fut.exception()
    return ({}, error) if error is not None else (fut.result(), None)


def _retrieve(fut: asyncio.Future[AckResults]) -> None:
    if not fut.cancelled():
        fut.exception()
