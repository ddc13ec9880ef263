"""One record's handling (attempts, back-off, the failure hook) and one partition's lanes.

A lane is what must run in order: with ordering "key" a partition's records of one key, with
"partition" all of a partition's records, with "none" each record alone (a record without a key is
alone under "key" too: there is nothing to order it by). Only a lane's head record has a task, so
a slow or failing key holds back its own lane and nothing else.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field

from ..errors import HandlerFailedError, InvalidArgumentError
from ..structs import ConsumerRecord, TopicPartition
from .cancelling import as_failure, cancel_is_ours
from .progress import PartitionProgress
from .settings import FailureHook, Handler, Ordering, ProcessSettings


@dataclass
class Counts:
    processed: int = 0  # the handler succeeded
    failed: int = 0  # every attempt failed; the on_failure hook took the record
    skipped: int = 0  # finished before a restart, by the committed metadata
    retries: int = 0  # attempts after a first one
    commits: int = 0
    commit_failures: int = 0
    metadata_errors: int = 0  # committed metadata that could not be read (started at the committed offset)
    metadata_truncated: int = 0  # commits whose finished offsets did not all fit in metadata_max_bytes
    metadata_dropped: bool = False  # the broker answered a commit's metadata back empty (Tansu): said once


@dataclass
class Job:
    record: ConsumerRecord
    lane: Hashable
    partition: PartitionWork
    started: bool = False  # a handler attempt began (the revocation lets it finish, within its bound)
    started_at: float | None = None  # the loop's clock when the running attempt began (None: not running)
    warned: bool = False  # logged once as running longer than stuck_handler_warning
    cancelled: bool = False  # process() cancelled it (booked before cancel(): any other cancel is a failure)


@dataclass
class PartitionWork:
    """One assigned partition's state under process(); a new object per assignment."""

    tp: TopicPartition
    progress: PartitionProgress
    lanes: dict[Hashable, deque[ConsumerRecord]] = field(default_factory=dict)
    tasks: dict[asyncio.Task[None], Job] = field(default_factory=dict)
    closing: bool = False  # revoked, lost or stopping: no new record starts

    def unstarted(self) -> list[asyncio.Task[None]]:
        return [task for task, job in self.tasks.items() if not job.started]


def lane_of(record: ConsumerRecord, ordering: Ordering) -> Hashable:
    if ordering == "partition":
        return None
    if ordering == "none" or record.key is None:
        return ("offset", record.offset)
    try:
        hash(record.key)
    except TypeError:
        raise InvalidArgumentError(f"ordering='key' needs hashable keys; the key at offset {record.offset} "
                                   f"of {record.topic}-{record.partition} is a {type(record.key).__name__}") from None
    return ("key", record.key)


async def handle(record: ConsumerRecord, handler: Handler, on_failure: FailureHook | None,
                 settings: ProcessSettings, slots: asyncio.Semaphore, job: Job, counts: Counts) -> None:
    """Run the handler until it succeeds, or retries run out and the hook takes the record. The back-off
    sleeps hold no slot, so other lanes use it meanwhile. Raises HandlerFailedError when no hook took
    the record (or the hook raised): process() then stops."""
    attempts = 0
    error: Exception
    while True:
        async with slots:
            job.started = True
            job.started_at = asyncio.get_running_loop().time()
            attempts += 1
            try:
                outcome = handler(record)
                if not inspect.isawaitable(outcome):
                    raise _NotAwaitableError(outcome)
                await outcome
            except _NotAwaitableError as exc:
                raise InvalidArgumentError(f"the handler must be a coroutine function (async def); it returned "
                                           f"{exc.args[0]!r}") from None
            except asyncio.CancelledError as exc:
                if cancel_is_ours():
                    raise  # process() cancelled this record (drain timeout, lost partitions, the end)
                error = as_failure(exc, record)
            except Exception as exc:
                error = exc
            else:
                counts.processed += 1
                return
            finally:
                job.started_at = None
        if attempts > settings.max_retries:
            await _give_up(record, error, attempts, on_failure)
            counts.failed += 1
            return
        counts.retries += 1
        await asyncio.sleep(settings.backoff(attempts))


async def _give_up(record: ConsumerRecord, error: Exception, attempts: int, on_failure: FailureHook | None) -> None:
    where = f"{record.topic}-{record.partition} offset {record.offset}"
    if on_failure is None:
        raise HandlerFailedError(f"the handler failed {attempts} times on {where} and no on_failure hook "
                                 f"was given: {error!r}", record, attempts) from error
    try:
        result = on_failure(record, error)
        if inspect.isawaitable(result):
            await result
    except asyncio.CancelledError as exc:
        if cancel_is_ours():
            raise
        raise HandlerFailedError(f"on_failure raised CancelledError for {where} without being cancelled",
                                 record, attempts) from exc
    except Exception as exc:
        raise HandlerFailedError(f"on_failure raised for {where}: {exc!r}", record, attempts) from exc


class _NotAwaitableError(Exception):
    pass
