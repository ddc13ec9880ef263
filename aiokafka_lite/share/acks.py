"""Small parts of the ShareConsumer: acknowledge types by name, the per-record blocks that keep the
record's lock while they run and acknowledge by outcome, the counts metrics() shows, and the
deserializers applied at hand-out."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass, field, fields
from operator import itemgetter
from typing import Any, NamedTuple, Protocol

from ..config import Deserializer
from ..errors import InvalidArgumentError, KafkaError, RecordDeserializationError
from ..fetch.share.fetcher import AckResults
from ..fetch.share.ledger import AckType
from ..fetch.share.records import ShareRecord
from ..structs import TopicPartition


class Acknowledger(Protocol):
    """What Acknowledging needs of the ShareConsumer."""

    @property
    def closed(self) -> bool: ...

    def holds(self, record: ShareRecord) -> bool: ...

    def acknowledge(self, record: ShareRecord, type: AckType | str = ...) -> None: ...


class LockKeeper(Protocol):
    """What Renewing needs of the share fetcher (fetch/share/fetcher.py ShareFetcher)."""

    def keep_locked(self, record: ShareRecord) -> None: ...

    def release_lock(self, record: ShareRecord) -> None: ...


_BY_NAME = {"accept": AckType.ACCEPT, "release": AckType.RELEASE, "reject": AckType.REJECT,
            "renew": AckType.RENEW}


def ack_type_of(value: AckType | str) -> AckType:
    """"accept" | "release" | "reject" | "renew" (any case), or an AckType other than GAP."""
    kind = _BY_NAME.get(value) if type(value) is str else None  # the common case, without a copy
    if kind is not None:
        return kind
    if isinstance(value, AckType) and value is not AckType.GAP:
        return value
    if isinstance(value, str) and value.strip().lower() in _BY_NAME:
        return _BY_NAME[value.strip().lower()]
    raise InvalidArgumentError(f"acknowledge type must be one of {', '.join(_BY_NAME)}, got {value!r}")


class Renewing:
    """One record's block that keeps its acquisition lock while it runs (KIP-1222 RENEW, sent by the
    fetcher before the lock lapses, for at most share_lock_renewal_max_ms). ``keeper`` None: nothing
    to keep (the record is no longer this consumer's, or the consumer is closed)."""

    def __init__(self, keeper: LockKeeper | None, record: ShareRecord) -> None:
        self._keeper, self.record = keeper, record

    def __enter__(self) -> ShareRecord:
        if self._keeper is not None:
            self._keeper.keep_locked(self.record)
        return self.record

    def __exit__(self, *exc: object) -> None:
        if self._keeper is not None:
            self._keeper.release_lock(self.record)

    async def __aenter__(self) -> ShareRecord:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__()


class Acknowledging:
    """One record's block: its lock kept while it runs (``renewing``); accepted when it ends
    normally, released when it raises (a cancellation included, which then goes on). An
    acknowledge() inside the block wins."""

    def __init__(self, share: Acknowledger, record: ShareRecord, renewing: Renewing) -> None:
        self._share, self.record, self._renewing = share, record, renewing

    def __enter__(self) -> ShareRecord:
        return self._renewing.__enter__()

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self._renewing.__exit__()
        if self._share.closed or not self._share.holds(self.record):
            return  # acknowledged inside the block, or closed (the broker releases what it held)
        if exc_type is None:
            self._share.acknowledge(self.record, AckType.ACCEPT)
            return
        with contextlib.suppress(KafkaError):  # the block's own exception (or cancellation) goes on
            self._share.acknowledge(self.record, AckType.RELEASE)

    async def __aenter__(self) -> ShareRecord:
        return self.__enter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.__exit__(exc_type)


# The delivery counts metrics() buckets records by: each one up to 10, the most a share group's
# delivery count limit (group.share.delivery.count.limit, default 5) may be unless the broker's
# group.share.max.delivery.count.limit (default 10) is raised; more are in +Inf only.
DELIVERY_COUNT_BOUNDS = tuple(range(1, 11))
_DELIVERY_COUNT = itemgetter(ShareRecord._fields.index("delivery_count"))


@dataclass
class AckCounts:
    handed_out: int = 0
    accepted: int = 0
    released: int = 0
    rejected: int = 0
    renewed: int = 0
    commits: int = 0
    acknowledgement_errors: int = 0  # partitions whose acknowledgements the broker refused
    deliveries: Counter[int] = field(default_factory=Counter)  # delivery count -> records handed out

    def handed(self, records: list[ShareRecord]) -> None:
        """``records`` were handed out: counted, and by their delivery count."""
        self.handed_out += len(records)
        self.deliveries.update(map(_DELIVERY_COUNT, records))

    def count(self, kind: AckType, records: int = 1) -> None:
        if kind is AckType.ACCEPT:
            self.accepted += records
        elif kind is AckType.RELEASE:
            self.released += records
        elif kind is AckType.REJECT:
            self.rejected += records
        elif kind is AckType.RENEW:
            self.renewed += records

    def results(self, results: AckResults) -> None:
        self.acknowledgement_errors += sum(1 for error in results.values() if error is not None)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {f"records_{f.name}" if f.name == "handed_out" else f.name: getattr(self, f.name)
                               for f in fields(self) if f.name != "deliveries"}
        out["delivery_counts"] = self.delivery_counts()
        return out

    def delivery_counts(self) -> dict[str, Any]:
        """The records handed out by delivery count, as a histogram: ``{"count": n, "sum": deliveries,
        "buckets": [[1, records delivered once], [2, at most twice], ...]}`` (cumulative, to 10)."""
        buckets, seen = [], 0
        for bound in DELIVERY_COUNT_BOUNDS:
            seen += self.deliveries.get(bound, 0)
            buckets.append([bound, seen])
        return {"count": self.handed_out, "sum": sum(k * n for k, n in self.deliveries.items()), "buckets": buckets}


class Deserialized(NamedTuple):
    good: list[ShareRecord]  # deserialized, up to the first bad record
    error: RecordDeserializationError | None  # the first bad record's
    bad: ShareRecord | None
    behind: list[ShareRecord]  # after the bad record: not deserialized yet


def deserialize(records: list[ShareRecord], key_deserializer: Deserializer | None,
                value_deserializer: Deserializer | None) -> Deserialized:
    """The records with their keys and values deserialized, up to the first a deserializer fails
    on; then that error, that record, and the records behind it (left as they came)."""
    if key_deserializer is None and value_deserializer is None:
        return Deserialized(records, None, None, [])
    out: list[ShareRecord] = []
    for i, r in enumerate(records):
        origin = "key"
        try:
            key = r.key if key_deserializer is None else key_deserializer(r.key)
            origin = "value"
            value = r.value if value_deserializer is None else value_deserializer(r.value)
        except (Exception, asyncio.CancelledError) as exc:  # plain code nothing cancels: its own failure
            error = RecordDeserializationError(TopicPartition(r.topic, r.partition), r.offset, origin, r.key,
                                               r.value, r.timestamp, r.timestamp_type, r.headers, r.leader_epoch,
                                               exc)
            error.args = (f"cannot deserialize the {origin} of the record at offset {r.offset} of "
                          f"{r.topic}-{r.partition} ({type(exc).__name__}: {exc}); it alone was released "
                          "(delivered again until group.share.delivery.count.limit, then archived)",)
            return Deserialized(out, error, r, records[i + 1:])
        out.append(r._replace(key=key, value=value))
    return Deserialized(out, None, None, [])

