"""What `aiokafka-lite demo` shows: a live table (rich, on a terminal) or plain timestamped lines.

Both views take the same two calls: ``event(text)`` for a step of the story and ``refresh(rows)``
with one :class:`MemberRow` per member, read from ``consumer.metrics()``.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from .. import Consumer, TopicPartition


@dataclass(frozen=True)
class MemberRow:
    name: str
    state: str
    generation: int | None
    partitions: str
    heartbeats: int
    seconds_since_poll: float | None
    polling: bool
    consumed: int


# States in which a member holds no partitions in the group, whatever its assignment() still
# lists (after a poll-deadline lapse the consumer keeps it until the next poll() revokes it).
NOT_A_MEMBER = frozenset({"UNJOINED", "LEAVING", "FAILED", "CLOSED"})


def member_row(name: str, consumer: Consumer, *, polling: bool, consumed: int) -> MemberRow:
    figures = consumer.metrics()
    # assignment() of a closed consumer raises ConsumerClosedError; a closed member owns nothing.
    assignment = set() if figures.get("closed") else consumer.assignment()
    return row_of(name, figures, assignment, polling=polling, consumed=consumed)


def row_of(name: str, m: dict[str, Any], assignment: Iterable[TopicPartition], *, polling: bool,
           consumed: int) -> MemberRow:
    """A member's row from its ``metrics()`` snapshot and ``assignment()``."""
    state = "CLOSED" if m.get("closed") else str(m.get("group_state", "?"))
    owned = [] if state in NOT_A_MEMBER else sorted(assignment)
    partitions = ",".join(str(tp.partition) for tp in owned) or "-"
    return MemberRow(name, state, m.get("generation_id"), partitions, int(m.get("heartbeats_sent") or 0),
                     m.get("seconds_since_last_poll"), polling, consumed)


def _clock() -> str:
    return time.strftime("%H:%M:%S")


class DemoView(Protocol):
    refresh_seconds: float

    def event(self, text: str) -> None: ...

    def refresh(self, rows: list[MemberRow]) -> None: ...

    def log_handler(self) -> logging.Handler: ...

    def close(self) -> None: ...


class PlainView:
    """Timestamped lines; one status line per member group each second. For logs and pipes."""

    refresh_seconds = 1.0

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def event(self, text: str) -> None:
        self.out.write(f"[{_clock()}] {text}\n")
        self.out.flush()

    def refresh(self, rows: list[MemberRow]) -> None:
        self.event("   " + " | ".join(_status(row) for row in rows))

    def log_handler(self) -> logging.Handler:
        handler = logging.StreamHandler(self.out)
        handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(message)s", datefmt="%H:%M:%S"))
        return handler

    def close(self) -> None:
        self.out.flush()


def _status(row: MemberRow) -> str:
    return (f"{row.name}: {row.state:8} generation {row.generation}, partitions [{row.partitions}], "
            f"heartbeats {row.heartbeats}")


class LiveView:
    """A rich Live table of the members, redrawn in place, with the story's steps printed above it."""

    refresh_seconds = 0.25

    def __init__(self, force_terminal: bool | None = None) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(force_terminal=force_terminal)
        self.live = Live(console=self.console, refresh_per_second=8, transient=False)
        self.live.start()

    def event(self, text: str) -> None:
        self.console.print(f"[dim]{_clock()}[/dim] {text}", highlight=False)

    def refresh(self, rows: list[MemberRow]) -> None:
        self.live.update(member_table(rows))

    def log_handler(self) -> logging.Handler:
        from rich.logging import RichHandler

        return RichHandler(console=self.console, show_path=False)

    def close(self) -> None:
        self.live.stop()


COLUMNS = ("member", "state", "gen", "partitions", "beats", "last poll", "polling", "records")


def member_table(rows: list[MemberRow]) -> Any:
    from rich.table import Table

    table = Table(title="consumer group demo-billing", title_justify="left")
    # Headers stay whole at 80 columns: the widest values (UNJOINED, 0,1,2,3, "123.4 s") fit under them.
    for column in COLUMNS:
        table.add_column(column, justify="right" if column in {"gen", "beats", "records"} else "left",
                         no_wrap=True, min_width=len(column))
    for row in rows:
        since = "-" if row.seconds_since_poll is None else f"{row.seconds_since_poll:5.1f} s"
        colour = {"STABLE": "green", "JOINING": "yellow", "SYNCING": "yellow"}.get(row.state, "red")
        table.add_row(row.name, f"[{colour}]{row.state}[/{colour}]", str(row.generation), row.partitions,
                      str(row.heartbeats), since, "yes" if row.polling else "[red]stopped[/red]", str(row.consumed))
    return table


def make_view(kind: str) -> DemoView:
    """``live``, ``plain``, or ``auto``: live when stdout is a terminal and rich is installed."""
    if kind == "plain":
        return PlainView()
    try:
        import rich  # noqa: F401
    except ImportError:
        if kind == "live":
            print("the live view needs rich: pip install '.[cli]' in the aiokafka-lite clone; showing plain lines",
                  file=sys.stderr)
        return PlainView()
    if kind == "live":
        return LiveView(force_terminal=True)
    return LiveView() if sys.stdout.isatty() else PlainView()
