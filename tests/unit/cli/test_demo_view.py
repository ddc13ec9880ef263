"""`aiokafka-lite demo`'s views: what a member's row shows and how the live table fits a terminal."""

from __future__ import annotations

from typing import Any, cast

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.cli.demo_view import MemberRow, PlainView, member_row
from aiokafka_lite.errors import ConsumerClosedError

rich_console = pytest.importorskip("rich.console")


class ConsumerFigures:
    """Stands in for a Consumer: the two calls a member row reads."""

    def __init__(self, metrics: dict[str, Any], assignment: set[TopicPartition]) -> None:
        self._metrics, self._assignment = metrics, assignment

    def metrics(self) -> dict[str, Any]:
        return self._metrics

    def assignment(self) -> set[TopicPartition]:
        return self._assignment


def row(state: str, partitions: list[int]) -> MemberRow:
    figures = {"group_state": state, "generation_id": 3, "heartbeats_sent": 12, "seconds_since_last_poll": 3.4}
    consumer = ConsumerFigures(figures, {TopicPartition("demo-orders", p) for p in partitions})
    return member_row("A", cast(Consumer, consumer), polling=False, consumed=40)


def render(rows: list[MemberRow], width: int) -> str:
    from aiokafka_lite.cli.demo_view import member_table

    console = rich_console.Console(record=True, width=width, color_system=None)
    console.print(member_table(rows))
    return str(console.export_text())


def test_a_member_out_of_the_group_shows_no_partitions():
    # After its watchdog left the group, A's assignment() still lists what it held until the next
    # poll() revokes it; the group no longer gives it those partitions.
    for state in ("UNJOINED", "LEAVING", "FAILED"):
        assert row(state, [0, 1]).partitions == "-", state
    assert row("STABLE", [1, 0]).partitions == "0,1"


def test_a_closed_member_shows_closed_and_no_partitions():
    class ClosedConsumer(ConsumerFigures):
        def assignment(self) -> set[TopicPartition]:
            raise ConsumerClosedError("the consumer is closed")

    figures = {"closed": True, "group_state": "STABLE", "generation_id": 2, "heartbeats_sent": 31}
    closed = member_row("B", cast(Consumer, ClosedConsumer(figures, set())), polling=False, consumed=5000)
    assert (closed.state, closed.partitions) == ("CLOSED", "-")


def test_an_unjoined_member_in_the_live_table_has_no_partitions():
    text = render([row("STABLE", [2, 3]), row("UNJOINED", [0, 1])], width=120)
    unjoined = next(line for line in text.splitlines() if "UNJOINED" in line)
    assert "0,1" not in unjoined
    assert "│ - " in unjoined


def test_the_live_table_headers_are_whole_at_80_columns():
    from aiokafka_lite.cli.demo_view import member_table

    # The widest values the demo shows: every state name, all four partitions, a long idle time.
    widest = [MemberRow("A", "UNJOINED", 123, "0,1,2,3", 99999, 123.4, False, 10000),
              MemberRow("B", "STABLE", -1, "-", 0, None, True, 0)]
    text = render(widest, width=80)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert "…" not in text, text
    headers = [str(column.header) for column in member_table(widest).columns]
    header_line = next(line for line in lines if "member" in line)
    cells = [cell.strip() for cell in header_line.strip("┃ ").split("┃")]
    assert cells == headers, text
    a_line = next(line for line in lines if "│ A " in line)
    for value in ("UNJOINED", "123", "0,1,2,3", "99999", "123.4 s", "stopped", "10000"):
        assert value in a_line, text


def test_the_plain_view_says_an_unjoined_member_has_no_partitions(capsys: pytest.CaptureFixture[str]):
    PlainView().refresh([row("UNJOINED", [0, 1])])
    assert "UNJOINED generation 3, partitions [-]" in capsys.readouterr().out
