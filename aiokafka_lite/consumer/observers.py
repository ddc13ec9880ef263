"""What instrumentation outside the core (aiokafka_lite.otel) may watch of a consumer: its polls.

``consumer.observers.add(observer)`` registers a ``PollObserver``; each ``poll()`` that goes to
the fetcher (``async for`` polls too) then tells it when it ended, with the records it returned or
the error it raised. A consumer nothing observes pays one method call and an empty check per
poll: no clock is read and nothing is allocated. An observer that raises does not break the
poll: the error is logged (WARNING once per observer, then DEBUG)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Protocol

from ..structs import ConsumerRecords

log = logging.getLogger("aiokafka_lite.consumer")


class PollObserver(Protocol):
    def poll_ended(self, started_ns: int, ended_ns: int, records: ConsumerRecords | None,
                   error: BaseException | None) -> None:
        """One poll() ended: `records` it returned (empty when it timed out) or the `error` it
        raised (then `records` is None); times are time.time_ns(). Not called when the poll
        was cancelled. Runs in the poll's task, before the records reach the caller."""


class _Unobserved:
    """The poll() scope of a consumer nothing observes."""

    def __enter__(self) -> _Unobserved:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def got(self, records: ConsumerRecords) -> ConsumerRecords:
        return records


_UNOBSERVED = _Unobserved()


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
        self._observers.tell(self._started_ns, time.time_ns(), None if exc is not None else self._records, exc)


class ConsumerObservers:
    """The observers of one consumer (``Consumer.observers``); empty unless instrumentation added one."""

    def __init__(self) -> None:
        self._observers: tuple[PollObserver, ...] = ()
        self._failed: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self._observers)

    def __iter__(self) -> Iterator[PollObserver]:
        return iter(self._observers)

    def add(self, observer: PollObserver) -> None:
        if observer not in self._observers:
            self._observers = (*self._observers, observer)

    def discard(self, observer: PollObserver) -> None:
        self._observers = tuple(o for o in self._observers if o is not observer)

    def poll(self) -> _ObservedPoll | _Unobserved:
        """The scope of one poll(): ``with observers.poll() as seen: ... return seen.got(records)``."""
        return _ObservedPoll(self) if self._observers else _UNOBSERVED

    def tell(self, started_ns: int, ended_ns: int, records: ConsumerRecords | None,
             error: BaseException | None) -> None:
        for observer in self._observers:
            try:
                observer.poll_ended(started_ns, ended_ns, records, error)
            except Exception:
                first = id(observer) not in self._failed
                self._failed.add(id(observer))
                log.log(logging.WARNING if first else logging.DEBUG, "poll observer %r failed; the poll goes on",
                        observer, exc_info=True)
