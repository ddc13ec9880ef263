"""The consumer's commits: the offsets a call asks for, the queue every commit goes through (in
the order made: commit_order), one commit's sending (bound to the generation it is first sent in,
retried over connection errors), and the future commit_async() hands out."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from .._net.backoff import Backoff
from ..config import ConsumerConfig
from ..errors import ConsumerClosedError, InvalidArgumentError, KafkaConnectionError, KafkaError, KafkaTimeoutError
from ..group.member import GroupMember, generation_moved
from ..liveness.deadlines import bounded
from ..structs import OffsetAndMetadata, TopicPartition
from .commit_order import CommitQueue
from .metrics import CommitFigures
from .observers import ConsumerObservers

log = logging.getLogger("aiokafka_lite.consumer")
T = TypeVar("T")


def offsets_arg(offsets: Mapping[TopicPartition, OffsetAndMetadata | int]) -> dict[TopicPartition, OffsetAndMetadata]:
    """The offsets a commit call was given; an int is an offset without metadata."""
    result = {}
    for tp, value in offsets.items():
        if not isinstance(tp, TopicPartition):
            raise InvalidArgumentError(f"commit() keys must be TopicPartition, got {tp!r}")
        om = OffsetAndMetadata(value) if isinstance(value, int) else value
        if not isinstance(om, OffsetAndMetadata) or om.offset < 0:
            raise InvalidArgumentError(f"invalid offset {value!r} for {tp}")
        result[tp] = om
    return result


class Commits:
    """Every commit the consumer makes, sent by the group member `member()` gives once the
    consumer is `ready()`; `standalone()`: sent as a consumer that is no group member."""

    def __init__(self, config: ConsumerConfig, member: Callable[[], GroupMember],
                 ready: Callable[[], Awaitable[None]], standalone: Callable[[], bool],
                 forcing_close: Callable[[], bool], observers: ConsumerObservers) -> None:
        self._config = config
        self._observers = observers
        self._member = member
        self._ready = ready
        self._standalone = standalone
        self._forcing_close = forcing_close
        self._queue = CommitQueue()
        self.figures = CommitFigures()

    def submit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], limit: float | None) -> asyncio.Task[None]:
        """A commit of the application's, behind every earlier one; `limit` bounds it once it runs."""
        async def send() -> None:
            # No open check here: a commit made before close() still lands (close drains them).
            async def ready_then_send() -> None:
                await self._ready()
                await self._send(offsets)
            await bounded(ready_then_send(), limit, "commit")
        return self._queue.submit(send)

    def submit_own(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> asyncio.Task[None]:
        """The consumer's own commits (auto-commit, before a rebalance, at close), in the same
        order as the user's; they run while the consumer is started (or closing). Bounded by
        default_api_timeout_ms once they run (Java's commitSync bound): none holds the queue,
        and every commit behind it, for ever."""
        return self._queue.submit(lambda: bounded(self._send(offsets), self._config.default_api_timeout,
                                                  "auto-commit"))

    async def drain(self) -> None:
        await self._queue.drain()

    def pending(self) -> list[asyncio.Task[None]]:
        return self._queue.pending()

    async def committed(self, member: GroupMember, tps: list[TopicPartition]
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The offsets committed for `tps` (committed()), asked again after a connection error."""
        result: dict[TopicPartition, OffsetAndMetadata | None] = await self.retry(
            lambda: member.fetch_committed(tps, None))
        return result

    async def retry(self, call: Callable[[], Awaitable[T]]) -> T:
        return await retry_on_connection(call, self._config, self._forcing_close)

    async def _send(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        member = self._member()
        if not offsets:
            return
        started = time.monotonic()
        try:
            with self._observers.commit(offsets):
                await send_commit(member, offsets, self._standalone(), self.retry)
        except BaseException:
            self.figures.failed()  # cancelled (a lapsed timeout, close) or failed; re-raised
            raise
        self.figures.completed(time.monotonic() - started)


async def send_commit(member: GroupMember, offsets: Mapping[TopicPartition, OffsetAndMetadata], standalone: bool,
                      retry: Callable[[Callable[[], Awaitable[None]]], Awaitable[None]]) -> None:
    """One commit, retried by `retry`. `standalone`: as a consumer that assigned its partitions
    by hand, which is no group member (generation -1, no member id), as in Java."""
    # Bound to the generation it is first sent in: a retry after the member lost it and
    # rejoined would commit old offsets in the new one (a zombie commit).
    sent_in = member.commit_generation()

    async def attempt() -> None:
        if not standalone and member.commit_generation() != sent_in:
            raise generation_moved(member.group_id)
        await member.commit(offsets, None, standalone=standalone)
    await retry(attempt)


async def retry_on_connection(call: Callable[[], Awaitable[T]], config: ConsumerConfig,
                              forcing_close: Callable[[], bool]) -> T:
    """`call` again after each connection error or request timeout, with backoff, until it
    succeeds or the caller's deadline ends it; the forced part of close() ends it at once."""
    backoff = Backoff(config.retry_backoff, config.retry_backoff_max)
    while True:
        try:
            return await call()
        except (KafkaConnectionError, KafkaTimeoutError) as exc:  # one request's; `bounded` ends the call
            if forcing_close():
                raise ConsumerClosedError("the consumer was closed") from exc
            # The connection's own failure log has said it; here only the retry.
            backoff.failed(time.monotonic())
            log.debug("retrying after a connection error: %s", exc)
            await asyncio.sleep(backoff.delay())


def retrieve_outcome(fut: asyncio.Future[None]) -> None:
    """A background commit's error goes to its future and callback; logged here for people."""
    if not fut.cancelled() and fut.exception() is not None:
        log.info("commit_async failed: %s", fut.exception())


def outcome_of(commit: asyncio.Task[None]) -> asyncio.Future[None]:
    """The future commit_async() hands out. close() cancels the commit task; the caller's future
    then fails with ConsumerClosedError rather than being cancelled itself (a CancelledError
    would reach a task that was not cancelled). Cancelling the future cancels the commit."""
    outcome: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def commit_done(task: asyncio.Task[None]) -> None:
        if outcome.done():
            return
        if task.cancelled():
            # Its OffsetCommit may already have been sent: the broker may have applied it or not.
            outcome.set_exception(ConsumerClosedError(
                "the consumer was closed before the commit completed (if its request was already "
                "sent, the broker may still have stored the offsets)"))
        elif task.exception() is not None:
            outcome.set_exception(task.exception())  # type: ignore[arg-type]
        else:
            outcome.set_result(None)

    def outcome_done(fut: asyncio.Future[None]) -> None:
        if fut.cancelled():
            commit.cancel()

    commit.add_done_callback(commit_done)
    outcome.add_done_callback(outcome_done)
    return outcome


def commit_error(outcome: asyncio.Future[None]) -> BaseException | None:
    """What a commit_async callback is told: None only for a commit that completed."""
    if outcome.cancelled():
        return KafkaError("the commit was cancelled before it completed")
    return outcome.exception()

