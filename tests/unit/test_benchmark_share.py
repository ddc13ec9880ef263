"""benchmarks.share without a broker: parsing Kafka's ShareConsumerPerformance output (a real capture)
and the ratios to it within one run."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from benchmarks import share

# ShareConsumerPerformance (Kafka 4.3.1) as benchmarks.share runs it (--show-detailed-stats,
# --reporting-interval 100), 30,000 x 100 B on 6 partitions, captured whole.
CAPTURED = """\
start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg, fetch.time.ms
2026-11-27 11:51:57:519, 2026-11-27 11:52:00:447, 0.0001, 0.0000, 0.3415, 1, 2928 for share consumer 1
2026-11-27 11:52:00:447, 2026-11-27 11:52:00:555, 0.9538, 8.8303, 92592.5926, 10001, 108 for share consumer 1
2026-11-27 11:52:00:555, 2026-11-27 11:52:00:657, 2.3843, 14.0246, 147058.8235, 25001, 102 for share consumer 1
2026-11-27 11:51:57:372, 2026-11-27 11:52:00:662, 2.8610, 0.8696, 9118.5410, 30000, 3290
"""

# The head and tail of a 1,000,000-record run of the same (the JSON's tool_output, abridged by "...").
ABRIDGED = """\
start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg, fetch.time.ms
2026-11-27 11:51:14:912, 2026-11-27 11:51:16:198, 0.0001, 0.0001, 0.7776, 1, 1286 for share consumer 1
2026-11-27 11:51:16:198, 2026-11-27 11:51:16:321, 1.7190, 13.9748, 146536.5854, 18025, 123 for share consumer 1
...
2026-11-27 11:51:18:601, 2026-11-27 11:51:18:702, 92.4548, 67.5862, 708693.0693, 969459, 101 for share consumer 1
2026-11-27 11:51:14:721, 2026-11-27 11:51:18:758, 95.3674, 23.6233, 247708.6946, 1000000, 4037
"""


def test_the_final_line_gives_the_tools_window_and_rate() -> None:
    report = share.parse_tool_output(CAPTURED)
    assert report.records == 30000
    assert report.records_per_s == pytest.approx(9118.5410)
    assert report.window_seconds == pytest.approx(3.290)
    assert report.megabytes == pytest.approx(2.8610)
    assert report.start == datetime(2026, 11, 27, 11, 51, 57, 372000)
    assert report.end == datetime(2026, 11, 27, 11, 52, 0, 662000)
    assert report.warnings == []
    # The tool's own rate is records over its window, to its printed precision.
    assert report.records / report.window_seconds == pytest.approx(report.records_per_s, rel=1e-4)


def test_the_first_progress_line_marks_the_first_record() -> None:
    report = share.parse_tool_output(CAPTURED)
    assert [records for _, records in report.progress] == [1, 10001, 25001]
    first_at = datetime(2026, 11, 27, 11, 52, 0, 447000)
    assert report.progress[0][0] == first_at
    # 29,999 records from 00.447 (the first record) to 00.662 (the last): 0.215 s.
    assert report.steady_records_per_s() == pytest.approx(29999 / 0.215)


def test_an_abridged_capture_parses_the_same_way() -> None:
    report = share.parse_tool_output(ABRIDGED)
    assert (report.records, report.records_per_s, report.window_seconds) == (1000000, 247708.6946, 4.037)
    assert report.steady_records_per_s() == pytest.approx(999999 / 2.560)


def test_without_a_progress_line_there_is_no_steady_rate() -> None:
    lines = CAPTURED.splitlines()
    report = share.parse_tool_output("\n".join([lines[0], lines[-1]]))
    assert report.progress == []
    assert report.steady_records_per_s() is None


def test_a_run_that_timed_out_keeps_its_warning_and_one_without_final_figures_is_refused() -> None:
    warning = ("WARNING: Exiting before consuming the expected number of records: timeout (60000 ms) exceeded. "
               "You can use the --timeout option to increase the timeout.")
    lines = CAPTURED.splitlines()
    report = share.parse_tool_output("\n".join([lines[0], warning, lines[-1]]))
    assert report.warnings == [warning]
    with pytest.raises(ValueError, match="no final figures"):
        share.parse_tool_output("\n".join([lines[0], lines[1], warning]))


def test_ratios_to_java_are_taken_within_the_run_and_summarised() -> None:
    java: dict[str, Any] = {"window_records_per_s": 200.0, "records_per_s": 400.0, "process_records_per_s": 100.0}
    ours: dict[str, Any] = {"window_records_per_s": 300.0, "records_per_s": 200.0, "process_records_per_s": 150.0}
    run: dict[str, dict[str, Any]] = {share.JAVA: java, share.IMPLICIT: ours, share.EXPLICIT: {"error": "exit 1: boom"}}
    share._ratios(run)
    assert (ours["x_java_window"], ours["x_java_steady"], ours["x_java_process"]) == (1.5, 0.5, 1.5)
    assert java["x_java_window"] == 1.0
    rows = share.summarise([run])
    assert rows[share.IMPLICIT]["x_java_window"] == {"median": 1.5, "min": 1.5, "max": 1.5}
    assert rows[share.EXPLICIT] == {"runs": 1, "ok_runs": 0, "errors": ["exit 1: boom"]}
    text = share.table(rows)
    assert "failed: exit 1: boom" in text
    assert "1.50" in text.splitlines()[3]
