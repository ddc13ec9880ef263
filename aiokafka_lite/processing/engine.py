"""Processor: the loop behind process() (see the package docstring for the design).

One task (the caller's) polls, takes records in, pauses and resumes, and schedules commits; each
lane's head record runs in a task of its own; the rebalance listener (listener.py) runs in the poll
path, or in close()'s task, and drains what it is told to."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..consumer.listener import ConsumerRebalanceListener
from ..errors import (
    ConfigError,
    ConsumerClosedError,
    HandlerCancelledError,
    IllegalStateError,
    KafkaError,
    OffsetMetadataError,
)
from ..structs import ConsumerRecord, OffsetAndMetadata, TopicPartition
from . import metadata, pressure
from .jobs import Counts, Job, PartitionWork, handle, lane_of
from .listener import ProcessingListener
from .metadata import Encoded
from .progress import PartitionProgress
from .settings import FailureHook, Handler, process_settings
from .source import RecordSource

log = logging.getLogger("aiokafka_lite.consumer.process")

Planned = dict[TopicPartition, tuple[PartitionWork, int, Encoded]]
STUCK_CHECK_EVERY = 1.0  # seconds between looks for handlers running past stuck_handler_warning


@dataclass(frozen=True)
class ProcessResult:
    """What process() did, returned when it ends cleanly."""

    reason: str  # "stopped" (stop()) or "closed" (the consumer was closed)
    processed: int
    failed: int
    skipped: int
    retries: int
    committed: dict[TopicPartition, int]  # the last watermark committed per partition


class Processor:
    """Key-ordered concurrent processing with a safe commit watermark; `process()` builds and runs one."""

    def __init__(self, consumer: RecordSource, handler: Handler, *, on_failure: FailureHook | None = None,
                 listener: ConsumerRebalanceListener | None = None, topics: Iterable[str] | None = None,
                 pattern: str | None = None, **settings: Any) -> None:
        self.settings = process_settings(settings)
        self._consumer, self._handler, self._on_failure = consumer, handler, on_failure
        self._user_listener = listener
        self._topics, self._pattern = (list(topics) if topics is not None else None), pattern
        self._slots = asyncio.Semaphore(self.settings.concurrency)
        self._parts: dict[TopicPartition, PartitionWork] = {}
        self._paused_by_us: set[TopicPartition] = set()
        self._counts = Counts()
        self._committed: dict[TopicPartition, int] = {}
        self._commit_task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._fatal: BaseException | None = None
        self._listener: ProcessingListener | None = None
        self._subscribed: list[str] | None = None  # the topics process() subscribed to (None: a pattern or none)
        self._running = False
        self._used = False
        self._metadata_checked = False  # whether the broker keeps commit metadata (Tansu drops it)
        self._stop_by: float | None = None  # stop(): when the handlers' drain ends at the latest
        # A revocation runs in whichever task runs the listener (close()'s, say): run() ends only
        # after one under way, so that nothing of process()'s is committed after it.
        self._listener_steps = 0
        self._listener_idle = asyncio.Event()
        self._ending = False
        self._room_freed = asyncio.Event()  # set when a handler finishes: room for more records

    # ------------------------------------------------------------ public

    def stop(self) -> None:
        """Ask run() to end: no new records, in-flight ones get drain_timeout (from now: a revocation
        draining meanwhile counts in it), the watermark is committed."""
        if not self._stop.is_set() and self._running:
            with contextlib.suppress(RuntimeError):  # no running loop: the drain counts from the end
                self._stop_by = asyncio.get_running_loop().time() + self.settings.drain_timeout
        self._stop.set()

    def metrics(self) -> dict[str, Any]:
        """Counts and gauges for /health and dashboards (``oldest_handler_age``: seconds the longest
        running handler has run, 0.0 when none runs: a /health endpoint can fail on it)."""
        running = self._running_jobs()
        now = asyncio.get_running_loop().time() if running else 0.0
        return {**asdict(self._counts), "running": self._running, "held": self._held(),
                "in_flight": sum(1 for part in self._parts.values() for job in part.tasks.values() if job.started),
                "oldest_handler_age": max((now - job.started_at for job in running if job.started_at is not None),
                                          default=0.0),
                "paused_partitions": len(self._paused_by_us),
                "watermarks": {f"{tp.topic}-{tp.partition}": part.progress.watermark()
                               for tp, part in self._parts.items()}}

    async def run(self) -> ProcessResult:
        if self._used:
            raise IllegalStateError("a Processor runs once: build a new one (or call process() again)")
        self._check_consumer()
        self._used = self._running = True
        try:
            return await self._run()
        finally:
            self._running = False
            self._ending = True
            if self._listener_steps:  # close()'s revocation, in its own task: bounded by its drain
                self._listener_idle.clear()
                await self._listener_idle.wait()
            self._give_back_listener()

    # ------------------------------------------------------------ the loop

    async def _run(self) -> ProcessResult:
        self._install_listener()
        reason = "stopped"
        loop = asyncio.get_running_loop()
        interval = self._commit_interval()
        check_every = min(STUCK_CHECK_EVERY, self.settings.stuck_handler_warning or STUCK_CHECK_EVERY)
        next_commit, next_check = loop.time() + interval, loop.time() + check_every
        try:
            while not self._stop.is_set() and self._fatal is None:
                self._apply_pressure()
                room = pressure.room(self._held(), self.settings.bound)
                limit = max(1, min(room, self._consumer.config.max_poll_records))
                self._room_freed.clear()
                # Full or paused under pressure: poll() (KIP-62) without waiting, since a handler
                # finishing ends this wait, not a record arriving (quick handlers waited poll_timeout).
                pressed = not room or bool(self._paused_by_us)
                batch = await self._consumer.poll(0 if pressed else self.settings.poll_timeout, max_records=limit)
                await self._take(self._within(batch, room))
                if pressed and not batch:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.settings.poll_timeout):
                            await self._room_freed.wait()
                now = loop.time()
                if now >= next_commit:
                    next_commit = now + interval
                    self._commit_in_background()
                if now >= next_check:
                    next_check = now + check_every
                    self._warn_of_stuck_handlers(now)
        except ConsumerClosedError:
            reason = "closed"
        except Exception as exc:  # from poll() (a fatal group error, a deserializer) or a misuse: drained too
            self._fatal = self._fatal if self._fatal is not None else exc
        except BaseException:  # cancelled: handlers are cancelled, nothing more is committed
            await self._cancel_all()
            raise
        try:
            await self._finish(reason)
        except BaseException:
            await self._cancel_all()
            raise
        if self._fatal is not None:
            raise self._fatal
        return ProcessResult(reason, self._counts.processed, self._counts.failed, self._counts.skipped,
                             self._counts.retries, dict(self._committed))

    def _check_consumer(self) -> None:
        config = self._consumer.config
        if config.group_id is None:
            raise IllegalStateError("process() commits its progress: the consumer needs a group_id")
        if config.enable_auto_commit:
            raise ConfigError("process() commits the watermark itself: create the consumer with "
                              "enable_auto_commit=False (auto-commit would commit records still in flight)")

    def _install_listener(self) -> None:
        listener = ProcessingListener(self._revoke, self._lose, self._user_listener)
        if self._pattern is not None:
            self._consumer.subscribe(pattern=self._pattern, listener=listener)
            self._listener = listener
            return
        topics = self._topics if self._topics is not None else sorted(self._consumer.subscription())
        if topics:
            self._consumer.subscribe(topics, listener=listener)
            self._listener, self._subscribed = listener, topics
        # else: a manual assignment, which no rebalance takes away

    def _give_back_listener(self) -> None:
        """However run() ended: process()'s listener does nothing more, and the subscription's
        listener is the application's again (a no-op one when it gave none)."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        listener.detach()
        own = self._user_listener if self._user_listener is not None else ConsumerRebalanceListener()
        with contextlib.suppress(ConsumerClosedError):  # closed: no listener runs any more
            if self._pattern is not None:
                self._consumer.subscribe(pattern=self._pattern, listener=own)
            elif self._subscribed is not None and self._consumer.subscription() == set(self._subscribed):
                self._consumer.subscribe(self._subscribed, listener=own)  # the same topics: no rejoin

    def _commit_interval(self) -> float:
        if self.settings.commit_interval is not None:
            return self.settings.commit_interval
        return self._consumer.config.auto_commit_interval

    def _held(self) -> int:
        return sum(part.progress.unfinished for part in self._parts.values())

    def _running_jobs(self) -> list[Job]:
        return [job for part in self._parts.values() for job in part.tasks.values() if job.started_at is not None]

    def _warn_of_stuck_handlers(self, now: float) -> None:
        """Once per record: a handler running past stuck_handler_warning holds its partition's watermark."""
        threshold = self.settings.stuck_handler_warning
        if threshold is None:
            return
        for job in self._running_jobs():
            assert job.started_at is not None
            if not job.warned and now - job.started_at >= threshold:
                job.warned = True
                r = job.record
                log.warning("process(): the handler of %s-%d offset %d (key %r) has run for %.0f s "
                            "(stuck_handler_warning=%s s); the partition's committed offset waits for it",
                            r.topic, r.partition, r.offset, r.key, now - job.started_at, threshold)

    def _apply_pressure(self) -> None:
        assigned = self._consumer.assignment()
        self._paused_by_us &= assigned
        held = {tp: part.progress.unfinished for tp, part in self._parts.items()}
        wanted = pressure.to_pause(held, assigned, self._paused_by_us, self.settings.bound)
        already = self._consumer.paused()
        pause = wanted - self._paused_by_us - already  # one the application paused is not ours
        resume = self._paused_by_us - wanted
        if pause:
            self._consumer.pause(*sorted(pause))
            self._paused_by_us |= pause
        if resume:
            self._consumer.resume(*sorted(resume))
            self._paused_by_us -= resume

    # ------------------------------------------------------------ records in, handlers out

    def _within(self, batch: Sequence[ConsumerRecord], room: int) -> Sequence[ConsumerRecord]:
        """At the bound poll() is still asked for one record, and a partition assigned inside that
        poll is not paused yet: what comes beyond the room is given back (a seek to it), so the
        records held never pass max_pending_records."""
        if len(batch) <= room:
            return batch
        back: dict[TopicPartition, int] = {}
        for record in batch[room:]:
            back.setdefault(TopicPartition(record.topic, record.partition), record.offset)
        for tp, offset in back.items():
            self._consumer.seek(tp, offset)
        return batch[:room]

    async def _take(self, batch: Iterable[ConsumerRecord]) -> None:
        records = list(batch)
        new = {TopicPartition(r.topic, r.partition) for r in records} - self._parts.keys()
        if new:
            await self._start_partitions(new)
        for record in records:
            part = self._parts.get(TopicPartition(record.topic, record.partition))
            if part is None or part.closing:
                continue  # revoked meanwhile (by close() in another task)
            if part.progress.accept(record.offset):
                self._enqueue(part, record)
            elif part.progress.was_finished(record.offset):
                self._counts.skipped += 1

    async def _start_partitions(self, tps: Collection[TopicPartition]) -> None:
        """A partition's first records: read its committed offset and the finished offsets above it."""
        try:
            committed: Mapping[TopicPartition, OffsetAndMetadata | None] = await self._consumer.committed(tps)
        except ConsumerClosedError:
            raise
        except KafkaError as exc:
            self._counts.metadata_errors += len(tps)
            log.warning("process(): reading the committed offsets of %s failed (%r): their records are "
                        "processed from where the consumer is, finished ones may run again", sorted(tps), exc)
            committed = {}
        for tp in tps:
            self._parts[tp] = PartitionWork(tp, self._progress_of(tp, committed.get(tp)))

    def _progress_of(self, tp: TopicPartition, om: OffsetAndMetadata | None) -> PartitionProgress:
        if om is None:
            return PartitionProgress()
        try:
            carried = metadata.decode(om.metadata, om.offset)
        except OffsetMetadataError as exc:
            self._counts.metadata_errors += 1
            log.warning("process(): %s-%d: %s; starting at the committed offset %d", tp.topic, tp.partition,
                        exc, om.offset)
            carried = metadata.FinishedRanges()
        return PartitionProgress(om.offset, carried, om.metadata)

    def _enqueue(self, part: PartitionWork, record: ConsumerRecord) -> None:
        lane = lane_of(record, self.settings.ordering)
        waiting = part.lanes.get(lane)
        if waiting is not None:
            waiting.append(record)
            return
        part.lanes[lane] = deque([record])
        self._start(Job(record, lane, part))

    def _start(self, job: Job) -> None:
        task = asyncio.create_task(handle(job.record, self._handler, self._on_failure, self.settings, self._slots,
                                          job, self._counts))
        job.partition.tasks[task] = job
        task.add_done_callback(lambda done: self._done(done, job))

    def _done(self, task: asyncio.Task[None], job: Job) -> None:
        part = job.partition
        part.tasks.pop(task, None)
        if task.cancelled() and job.cancelled:
            return  # revoked, lost or stopping: the record stays unfinished (at or above the watermark)
        error = HandlerCancelledError(job.record) if task.cancelled() else task.exception()
        if error is not None:
            if self._fatal is None:
                self._fatal = error
            self._stop.set()
            return
        part.progress.finish(job.record.offset)
        self._room_freed.set()
        waiting = part.lanes.get(job.lane)
        if waiting is None:
            return
        waiting.popleft()
        if not waiting:
            del part.lanes[job.lane]
        elif not part.closing:
            self._start(Job(waiting[0], job.lane, part))

    # ------------------------------------------------------------ commits

    def _plan(self, parts: Iterable[PartitionWork]) -> Planned:
        planned: Planned = {}
        for part in parts:
            wanted = part.progress.to_commit(self.settings.metadata_max_bytes)
            if wanted is not None:
                planned[part.tp] = (part, *wanted)
        return planned

    def _commit_in_background(self) -> None:
        if self._commit_task is not None and not self._commit_task.done():
            return  # the next interval carries the newer watermark
        # A partition being revoked commits in its revocation, after this task: never one behind it.
        planned = self._plan(part for part in self._parts.values() if not part.closing)
        if planned:
            self._commit_task = asyncio.create_task(self._commit(planned))
            self._commit_task.add_done_callback(self._commit_done)

    def _commit_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None and self._fatal is None:
            self._fatal = task.exception()
            self._stop.set()

    async def _commit(self, planned: Planned) -> None:
        offsets = {tp: OffsetAndMetadata(offset, encoded.metadata) for tp, (_, offset, encoded) in planned.items()}
        try:
            await self._consumer.commit(offsets)
        except KafkaError as exc:  # a rebalance or close() came first: the next commit carries it
            self._counts.commit_failures += 1
            log.info("process(): committing %s failed: %r", sorted(offsets), exc)
            return
        self._counts.commits += 1
        for tp, (part, offset, encoded) in planned.items():
            part.progress.committed(offset, encoded)
            self._committed[tp] = offset
            self._counts.metadata_truncated += encoded.truncated
        await self._check_metadata_kept(offsets)

    async def _check_metadata_kept(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Once per run, after the first commit carrying finished offsets: read it back. A broker that
        drops commit metadata (Tansu) makes the next owner run those records again: said once."""
        if self._metadata_checked:
            return
        with_metadata = {tp: om for tp, om in offsets.items() if om.metadata}
        if not with_metadata:
            return
        self._metadata_checked = True
        tp, sent = next(iter(with_metadata.items()))
        try:
            read = (await self._consumer.committed([tp])).get(tp)
        except KafkaError:
            return  # unknown: a later run checks again
        if read is not None and read.offset == sent.offset and read.metadata != sent.metadata:
            self._counts.metadata_dropped = True
            log.warning("process(): the broker did not keep the commit metadata (it answered %r): records finished "
                        "above the committed offset will run again after a rebalance or a restart",
                        read.metadata[:40])

    async def _commit_now(self, parts: Iterable[PartitionWork]) -> None:
        """After earlier commits (in order), the watermark of these partitions."""
        if self._commit_task is not None and not self._commit_task.done():
            await asyncio.wait([self._commit_task])
        planned = self._plan(parts)
        if planned:
            await self._commit(planned)

    # ------------------------------------------------------------ rebalances and the end

    async def _drain(self, parts: list[PartitionWork], until: float | None = None) -> None:
        """No new records; the ones not started are dropped; the started ones get drain_timeout.
        Cancelled meanwhile (close() going by force, run() cancelled): every handler is cancelled
        and awaited first, so none runs on after the caller."""
        for part in parts:
            part.closing = True
            for task, job in part.tasks.items():
                if not job.started:
                    job.cancelled = True
                    task.cancel()
        running = [task for part in parts for task in part.tasks]
        if running:
            try:
                limit = self.settings.drain_timeout
                if until is not None:
                    limit = max(0.0, min(limit, until - asyncio.get_running_loop().time()))
                _, late = await asyncio.wait(running, timeout=limit)
            except asyncio.CancelledError:
                await self._cancel(parts)
                raise
            if late:
                log.info("process(): %d handlers still running after drain_timeout (%.1f s): cancelled",
                         len(late), self.settings.drain_timeout)
        await self._cancel(parts)

    async def _cancel(self, parts: list[PartitionWork]) -> None:
        """Cancel (booked as ours) and await every handler of ``parts``; a handler that ignores its
        cancellation gets drain_timeout more, then is left and named (run() must end)."""
        jobs = [(task, job) for part in parts for task, job in part.tasks.items()]
        for part in parts:
            part.closing = True
        for task, job in jobs:
            job.cancelled = True
            task.cancel()
        if jobs:
            _, stubborn = await asyncio.wait([task for task, _ in jobs], timeout=self.settings.drain_timeout)
            if stubborn:
                log.warning("process(): %d handlers ignored their cancellation for %.1f s and are left running "
                            "(a handler must not swallow CancelledError)", len(stubborn), self.settings.drain_timeout)

    async def _cancel_all(self) -> None:
        """Every task this run started (handlers, a commit under way), cancelled and awaited."""
        await self._cancel(list(self._parts.values()))
        if self._commit_task is not None and not self._commit_task.done():
            self._commit_task.cancel()
            await asyncio.wait([self._commit_task])

    async def _revoke(self, tps: set[TopicPartition]) -> None:
        parts = [self._parts[tp] for tp in sorted(tps) if tp in self._parts]
        self._listener_steps += 1
        try:
            await self._drain(parts)
            if not self._ending:  # run() is ending (cancelled, say): it commits what it commits itself
                await self._commit_now(parts)
            self._forget(parts)
        finally:
            self._listener_steps -= 1
            if not self._listener_steps:
                self._listener_idle.set()

    async def _lose(self, tps: set[TopicPartition]) -> None:
        parts = [self._parts[tp] for tp in sorted(tps) if tp in self._parts]
        await self._cancel(parts)  # others may own them already: nothing is committed
        self._forget(parts)

    def _forget(self, parts: list[PartitionWork]) -> None:
        for part in parts:
            if self._parts.get(part.tp) is part:
                del self._parts[part.tp]
            self._paused_by_us.discard(part.tp)

    async def _finish(self, reason: str) -> None:
        if reason == "closed":
            await self._after_close()
        else:
            parts = list(self._parts.values())
            await self._drain(parts, self._stop_by)
            await self._commit_now(parts)
            with contextlib.suppress(ConsumerClosedError):  # closed meanwhile: nothing left to resume
                resume = self._paused_by_us & self._consumer.assignment()
                if resume:
                    self._consumer.resume(*sorted(resume))
        self._paused_by_us.clear()
        self._parts.clear()

    async def _after_close(self) -> None:
        """The consumer was closed in another task: close()'s revocation drains and commits through
        the listener. Wait for that close to end (this waits; it does not cut it short), so the
        result says what it committed; what it did not revoke (closed by force, or out of the group)
        is cancelled, committing nothing."""
        with contextlib.suppress(Exception):  # close()'s own error is its caller's to see
            await self._consumer.close(None)
        await self._cancel(list(self._parts.values()))
        if self._commit_task is not None:
            await asyncio.wait([self._commit_task])
