"""What instrumentation outside the core (aiokafka_lite.otel) may watch of a consumer: its polls
and its commits.

``consumer.observers.add(observer)`` registers a ``ConsumerObserver``; each ``poll()`` that goes
to the fetcher (``async for`` polls too) then tells it when it ended, with the records it returned
or the error it raised, and each commit sent (the application's and the consumer's own:
auto-commit, before a rebalance, at close) with its offsets and outcome. A consumer nothing
observes pays one method call and an empty check per poll or commit: no clock is read and nothing
is allocated. An observer that raises breaks neither: the error is logged (WARNING once per
observer, then DEBUG)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Protocol

from ..structs import ConsumerRecords, OffsetAndMetadata, TopicPartition

log = logging.getLogger("aiokafka_lite.consumer")


class ConsumerObserver(Protocol):
    def poll_ended(self, started_ns: int, ended_ns: int, records: ConsumerRecords | None,
                   error: BaseException | None) -> None:
        """One poll() ended: `records` it returned (empty when it timed out) or the `error` it
        raised (then `records` is None); times are time.time_ns(). Not called when the poll
        was cancelled. Runs in the poll's task, before the records reach the caller."""

    def commit_ended(self, started_ns: int, ended_ns: int, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     error: BaseException | None) -> None:
        """One commit of `offsets` ended (retries included), with `error` if it failed; not
        called when it was cancelled. Runs in the commit's task (its context is the one the
        commit was made in)."""


class _Unobserved:
    """The poll() scope of a consumer nothing observes."""

    def __enter__(self) -> _Unobserved:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def got(self, records: ConsumerRecords) -> ConsumerRecords:
        return records


_UNOBSERVED = _Unobserved()


class _ObservedCommit:
    def __init__(self, observers: ConsumerObservers, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        self._observers = observers
        self._offsets = offsets
        self._started_ns = 0

    def __enter__(self) -> _ObservedCommit:
        self._started_ns = time.time_ns()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None or issubclass(exc_type, Exception):  # not when cancelled
            ended_ns = time.time_ns()
            self._observers.tell(lambda o: o.commit_ended(self._started_ns, ended_ns, self._offsets, exc))


class _ObservedPoll:
    """One observed poll(): its start, what it returned, and the observers told at its end."""

    def __init__(self, observers: ConsumerObservers) -> None:
        self._observers = observers
        self._records = ConsumerRecords()
        self._started_ns = 0

    def __enter__(self) -> _ObservedPoll:
        self._started_ns = time.time_ns()
        return self

    def got(self, records: ConsumerRecords) -> ConsumerRecords:
        self._records = records
        return records

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None and not issubclass(exc_type, Exception):
            return  # cancelled (or exiting): not an outcome of the poll
        ended_ns, records = time.time_ns(), None if exc is not None else self._records
        self._observers.tell(lambda o: o.poll_ended(self._started_ns, ended_ns, records, exc))


class ConsumerObservers:
    """The observers of one consumer (``Consumer.observers``); empty unless instrumentation added one."""

    def __init__(self) -> None:
        self._observers: tuple[ConsumerObserver, ...] = ()
        self._failed: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self._observers)

    def __iter__(self) -> Iterator[ConsumerObserver]:
        return iter(self._observers)

    def add(self, observer: ConsumerObserver) -> None:
        if observer not in self._observers:
            self._observers = (*self._observers, observer)

    def discard(self, observer: ConsumerObserver) -> None:
        self._observers = tuple(o for o in self._observers if o is not observer)

    def poll(self) -> _ObservedPoll | _Unobserved:
        """The scope of one poll(): ``with observers.poll() as seen: ... return seen.got(records)``."""
        return _ObservedPoll(self) if self._observers else _UNOBSERVED

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> _ObservedCommit | _Unobserved:
        """The scope of one commit's sending: ``with observers.commit(offsets): ...``."""
        return _ObservedCommit(self, offsets) if self._observers else _UNOBSERVED

    def tell(self, call: Callable[[ConsumerObserver], None]) -> None:
        for observer in self._observers:
            try:
                call(observer)
            except Exception:
                first = id(observer) not in self._failed
                self._failed.add(id(observer))
                log.log(logging.WARNING if first else logging.DEBUG,
                        "consumer observer %r failed; the consumer goes on", observer, exc_info=True)
