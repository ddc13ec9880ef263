"""The `aiokafka-lite` command as users run it: a subprocess against real brokers."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from aiokafka_lite import Consumer, OffsetAndMetadata, TopicPartition
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import Poller, poll_until

CLI = [sys.executable, "-m", "aiokafka_lite"]
# No colour codes or terminal tricks in what the tests read.
ENV = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}


def run_cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=ENV, check=False)


def start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def read_until(proc: subprocess.Popen[str], marker: str, timeout: float) -> list[str]:
    """Lines of ``proc``'s stdout up to and including the first one containing ``marker``."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if marker in line:
            return lines
    proc.kill()
    raise AssertionError(f"{marker!r} not printed within {timeout} s; got {lines}")


def interrupt(proc: subprocess.Popen[str], timeout: float) -> tuple[int, str, str]:
    """Ctrl-C, then the exit code and the rest of the output; fail if it does not exit in time."""
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"no exit within {timeout} s of Ctrl-C") from None
    return proc.returncode, out, err


# ---------------------------------------------------------------------------- consume

def test_consume_json_decodes_utf8_and_base64_and_stops_at_max(tansu_broker, unique_topic):
    create_topic(tansu_broker, unique_topic, partitions=1)
    produce(tansu_broker, unique_topic, [
        {"key": "k0", "value": "héllo", "headers": [("trace", b"abc"), ("raw", b"\xff\x00")]},
        {"key": None, "value": b"\xff\xfe\x00"},
        ("k2", "third"),
        ("k3", "not printed"),
    ])
    done = run_cli("consume", unique_topic, "-b", tansu_broker.bootstrap_servers, "--from", "earliest",
                   "--format", "json", "--max", "3")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["offset"] for r in rows] == [0, 1, 2]
    assert rows[0]["key"] == "k0"
    assert rows[0]["value"] == "héllo"
    assert rows[0]["headers"] == [["trace", "abc"], ["raw", {"base64": base64.b64encode(b"\xff\x00").decode()}]]
    assert rows[1]["key"] is None
    assert rows[1]["value"] == {"base64": base64.b64encode(b"\xff\xfe\x00").decode()}
    assert rows[2]["value"] == "third"
    assert all(r["topic"] == unique_topic and r["partition"] == 0 for r in rows)


def test_consume_text_shows_hex_for_binary(tansu_broker, unique_topic):
    create_topic(tansu_broker, unique_topic, partitions=1)
    produce(tansu_broker, unique_topic, [{"key": "order-1", "value": b"\xff\x02", "headers": [("h", b"v")]}])
    done = run_cli("consume", unique_topic, "-b", tansu_broker.bootstrap_servers, "--from", "earliest", "--max", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f'{unique_topic}[0]@0 key="order-1" value=0xff02 headers={{h="v"}}']


def test_consume_with_group_commits_so_the_next_run_continues(tansu_broker, unique_topic, unique_group):
    create_topic(tansu_broker, unique_topic, partitions=2)
    produce(tansu_broker, unique_topic, [(f"k{i}", f"v{i}") for i in range(10)])
    # Tansu holds a first JoinGroup for half the session timeout (DEVIATIONS["join_delay"]): keep it
    # short (and show -X).
    common = ("consume", unique_topic, "-b", tansu_broker.bootstrap_servers, "--group", unique_group,
              "--from", "earliest", "--format", "json", "-X", "session.timeout.ms=6000",
              "-X", "heartbeat.interval.ms=1000")
    first = run_cli(*common, "--max", "4")
    assert first.returncode == 0, first.stderr
    second = run_cli(*common, "--max", "6")
    assert second.returncode == 0, second.stderr
    seen = [json.loads(line)["value"] for line in first.stdout.splitlines() + second.stdout.splitlines()]
    # Every record exactly once across the two runs: the first one's commit on exit was honoured.
    assert sorted(seen) == sorted(f"v{i}" for i in range(10))


def test_consume_exits_cleanly_on_ctrl_c(tansu_broker, unique_topic):
    create_topic(tansu_broker, unique_topic, partitions=1)
    produce(tansu_broker, unique_topic, [("k", "first")])
    proc = start_cli("consume", unique_topic, "-b", tansu_broker.bootstrap_servers, "--from", "earliest")
    read_until(proc, "first", timeout=30)
    code, _out, err = interrupt(proc, timeout=10)
    assert code == 130  # 128 + SIGINT, as a shell reports it (docs/cli.md)
    assert "Traceback" not in err


def test_consume_rejects_an_unknown_setting(tansu_broker, unique_topic):
    done = run_cli("consume", unique_topic, "-b", tansu_broker.bootstrap_servers, "-X", "session.timeout.mss=1")
    assert done.returncode == 2  # a usage error (docs/cli.md)
    assert "session.timeout.mss" in done.stderr or "session_timeout_mss" in done.stderr
    assert "Traceback" not in done.stderr


def test_consume_unknown_topic_is_an_error_without_traceback(tansu_broker, unique_topic):
    done = run_cli("consume", unique_topic, "-b", tansu_broker.bootstrap_servers, "--max", "1")
    assert done.returncode == 1
    assert "does not exist" in done.stderr
    assert "Traceback" not in done.stderr


def test_consume_from_latest_on_tansu_notes_that_older_records_may_come_first(tansu_broker, unique_topic):
    create_topic(tansu_broker, unique_topic, partitions=1)
    produce(tansu_broker, unique_topic, [(f"k{i}", f"v{i}") for i in range(1000)])
    done = run_cli("consume", unique_topic, "-b", tansu_broker.bootstrap_servers, "--from", "latest",
                   "--max", "1", "--format", "json")
    assert done.returncode == 0, done.stderr
    # Nothing was produced after the start, yet a record is printed: Tansu's "latest" is behind the end.
    assert json.loads(done.stdout)["offset"] < 1000
    assert "note: the broker is Tansu, so --from latest may start before the end" in done.stderr
    assert "DEVIATIONS['list_offsets_latest']" in done.stderr


def test_consume_from_latest_on_apache_kafka_prints_only_new_records_and_no_note(apache_kafka_broker, unique_topic):
    bootstrap = apache_kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=1)
    produce(bootstrap, unique_topic, [("old", "before")])
    proc = start_cli("consume", unique_topic, "-b", bootstrap, "--from", "latest", "--max", "1", "--format", "json")
    try:
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:  # until the consumer is positioned
            produce(bootstrap, unique_topic, [("new", "after")])
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert json.loads(out)["key"] == "new"
    assert "note" not in err


# ---------------------------------------------------------------------------- groups describe

@pytest.mark.asyncio
async def test_groups_describe_shows_members_assignment_and_lag(apache_kafka_broker, unique_topic, unique_group):
    bootstrap = apache_kafka_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=3)
    produce(bootstrap, unique_topic, [{"value": f"v{i}", "partition": i % 3} for i in range(30)])
    consumer = Consumer(unique_topic, bootstrap_servers=bootstrap, group_id=unique_group, client_id="billing-1",
                        auto_offset_reset="earliest", enable_auto_commit=False, heartbeat_interval_ms=500)
    async with consumer:
        await poll_until(consumer, lambda got: len(got) >= 30)
        # Commit 5 records less than consumed on partition 0, so its lag is 5.
        await consumer.commit({TopicPartition(unique_topic, p): OffsetAndMetadata(5 if p == 0 else 10)
                               for p in range(3)})
        async with Poller(consumer):  # stay a live, heartbeating member while the CLI looks
            proc = await asyncio.create_subprocess_exec(
                *CLI, "groups", "describe", unique_group, "-b", bootstrap, "--format", "json",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENV)
            out, err = await asyncio.wait_for(proc.communicate(), 60)
            text_proc = await asyncio.create_subprocess_exec(
                *CLI, "groups", "describe", unique_group, "-b", bootstrap,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENV)
            text_out, _ = await asyncio.wait_for(text_proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    view = json.loads(out)
    assert view["state"] == "Stable"
    assert view["protocol_type"] == "consumer"
    [member] = view["members"]
    assert member["client_id"] == "billing-1"
    assert member["client_host"].lstrip("/") == "127.0.0.1"
    assert member["subscription"] == [unique_topic]
    assert sorted(p["partition"] for p in member["assignment"]) == [0, 1, 2]
    rows = {p["partition"]: p for p in view["partitions"]}
    assert {n: (r["committed"], r["end"], r["lag"]) for n, r in rows.items()} == {
        0: (5, 10, 5), 1: (10, 10, 0), 2: (10, 10, 0)}
    assert all(r["member_id"] == member["member_id"] for r in rows.values())
    text = text_out.decode()
    assert text_proc.returncode == 0
    assert f"group {unique_group}: state Stable" in text
    assert "billing-1" in text
    assert f"{unique_topic}  0  5  10  5  {member['member_id']}" in text
    assert view["notes"] == []  # Apache Kafka's end offsets are the log end: nothing to warn about
    assert "COMMITTED  END  LAG  MEMBER" in text


@pytest.mark.asyncio
async def test_groups_describe_on_tansu_says_end_and_lag_may_be_too_low(tansu_broker, unique_topic, unique_group):
    bootstrap = tansu_broker.bootstrap_servers
    create_topic(bootstrap, unique_topic, partitions=3)
    produce(bootstrap, unique_topic, [(f"k{i}", f"v{i}") for i in range(1000)])
    # Short session: Tansu answers a new group's first JoinGroup after half of it.
    async with Consumer(unique_topic, bootstrap_servers=bootstrap, group_id=unique_group, auto_offset_reset="earliest",
                        enable_auto_commit=False, session_timeout_ms=2000, heartbeat_interval_ms=500) as consumer:
        await poll_until(consumer, lambda got: len(got) >= 1000)
        await consumer.commit()
    as_json = run_cli("groups", "describe", unique_group, "-b", bootstrap, "--format", "json")
    as_text = run_cli("groups", "describe", unique_group, "-b", bootstrap)
    assert as_json.returncode == 0, as_json.stderr
    assert as_text.returncode == 0, as_text.stderr
    view = json.loads(as_json.stdout)
    rows = view["partitions"]
    assert sum(r["committed"] for r in rows) == 1000  # everything was read and committed...
    # ...yet Tansu's end offsets fall short of it: the figures the note is about really are wrong.
    assert sum(r["end"] for r in rows) < 1000, rows
    [note] = view["notes"]
    assert "the broker is Tansu, so END and LAG may be too low" in note
    assert "DEVIATIONS['list_offsets_latest']" in note
    assert "COMMITTED  END*  LAG*  MEMBER" in as_text.stdout
    assert f"* {note}" in as_text.stdout


# ---------------------------------------------------------------------------- demo

def test_demo_runs_the_whole_story_and_exits_zero():
    started = time.monotonic()
    done = run_cli("demo", timeout=90)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout
    assert "Traceback" not in out + done.stderr
    assert "two members join" in out
    assert "exceeds max_poll_interval_ms=3000" in out  # the watchdog's warning
    assert "B owns all 4 partitions" in out
    assert "A polls again" in out
    assert "A owns all 4 partitions" in out
    assert "B: commit + LeaveGroup in" in out
    assert "broker stopped" in out
    # Both members were STABLE together in a later generation after A rejoined.
    assert any(line.count("STABLE") == 2 and "generation 0" not in line for line in out.splitlines())
    assert elapsed < 60, f"the demo took {elapsed:.0f} s"


def _story_line(out: str, pattern: str) -> re.Match[str]:
    found = re.search(pattern, out)
    assert found, f"no line matching {pattern!r} in:\n{out}"
    return found


@pytest.mark.parametrize("broker", [pytest.param(kind, marks=pytest.mark.broker(kind), id=kind)
                                    for kind in ("tansu", "kafka")])
def test_demo_story_matches_its_numbers(broker: str):
    if broker == "kafka" and shutil.which("java") is None:
        pytest.skip("the embedded Apache Kafka needs java on PATH")
    done = run_cli("demo", "--view", "plain", "--broker", broker, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout
    session_ms = int(_story_line(out, r"session_timeout_ms=(\d+)\)").group(1))

    # The client's own part: the watchdog leaves as soon as the poll deadline passes...
    watchdog = _story_line(out, r"A's watchdog: LeaveGroup sent (\d+) ms after the poll deadline "
                                r"\(([\d.]+) s after A's last poll, max_poll_interval_ms=(\d+)\)")
    assert int(watchdog.group(1)) < 500
    assert float(watchdog.group(2)) == pytest.approx(int(watchdog.group(3)) / 1000, abs=0.5)
    # ...while its heartbeats had kept it in the group past session_timeout_ms (KIP-62).
    kept = _story_line(out, r"A's heartbeats kept it in the group for ([\d.]+) s without a poll, past "
                            r"session_timeout_ms=(\d+)")
    assert float(kept.group(1)) * 1000 > int(kept.group(2)) == session_ms

    # The broker's part: the rebalance after the LeaveGroup beats session_timeout_ms, as printed.
    handover = _story_line(out, r"broker: B owns all 4 partitions ([\d.]+) s later .*without the LeaveGroup "
                                r"the broker would first wait session_timeout_ms=(\d+)")
    assert int(handover.group(2)) == session_ms
    assert float(handover.group(1)) * 1000 < session_ms

    # B's close: commit + LeaveGroup promptly, then A gets everything well within a session timeout.
    closed = _story_line(out, r"B: commit \+ LeaveGroup in (\d+) ms")
    assert int(closed.group(1)) < 1000
    after_close = _story_line(out, r"broker: A owns all 4 partitions ([\d.]+) s later")
    assert float(after_close.group(1)) * 1000 < session_ms


def test_demo_exits_cleanly_on_ctrl_c():
    proc = start_cli("demo", "--view", "plain")
    read_until(proc, "two members join", timeout=30)
    code, out, err = interrupt(proc, timeout=20)
    assert code == 130, err
    assert "interrupted" in out
    assert "broker stopped" in out
    assert "Traceback" not in out + err


def test_live_view_table_shows_each_member():
    rich_console = pytest.importorskip("rich.console")
    from aiokafka_lite.cli.demo_view import MemberRow, member_table

    rows = [MemberRow("A", "STABLE", 3, "0,1", 12, 0.1, True, 2500),
            MemberRow("B", "UNJOINED", -1, "-", 7, 3.4, False, 40)]
    console = rich_console.Console(record=True, width=120, color_system=None)
    console.print(member_table(rows))
    text = console.export_text()
    a_line = next(line for line in text.splitlines() if "│ A " in line)
    b_line = next(line for line in text.splitlines() if "│ B " in line)
    for cell in ("STABLE", " 3 ", "0,1", " 12 ", "0.1 s", "yes", "2500"):
        assert cell in a_line
    for cell in ("UNJOINED", "3.4 s", "stopped", " 40 "):
        assert cell in b_line


@pytest.mark.asyncio
async def test_groups_describe_on_tansu_marks_what_the_broker_did_not_report(tansu_broker, unique_topic, unique_group):
    bootstrap = tansu_broker.bootstrap_servers
    create_topic(tansu_broker, unique_topic, partitions=1)
    produce(tansu_broker, unique_topic, [("k", "v")])
    consumer = Consumer(unique_topic, bootstrap_servers=bootstrap, group_id=unique_group, client_id="billing-1",
                        auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                        heartbeat_interval_ms=1000)
    async with consumer:
        await poll_until(consumer, lambda got: len(got) >= 1)
        await consumer.commit()
        async with Poller(consumer):  # a live member while the CLI looks
            outputs = []
            for extra in (["--format", "json"], []):
                proc = await asyncio.create_subprocess_exec(
                    *CLI, "groups", "describe", unique_group, "-b", bootstrap, *extra,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENV)
                out, err = await asyncio.wait_for(proc.communicate(), 60)
                assert proc.returncode == 0, err.decode()
                outputs.append(out.decode())
    view, text = json.loads(outputs[0]), outputs[1]
    # Tansu 0.6 answers DescribeGroups with the member's client id, host, metadata and assignment
    # and the group's protocol empty: not reported, rather than blank or "no subscription".
    assert view["group_type"] == "classic"
    assert view["protocol"] is None
    [member] = view["members"]
    assert (member["client_id"], member["client_host"], member["subscription"], member["assignment"]) == (
        None, None, None, None)
    assert view["notes"][0].startswith("? marks what the broker did not report")
    [row] = view["partitions"]
    assert (row["committed"], row["member_id"], row["owner_known"]) == (1, None, False)
    assert f"group {unique_group}: state Stable, protocol consumer/?, 1 member(s)" in text
    assert f"{member['member_id']}  ?  ?  -  ?  ?\n" in text
    assert re.search(rf"^{unique_topic}  0  1  \S+  \S+  \?$", text, re.MULTILINE), text  # owner unknown
    assert "\n? marks what the broker did not report" in text
