"""A handler over a ShareConsumer's records: the share-group twin of processing.process().

    from aiokafka_lite.processing import process_share
    from aiokafka_lite.share import ShareConsumer

    async def handle(record): ...                     # one coroutine per record
    share = ShareConsumer("jobs", bootstrap_servers=..., group_id="workers",
                          share_acknowledgement_mode="explicit")
    async with share:
        result = await process_share(share, handle, concurrency=16, max_retries=3,
                                     on_failure=dead_letter)   # until stop or share.close()

The shape is processing.Processor's: ``ShareProcessor(share, handler, on_failure=..., concurrency=...,
...)``, ``run()``, ``stop()``, ``metrics()``, and ``process_share()`` to build and run one. What the
broker does for a share group replaces the watermark, the ordering and the in-process retries:

- ``concurrency`` worker tasks each poll the consumer for one record at a time and run the handler
  on it. A handler that returns: the record is accepted (never delivered again). While it runs,
  the record's acquisition lock is renewed (the consumer's ``renewing()``, KIP-1222) up to
  share_lock_renewal_max_ms, so a slow handler's record is not delivered to another member meanwhile.
- A handler that raises: the record is released, so the broker delivers it again (to any member)
  with its delivery count one higher: that redelivery is the retry. Once the record's
  ``delivery_count`` exceeds ``max_retries`` (the attempts after the first; None leaves it to the
  group's ``group.share.delivery.count.limit``, at which the broker archives it), it is rejected
  (never delivered again) and ``on_failure(record, error)`` (plain or async: a dead-letter writer,
  say) is called. Without a hook, or when the hook raises, run() stops cleanly and raises
  ``HandlerFailedError``.
- A handler that raises its own ``CancelledError`` (it awaited something another task cancelled;
  its worker was not cancelled: processing/cancelling.py) has failed like any other, with
  ``HandlerCancelledError``. Only process_share()'s own cancellations (stop() past
  ``drain_timeout``, run() cancelled, the consumer closed) release the record and go on as such.

It needs ``share_acknowledgement_mode="explicit"`` (InvalidArgumentError otherwise): each record's
outcome is its own. A ShareProcessor runs once. ``stop()``: no new records; running handlers get
``drain_timeout`` seconds, then are cancelled (their records released); ``run()`` returns
``reason="stopped"``. ``share.close()`` from elsewhere: running handlers are cancelled at once (their
records can no longer be acknowledged; the broker released them at close), seen by a worker's
poll or within ``poll_timeout``, and ``run()`` returns ``reason="closed"``. Cancelling ``run()``
cancels every handler (each releases its record), waits for them and re-raises. A worker that ends
any other way makes run() raise, never return "stopped". Every task it starts is awaited before
run() returns or raises.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ConsumerClosedError, HandlerFailedError, IllegalStateError, InvalidArgumentError, KafkaError
from ..fetch.share.ledger import AckType
from ..fetch.share.records import ShareRecord
from .cancelling import as_failure, cancel_is_ours
from .settings import check_int_at_least, check_seconds, settings_from
from .stopping import run_until

log = logging.getLogger("aiokafka_lite.processing.share")

ShareHandler = Callable[[ShareRecord], Awaitable[Any]]
ShareFailureHook = Callable[[ShareRecord, Exception], Any]
_LEAST_STEP = 0.01  # seconds: run() looks whether the consumer was closed at least this far apart


class ShareSource(Protocol):
    """What the helper uses of a ShareConsumer (a fake in the unit tests)."""

    explicit: bool

    @property
    def closed(self) -> bool: ...

    async def poll(self, timeout: float = ..., max_records: int | None = ...) -> list[ShareRecord]: ...

    def acknowledge(self, record: ShareRecord, type: AckType | str = ...) -> None: ...

    def renewing(self, record: ShareRecord) -> AbstractContextManager[Any]: ...


@dataclass(frozen=True)
class ShareProcessSettings:
    concurrency: int = 16  # worker tasks, each with one record at a time
    max_retries: int | None = 3  # deliveries after the first before a failing record is rejected
    drain_timeout: float = 10.0  # stop(): how long running handlers may finish
    poll_timeout: float = 0.5  # each poll()'s wait: how soon a stop (or a close) is noticed

    def __post_init__(self) -> None:
        check_int_at_least("concurrency", self.concurrency, 1)
        if self.max_retries is not None:
            check_int_at_least("max_retries", self.max_retries, 0)
        for name in ("drain_timeout", "poll_timeout"):
            check_seconds(name, getattr(self, name))


@dataclass(frozen=True)
class ShareProcessResult:
    reason: str  # "stopped" (stop()) or "closed" (the consumer was closed)
    accepted: int
    released: int
    rejected: int


class ShareProcessor:
    """Runs ``handler`` on a ShareConsumer's records in ``concurrency`` worker tasks. Runs once."""

    def __init__(self, share: ShareSource, handler: ShareHandler, *, on_failure: ShareFailureHook | None = None,
                 **settings: Any) -> None:
        if not share.explicit:
            raise InvalidArgumentError("the share handler helper needs a ShareConsumer built with "
                                       "share_acknowledgement_mode='explicit'")
        self.settings = settings_from(ShareProcessSettings, settings, "process_share()")
        self._share, self._handler, self._on_failure = share, handler, on_failure
        self._stopping = asyncio.Event()  # workers take no new record
        self._wake = asyncio.Event()  # run() looks again: stop(), a failure, the consumer closed
        self._stop_called = self._running = self._used = False
        self._failure: BaseException | None = None
        self._closed = False
        self.accepted = self.released = self.rejected = 0
        self.in_progress = 0
        self.peak_in_progress = 0  # the most handlers that ran at once

    def stop(self) -> None:
        """No new records; running handlers get drain_timeout, then are cancelled."""
        self._stop_called = True
        self._stopping.set()
        self._wake.set()

    def metrics(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "released": self.released, "rejected": self.rejected,
                "in_progress": self.in_progress, "peak_in_progress": self.peak_in_progress,
                "concurrency": self.settings.concurrency, "running": self._running}

    async def run(self) -> ShareProcessResult:
        if self._used:
            raise IllegalStateError("a ShareProcessor runs once: build a new one (or call process_share() again)")
        self._used = self._running = True
        try:
            return await self._run()
        finally:
            self._running = False

    async def _run(self) -> ShareProcessResult:
        workers = [asyncio.create_task(self._worker(), name=f"aiokafka-lite share worker {i}")
                   for i in range(self.settings.concurrency)]
        try:
            await self._until_done(workers)
        finally:
            ended = [task for task in workers if task.done()]  # the rest are cancelled by us, now
            for task in workers:
                task.cancel()
            await asyncio.wait(workers)  # nothing left behind, whatever ended run()
        failure = self._failure or _unexpected_end(ended)
        if failure is not None:
            raise failure
        if not (self._closed or self._stop_called):  # never a silent stop
            raise IllegalStateError("process_share()'s workers ended, yet nobody called stop() or closed the consumer")
        return ShareProcessResult("closed" if self._closed else "stopped", self.accepted, self.released,
                                  self.rejected)

    async def _until_done(self, workers: list[asyncio.Task[None]]) -> None:
        """Until stop(), a failure, a worker's end or the consumer's close; then the drain. A closed
        consumer cuts it short: its running handlers' records can no longer be acknowledged (the
        broker released them at close), so they are cancelled at once by run()."""
        woken = asyncio.create_task(self._wake.wait())
        try:
            await self._wait([*workers, woken], None, asyncio.FIRST_COMPLETED)
            self._stopping.set()  # every worker ends after its current record
            await self._wait(workers, self.settings.drain_timeout, asyncio.ALL_COMPLETED)
        finally:
            woken.cancel()
            await asyncio.wait([woken])

    async def _wait(self, tasks: list[asyncio.Task[Any]], timeout: float | None, return_when: str) -> None:
        """asyncio.wait(), cut short once the consumer is closed (looked at every poll_timeout:
        workers busy in handlers do not poll, so none would see it)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        step = max(self.settings.poll_timeout, _LEAST_STEP)
        while not self._saw_closed():
            left = step if deadline is None else min(step, deadline - loop.time())
            if left <= 0:
                return
            done, pending = await asyncio.wait(tasks, timeout=left, return_when=return_when)
            if not pending or (done and return_when == asyncio.FIRST_COMPLETED):
                return

    def _saw_closed(self) -> bool:
        self._closed = self._closed or self._share.closed
        return self._closed

    def _closing_seen(self) -> None:
        self._closed = True
        self._wake.set()

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            self._failure = error
        self._stopping.set()
        self._wake.set()

    async def _worker(self) -> None:
        try:
            while not self._stopping.is_set():
                try:
                    records = await self._share.poll(self.settings.poll_timeout, max_records=1)
                except ConsumerClosedError:
                    self._closing_seen()
                    break
                for record in records:
                    await self._one(record)
                await asyncio.sleep(0)  # a handler that never suspends must not starve the loop
        except Exception as exc:  # the poll or the hook failed: everything stops
            self._fail(exc)

    async def _one(self, record: ShareRecord) -> None:
        self.in_progress += 1
        self.peak_in_progress = max(self.peak_in_progress, self.in_progress)
        try:
            try:
                with self._share.renewing(record):  # its lock renewed while the handler runs
                    await self._handler(record)
            except asyncio.CancelledError as exc:
                if cancel_is_ours():  # drain timeout, run() cancelled, the consumer closed
                    self._decide(record, AckType.RELEASE)
                    raise
                await self._failed(record, as_failure(exc, record))  # it awaited what another task cancelled
                return
            except Exception as exc:
                await self._failed(record, exc)
                return
            self._decide(record, AckType.ACCEPT)
        finally:
            self.in_progress -= 1

    async def _failed(self, record: ShareRecord, error: Exception) -> None:
        limit = self.settings.max_retries
        if limit is None or record.delivery_count <= limit:
            self._decide(record, AckType.RELEASE)
            return
        self._decide(record, AckType.REJECT)
        where = f"{record.topic}-{record.partition} offset {record.offset}"
        if self._on_failure is None:
            raise HandlerFailedError(f"the handler failed on the record at {where} in {record.delivery_count} "
                                     "deliveries and no on_failure hook takes it: rejected", record,
                                     record.delivery_count) from error
        try:
            outcome = self._on_failure(record, error)
            if inspect.isawaitable(outcome):
                await outcome
        except asyncio.CancelledError as exc:
            if cancel_is_ours():
                raise
            raise HandlerFailedError(f"on_failure raised CancelledError for the record at {where}", record,
                                     record.delivery_count) from as_failure(exc, record)
        except Exception as exc:
            raise HandlerFailedError(f"on_failure raised for the record at {where}", record,
                                     record.delivery_count) from exc

    def _decide(self, record: ShareRecord, kind: AckType) -> None:
        try:
            self._share.acknowledge(record, kind)
        except ConsumerClosedError:
            self._closing_seen()  # the broker releases what a closed consumer held
            return
        except KafkaError as exc:  # its lock lapsed and it was acquired again: the new delivery decides
            log.info("share handler: %s not acknowledged: %s", record[:3], exc)
            return
        if kind is AckType.ACCEPT:
            self.accepted += 1
        elif kind is AckType.RELEASE:
            self.released += 1
        else:
            self.rejected += 1


def _unexpected_end(ended: list[asyncio.Task[None]]) -> BaseException | None:
    """A worker that ended, before run() cancelled it, other than by returning: a cancellation
    process_share() did not cause, or an error its worker loop does not take. Never a silent stop."""
    for task in ended:
        if task.cancelled():
            return IllegalStateError(f"{task.get_name()} was cancelled by something other than process_share()")
        error = task.exception()
        if error is not None:
            return error
    return None


async def process_share(share: ShareSource, handler: ShareHandler, *, on_failure: ShareFailureHook | None = None,
                        stop: asyncio.Event | None = None, **settings: Any) -> ShareProcessResult:
    """Run ``handler`` on the consumer's records until ``stop`` is set or the consumer is closed.
    Settings: concurrency, max_retries, drain_timeout, poll_timeout (docs/share.md)."""
    return await run_until(ShareProcessor(share, handler, on_failure=on_failure, **settings), stop)
