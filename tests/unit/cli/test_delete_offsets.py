"""`groups delete-offsets` (its usage errors are in test_groups_tools_args.py's table): the answers
of OffsetDelete and DeleteShareGroupOffsets become rows, and a failed row is exit 1 with one line
on stderr. The broker's side is tests/integration/test_cli_groups_delete_offsets.py."""

from __future__ import annotations

import io
import uuid

import pytest

from aiokafka_lite.cli import delete_offsets
from aiokafka_lite.cli.delete_offsets import DeleteResult, DeleteRow
from aiokafka_lite.cli.main import main as cli_main
from aiokafka_lite.errors import BrokerError

UNREACHABLE = ["-b", "127.0.0.1:1"]
DELETE = ["groups", "delete-offsets", "g", *UNREACHABLE]


def test_the_parsed_topics_reach_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(delete_offsets, "run_delete", lambda *a, **kw: calls.append((a, kw)) or 0)
    assert cli_main([*DELETE, "--topic", "orders:2,0", "--topic", "payments", "--format", "json"]) == 0
    assert calls == [(("g", "127.0.0.1:1", [("orders", [0, 2]), ("payments", None)]), {"output_format": "json"})]


def test_offset_delete_rows_per_partition_and_a_group_error_raises() -> None:
    body = delete_offsets.offset_delete_body("g", [])
    assert body == {"group_id": "g", "topics": []}
    answer = {"error_code": 0, "throttle_time_ms": 0, "topics": [
        {"name": "b", "partitions": [{"partition_index": 0, "error_code": 0}]},
        {"name": "a", "partitions": [{"partition_index": 1, "error_code": 86},
                                     {"partition_index": 0, "error_code": 0}]}]}
    assert delete_offsets.offset_delete_rows("g", answer) == [
        DeleteRow("a", 0), DeleteRow("a", 1, "GROUP_SUBSCRIBED_TO_TOPIC (86): a member of the group is subscribed "
                                               "to this topic (its offsets are in use)"), DeleteRow("b", 0)]
    with pytest.raises(BrokerError, match="GROUP_ID_NOT_FOUND"):
        delete_offsets.offset_delete_rows("g", {"error_code": 69, "throttle_time_ms": 0, "topics": []})


def test_share_rows_per_topic_with_the_brokers_message() -> None:
    answer = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": [
        {"topic_name": "t2", "topic_id": uuid.uuid4(), "error_code": 3,
         "error_message": "There is no offset information to delete."},
        {"topic_name": "t1", "topic_id": uuid.uuid4(), "error_code": 0, "error_message": None}]}
    rows = delete_offsets.share_delete_rows("g", answer)
    assert rows == [DeleteRow("t1", None),
                    DeleteRow("t2", None, "UNKNOWN_TOPIC_OR_PARTITION (3): There is no offset information to delete.")]
    with pytest.raises(BrokerError, match="NON_EMPTY_GROUP"):
        delete_offsets.share_delete_rows("g", {**answer, "error_code": 68, "error_message": "The group is not empty."})


def test_the_text_says_each_row_and_what_it_means() -> None:
    out = io.StringIO()
    delete_offsets.render_text(DeleteResult("g", "classic", "Stable", [DeleteRow("a", 0), DeleteRow("a", 1, "X")]), out)
    assert out.getvalue() == ("TOPIC  PARTITION  STATUS\na  0  Successful\na  1  Error: X\n"
                              "not all deleted: 1 of 2 partitions failed (see STATUS)\n")
    out = io.StringIO()
    delete_offsets.render_text(DeleteResult("g", "share", "Empty", [DeleteRow("a", None)]), out)
    assert out.getvalue() == "TOPIC  STATUS\na  Successful\ndeleted: group g will start these topics from its " \
                             "share.auto.offset.reset\n"


def test_a_failed_row_is_exit_1_with_one_line(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    async def answered(bootstrap: str, group_id: str, topics: object) -> DeleteResult:
        return DeleteResult(group_id, "consumer", "Stable", [DeleteRow("a", 0, "GROUP_SUBSCRIBED_TO_TOPIC (86)"),
                                                             DeleteRow("b", 0)])

    monkeypatch.setattr(delete_offsets, "delete_offsets", answered)
    assert delete_offsets.run_delete("g", "127.0.0.1:1", [("a", None)], output_format="text") == 1
    captured = capsys.readouterr()
    assert captured.err == ("aiokafka-lite: the offsets of 1 partition(s) of group 'g' were not deleted: "
                            "GROUP_SUBSCRIBED_TO_TOPIC (86)\n")
    assert captured.out.splitlines()[1:3] == ["a  0  Error: GROUP_SUBSCRIBED_TO_TOPIC (86)", "b  0  Successful"]
