"""`groups list | lag | reset-offsets`: usage errors are one line and exit 2 before anything connects
(the -b given refuses connections, so connecting would take the 30 s timeout); failures while running
are one line and exit 1; the options reach the command as parsed."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from aiokafka_lite.cli import group_admin, reset_offsets
from aiokafka_lite.cli.group_members import GroupMembers
from aiokafka_lite.cli.main import main as cli_main
from aiokafka_lite.cli.reset_plan import PlanRow, ResetMode
from aiokafka_lite.cli.run import CommandFailed
from aiokafka_lite.errors import BrokerError
from aiokafka_lite.structs import TopicPartition

UNREACHABLE = ["-b", "127.0.0.1:1"]
RESET = ["groups", "reset-offsets", "g", *UNREACHABLE, "--topic", "orders"]
DELETE = ["groups", "delete-offsets", "g", *UNREACHABLE]


@pytest.mark.parametrize(("argv", "says"), [
    ([*RESET], "one of the arguments --to-earliest --to-latest --to-datetime --shift-by --to-offset is required"),
    ([*RESET, "--to-earliest", "--to-latest"], "argument --to-latest: not allowed with argument --to-earliest"),
    ([*RESET, "--shift-by", "1", "--to-offset", "2"], "argument --to-offset: not allowed with argument --shift-by"),
    ([*RESET, "--to-datetime", "2026-02-30T00:00:00"], "--to-datetime '2026-02-30T00:00:00' is not an ISO 8601"),
    ([*RESET, "--to-datetime", "last week"], "--to-datetime 'last week' is not an ISO 8601"),
    ([*RESET, "--shift-by", "one"], "argument --shift-by: invalid int value: 'one'"),
    ([*RESET, "--to-earliest", "--execute", "--dry-run"], "argument --dry-run: not allowed with argument --execute"),
    (["groups", "reset-offsets", "g", *UNREACHABLE, "--to-earliest"], "the following arguments are required: --topic"),
    (["groups", "reset-offsets", "g", *UNREACHABLE, "--topic", "orders:x", "--to-earliest"],
     "--topic 'orders:x': 'x' is not a partition number"),
    (["groups", "reset-offsets", "", *UNREACHABLE, "--topic", "t", "--to-earliest"], "GROUP must not be empty"),
    (["groups", "lag", "", *UNREACHABLE], "GROUP must not be empty"),
    (["groups", "lag", "g", "-b", "127.0.0.1:port"], "bootstrap"),
    (["groups", "list", *UNREACHABLE, "--state", "Stable,Sleeping"], "--state 'Sleeping' is not a group state"),
    ([*DELETE, "--topic", "orders", "--dry-run"], "deletes at once and has no --dry-run or --execute"),
    ([*DELETE, "--topic", "orders", "--execute"], "deletes at once and has no --dry-run or --execute"),
    ([*DELETE], "the following arguments are required: --topic"),
    ([*DELETE, "--topic", "orders:x"], "--topic 'orders:x': 'x' is not a partition number"),
    (["groups", "delete-offsets", "", *UNREACHABLE, "--topic", "t"], "GROUP must not be empty"),
])
def test_usage_errors_are_one_line_exit_2_without_connecting(capsys, argv, says):
    started = time.monotonic()
    assert _exit_code(argv) == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert says in line
    assert captured.out == ""
    assert time.monotonic() - started < 5


def _exit_code(argv: list[str]) -> object:
    try:
        return cli_main(argv)
    except SystemExit as exited:  # argparse's own errors exit from the parser
        return exited.code


def test_the_parsed_reset_reaches_the_command(monkeypatch):
    calls = []

    def fake_run_reset(*args: object, **kwargs: object) -> int:
        calls.append((args, kwargs))
        return 0

    monkeypatch.setattr(reset_offsets, "run_reset", fake_run_reset)
    assert cli_main([*RESET, "--topic", "audit:2,0", "--shift-by", "-3", "--execute", "--format", "json"]) == 0
    assert cli_main([*RESET, "--to-datetime", "1970-01-01T00:00:02.5+00:00"]) == 0
    assert [c[0] for c in calls] == [
        ("g", "127.0.0.1:1", [("orders", None), ("audit", [0, 2])], ResetMode("shift-by", -3)),
        ("g", "127.0.0.1:1", [("orders", None)], ResetMode("to-datetime", 2500)),
    ]
    assert [c[1] for c in calls] == [{"execute": True, "output_format": "json"},
                                     {"execute": False, "output_format": "text"}]


@pytest.mark.parametrize(("raised", "line"), [
    (CommandFailed("group 'g' does not exist"), "aiokafka-lite: group 'g' does not exist"),
    (BrokerError(25, "OffsetCommit 'g' t-0"), "aiokafka-lite: BrokerError: UNKNOWN_MEMBER_ID (25)"),
    (TimeoutError(), "aiokafka-lite: KafkaTimeoutError: resetting the offsets of group 'g' did not complete in time"),
    (RuntimeError("boom"), "aiokafka-lite: KafkaError: resetting the offsets of group 'g' failed: RuntimeError: boom"),
])
def test_failures_while_running_are_one_line_exit_1(monkeypatch, capsys, raised, line):
    async def failing(*args: object, **kwargs: object) -> reset_offsets.ResetResult:
        raise raised

    monkeypatch.setattr(reset_offsets, "reset_offsets", failing)
    assert reset_offsets.run_reset("g", "127.0.0.1:1", [("t", None)], ResetMode("to-earliest"), execute=False,
                                   output_format="text") == 1
    captured = capsys.readouterr()
    [only] = captured.err.splitlines()
    assert only.startswith(line)
    assert captured.out == ""


def test_an_admin_commit_names_no_member():
    body = reset_offsets.commit_body("g", [PlanRow("a", 0, 5, 2), PlanRow("b", 1, None, 7), PlanRow("a", 2, 1, 3)])
    assert (body["group_id"], body["generation_id_or_member_epoch"], body["member_id"], body["group_instance_id"]) \
        == ("g", -1, "", None)
    assert [(t["name"], [(p["partition_index"], p["committed_offset"]) for p in t["partitions"]])
            for t in body["topics"]] == [("a", [(0, 2), (2, 3)]), ("b", [(1, 7)])]


def test_admin_config_never_creates_topics():
    assert group_admin.admin_config("127.0.0.1:9092").allow_auto_create_topics is False


@pytest.mark.parametrize(("members", "state", "code", "says"), [
    ([], "Empty", 25, "group 'g' has a member again (it joined after the check); the broker "
     "refused the commit (UNKNOWN_MEMBER_ID (25)"),
    (["m"], "Stable", None, "cannot reset the offsets of group 'g': it is active (state Stable, 1 member(s))"),
    ([], "PreparingRebalance", None, "cannot reset the offsets of group 'g': it is active (state PreparingRebalance"),
])
def test_an_active_group_is_refused_before_or_by_the_commit(monkeypatch, members, state, code, says):
    tp = TopicPartition("t", 0)
    commits = []

    @contextlib.asynccontextmanager
    async def no_cluster(*args: object) -> object:
        yield None

    async def group(*args: object) -> object:
        return GroupMembers("classic", state, "consumer", "range", list(members)), {tp: 5}, None  # not a share group

    async def partitions(*args: object) -> list[TopicPartition]:
        return [tp]

    async def lookups(*args: object) -> object:
        return {tp: 0}, {tp: 10}, {}

    async def commit(*args: object) -> None:
        commits.append(args)
        raise BrokerError(code or 0)

    for name, fake in [("admin_cluster", no_cluster), ("existing_group", group), ("topic_partitions", partitions),
                       ("_lookups", lookups), ("commit_plan", commit)]:
        monkeypatch.setattr(reset_offsets, name, fake)
    with pytest.raises(CommandFailed) as failed:
        asyncio.run(reset_offsets.reset_offsets("b:9092", "g", [("t", None)], ResetMode("to-earliest"), execute=True))
    assert str(failed.value).startswith(says)
    assert len(commits) == (1 if code else 0)  # an active group is refused before anything is committed
