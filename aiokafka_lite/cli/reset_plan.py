"""What ``groups reset-offsets`` would commit, decided without I/O (as kafka-consumer-groups.sh decides it).

The caller looks up the committed offsets, the log start and end offsets and, for
``--to-datetime``, the offsets for the time; ``plan_reset`` turns them into one row per partition:

* ``--to-earliest`` / ``--to-latest``: the log start / end offset;
* ``--to-offset N``: N, clamped to [log start, log end];
* ``--shift-by N``: the committed offset + N, clamped likewise (a partition without a committed
  offset cannot be shifted: an error, as in Kafka's tool);
* ``--to-datetime``: the first offset whose timestamp is at or after the time; where no record is
  that recent, the log end (Kafka's tool says "Falling back to latest known offset").

Bad arguments (a malformed ``--topic`` or date-time) raise ``ValueError`` with a one-line message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..structs import TopicPartition

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MODES = ("to-earliest", "to-latest", "to-datetime", "shift-by", "to-offset")


@dataclass(frozen=True)
class ResetMode:
    """One of ``MODES``; ``value`` is N for to-offset and shift-by, milliseconds since the epoch for to-datetime."""

    name: str
    value: int | None = None

    @property
    def needs_committed(self) -> bool:
        return self.name == "shift-by"

    @property
    def needs_start(self) -> bool:
        return self.name in ("to-earliest", "to-offset", "shift-by")

    @property
    def needs_end(self) -> bool:
        return self.name != "to-earliest"


@dataclass(frozen=True)
class PlanRow:
    topic: str
    partition: int
    current: int | None  # the committed offset; None: nothing committed
    new: int
    clamped: bool = False  # the offset asked for lay outside [log start, log end]


def parse_datetime(text: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 date-time; without a zone it is UTC (as in Kafka's tool)."""
    try:
        if "T" not in text.upper():
            raise ValueError
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--to-datetime {text!r} is not an ISO 8601 date-time such as 2026-11-27T09:30:00 "
                         "or 2026-11-27T09:30:00.000+01:00 (no zone: UTC)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    millis = (moment - _EPOCH) // timedelta(milliseconds=1)  # exact: no float rounding
    if millis < 0:
        raise ValueError(f"--to-datetime {text!r} is before 1970-01-01T00:00:00Z")
    return millis


def parse_topic(text: str) -> tuple[str, list[int] | None]:
    """``T`` (every partition) or ``T:0,2`` (those partitions), as kafka-consumer-groups.sh's --topic."""
    topic, sep, partitions = text.partition(":")
    if not topic:
        raise ValueError(f"--topic {text!r} names no topic (TOPIC or TOPIC:0,2)")
    if not sep:
        return topic, None
    numbers: list[int] = []
    for item in partitions.split(","):
        item = item.strip()
        if not item.isdigit():
            raise ValueError(f"--topic {text!r}: {item!r} is not a partition number (TOPIC or TOPIC:0,2)")
        numbers.append(int(item))
    return topic, sorted(set(numbers))


def _clamp(offset: int, start: int, end: int) -> tuple[int, bool]:
    if offset > end:
        return end, True
    if offset < start:
        return start, True
    return offset, False


def _target(mode: ResetMode, tp: TopicPartition, committed: Mapping[TopicPartition, int],
            starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int],
            by_time: Mapping[TopicPartition, int | None]) -> tuple[int, bool]:
    if mode.name == "to-earliest":
        return starts[tp], False
    if mode.name == "to-latest":
        return ends[tp], False
    if mode.name == "to-datetime":
        found = by_time.get(tp)
        return (ends[tp] if found is None else found), False
    assert mode.value is not None
    if mode.name == "to-offset":
        return _clamp(mode.value, starts[tp], ends[tp])
    if tp not in committed:
        raise ValueError(f"cannot shift {tp.topic}-{tp.partition}: the group has no committed offset for it")
    return _clamp(committed[tp] + mode.value, starts[tp], ends[tp])


def plan_reset(mode: ResetMode, partitions: list[TopicPartition], committed: Mapping[TopicPartition, int],
               starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int],
               by_time: Mapping[TopicPartition, int | None] | None = None) -> list[PlanRow]:
    """One row per partition, sorted; ``by_time``: the offset for the time (None: no record that recent)."""
    rows = []
    for tp in sorted(partitions):
        new, clamped = _target(mode, tp, committed, starts, ends, by_time or {})
        rows.append(PlanRow(tp.topic, tp.partition, committed.get(tp), new, clamped))
    return rows
