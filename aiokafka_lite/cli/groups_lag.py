"""`aiokafka-lite groups lag GROUP`: per partition the committed offset, the log-end offset and the
lag (end - committed), and the group's total: the figures of kafka-consumer-groups.sh --describe's
CURRENT-OFFSET, LOG-END-OFFSET and LAG columns, taken from ``groups describe``'s lookup. For a
share group (KIP-932): each partition's start offset and lag, as kafka-share-groups.sh --describe
--offsets shows them (``share_groups``)."""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from .groups import NOT_REPORTED, GroupView, describe_group
from .run import EXIT_OK, CommandFailed, run_step_command
from .share_groups import write_view


def _offset_notes(view: GroupView) -> list[str]:
    # Only the notes about END and LAG: what describe says of members does not concern lag.
    return [note for note in view.notes if not note.startswith(NOT_REPORTED)]


def total_lag(view: GroupView) -> int:
    """The sum of the partitions' lags that are known (a partition with nothing committed has none)."""
    return sum(p.lag for p in view.partitions if p.lag is not None)


def lag_json(view: GroupView) -> dict[str, Any]:
    return {"group_id": view.group_id, "group_type": view.group_type, "state": view.state,
            "members": len(view.members), "total_lag": total_lag(view), "notes": _offset_notes(view),
            "partitions": [{"topic": p.topic, "partition": p.partition, "committed": p.committed,
                            "end": p.end, "lag": p.lag} for p in view.partitions]}


def _shown(value: int | None) -> str:
    return "-" if value is None else str(value)


def render_text(view: GroupView, out: TextIO) -> None:
    notes = _offset_notes(view)
    star = "*" if notes else ""
    out.write(f"TOPIC  PARTITION  COMMITTED  END{star}  LAG{star}\n")
    for p in view.partitions:
        out.write(f"{p.topic}  {p.partition}  {_shown(p.committed)}  {_shown(p.end)}  {_shown(p.lag)}\n")
    out.write(f"TOTAL LAG{star}  {total_lag(view)}  (group {view.group_id}, state {view.state}, "
              f"{len(view.members)} member(s))\n")
    for note in notes:
        out.write(f"* {note}\n")


def run_lag(group_id: str, bootstrap: str, *, output_format: str) -> int:
    async def work() -> int:
        view = await describe_group(bootstrap, group_id)
        if view.share is not None:
            write_view(view.share, output_format, lag=True)
            return EXIT_OK
        if not view.exists:
            raise CommandFailed(f"group {group_id!r} does not exist")
        if output_format == "json":
            sys.stdout.write(json.dumps(lag_json(view), indent=2) + "\n")
        else:
            render_text(view, sys.stdout)
        return EXIT_OK

    return run_step_command(f"looking up the lag of group {group_id!r}", work)
