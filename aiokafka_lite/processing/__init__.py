"""Concurrency inside a partition: key-ordered async processing with a safe commit watermark.

    from aiokafka_lite.processing import process

    async def handle(record): ...                  # one coroutine per record
    result = await process(consumer, handle, concurrency=200, ordering="key",
                           on_failure=dead_letter)  # until stop() or consumer.close()

The shape (shared with the ShareConsumer's). A *handler* is ``async def handler(record)``;
it succeeds by returning and fails by raising. A failure is retried ``max_retries`` times with
exponential back-off (``retry_backoff`` doubling up to ``retry_backoff_max``); then ``on_failure(record,
error)`` (plain or async; a dead-letter writer, say) takes the record, which then counts as done.
Without a hook, or if the hook raises, process() stops cleanly and raises ``HandlerFailedError``.
A CancelledError from a handler that process() did not cancel is such a failure too
(``HandlerCancelledError``; cancelling.py keeps the books).
The ShareConsumer's twin is ``process_share(share, handler, concurrency=...,
max_retries=..., on_failure=...)``: success acknowledges "accept", a failure "release" (the broker's
redelivery is the retry), the hook's record "reject"; ordering and the watermark have no meaning
there (the broker tracks each record).

Ordering. ``"key"``: a partition's records of one key run one at a time in offset order, different
keys in parallel (a record with no key runs alone); ``"partition"``: a partition's records in order;
``"none"``: any order. At most ``concurrency`` handlers run at once (a semaphore; back-off sleeps hold
no slot). A failing or slow key holds back only its own lane.

The watermark. Per partition, the lowest offset handed to process() and not finished; that is the
offset committed. Finished offsets above it go in the commit metadata (``metadata.py``: runs or a
bitmap, base64, at most ``metadata_max_bytes``, 4096 as Kafka's ``offset.metadata.max.bytes``; too
many are cut, which only means processing them again). After a restart or a rebalance, the next
owner reads ``committed()`` and skips the records the metadata marks finished (counted as
``skipped``). Unreadable metadata is counted (``metadata_errors``), logged once per partition, and
ignored: processing starts at the committed offset, so nothing is lost. Commits run every
``commit_interval`` (default: the consumer's ``auto_commit_interval_ms``) in a task of their own,
so polling never waits for one; each partition's commits only move forward. The consumer must be
built with ``enable_auto_commit=False`` (it would commit records still in flight): ConfigError.

Back-pressure. At most ``max_pending_records`` (default 10 x concurrency, at least 500) are held,
running or waiting; ``pressure.py`` says which partitions are paused. poll() keeps being called every
``poll_timeout`` whatever is paused, so the poll deadline (KIP-62) holds however long handlers take.

Rebalances. process() installs its own rebalance listener (``listener=`` chains the application's,
called after process() did its part). Revoked: no new record starts, records not started are
dropped, started ones get ``drain_timeout`` and are then cancelled, the watermark is committed, then
the revocation completes. Lost: their handlers are cancelled, nothing is committed. Either way the
records not finished are the next owner's (at least once).

How it ends. ``Processor.stop()``, or the ``stop`` event given to ``process()``:
no new records, in-flight ones get ``drain_timeout``, the watermark is committed, the partitions
process() paused are resumed; the result says ``reason="stopped"``. ``consumer.close()`` in another
task: close()'s revocation drains and commits as above; process() waits for that close and returns
``reason="closed"``.
Cancelling the task running process() cancels every handler, waits for them, commits nothing more
and re-raises the CancelledError. A handler failure no hook took, and any error of the consumer's
poll() other than ConsumerClosedError, ends process() the same way and is raised. However it
ends, its listener is detached (the application's given back): nothing of it is committed after.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from ..consumer.listener import ConsumerRebalanceListener
from .engine import Processor, ProcessResult
from .metadata import FinishedRanges, decode, encode
from .settings import FailureHook, Handler, ProcessSettings
from .share import ShareProcessor, ShareProcessResult, ShareProcessSettings, process_share
from .source import RecordSource
from .stopping import run_until

__all__ = ["FailureHook", "FinishedRanges", "Handler", "ProcessResult", "ProcessSettings", "Processor",
           "RecordSource", "ShareProcessResult", "ShareProcessSettings", "ShareProcessor", "decode", "encode",
           "process", "process_share"]


async def process(consumer: RecordSource, handler: Handler, *, on_failure: FailureHook | None = None,
                  listener: ConsumerRebalanceListener | None = None, topics: Iterable[str] | None = None,
                  pattern: str | None = None, stop: asyncio.Event | None = None, **settings: Any) -> ProcessResult:
    """Run ``handler`` on the consumer's records until ``stop`` is set or the consumer is closed.
    Settings: concurrency, ordering, max_pending_records, max_retries, retry_backoff,
    retry_backoff_max, drain_timeout, commit_interval, metadata_max_bytes, poll_timeout
    (docs/processing.md)."""
    processor = Processor(consumer, handler, on_failure=on_failure, listener=listener, topics=topics,
                          pattern=pattern, **settings)
    return await run_until(processor, stop)
