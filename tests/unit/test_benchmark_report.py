"""The benchmark's bookkeeping without a broker: ratios within a run, what-ran fields, the tables."""

from __future__ import annotations

import importlib.util
import struct
from typing import Any

import pytest

from benchmarks import compare, report, throughput
from benchmarks.clients._harness import Spec
from benchmarks.data import Dataset, datasets, scale_datasets

CONFLUENT = throughput.CONFLUENT_TUNED


def _result(rate: float, cpu: float, **extra: Any) -> dict[str, Any]:
    return {"records_per_s": rate, "mb_per_s": rate / 1e4, "cpu_seconds": cpu, "cpu_seconds_per_m_records": cpu,
            "peak_rss_mb": 50.0, "startup_seconds": 0.1, **extra}


def _runs() -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    six = {throughput.LIMIT: _result(2e6, 0.2), throughput.LITE: _result(5e5, 1.5, decoder="python"),
           CONFLUENT: _result(1e6, 1.0, options={"fetch.queue.backoff.ms": 10})}
    wide = {throughput.LIMIT: _result(1e6, 0.4), throughput.LITE: _result(4e5, 3.0, decoder="python"),
            CONFLUENT: {"error": "exit 1: Traceback | RuntimeError: broker gone"}}
    return six, wide


def test_ratios_are_taken_within_one_run() -> None:
    six, wide = _runs()
    for run in (six, wide):
        throughput._with_ratios(run)
    throughput._vs_six(six, wide)
    assert six[CONFLUENT]["vs_lite"] == 2.0
    assert six[throughput.LITE]["fraction_of_limit"] == 0.25
    assert wide[throughput.LITE]["vs_6_partitions"] == 0.8
    assert wide[throughput.LITE]["cpu_vs_6_partitions"] == 2.0
    assert "vs_6_partitions" not in wide[CONFLUENT]


def test_summary_keeps_what_ran_and_the_errors() -> None:
    six, wide = _runs()
    clients = [throughput.LIMIT, throughput.LITE, CONFLUENT]
    sets = scale_datasets(1000)
    summary = throughput._summarise([wide], clients, sets[1])
    assert summary["partitions"] == 1200
    assert summary["topics"] == 200
    assert summary["clients"][throughput.LITE]["decoder"] == "python"
    assert summary["clients"][CONFLUENT]["ok_runs"] == 0
    assert summary["clients"][CONFLUENT]["errors"]
    assert throughput._summarise([six], clients, sets[0])["clients"][CONFLUENT]["options"] == {
        "fetch.queue.backoff.ms": 10}


def test_tables_flag_the_decoder_and_put_failures_under_the_table() -> None:
    six, wide = _runs()
    for run in (six, wide):
        throughput._with_ratios(run)
    throughput._vs_six(six, wide)
    clients = [throughput.LIMIT, throughput.LITE, CONFLUENT]
    sets = scale_datasets(1000)
    results = {"broker": "test", "runs": 1, "machine": "test",
               "scale": {d.name: throughput._summarise([run], clients, d) for d, run in zip(sets, (six, wide),
                                                                                            strict=True)}}
    text = report.render(results)
    assert f"{throughput.LITE} [ran: python]" in text
    assert f"{CONFLUENT} failed: RuntimeError: broker gone" in text
    assert "x 6 partitions" in text


def test_spec_assigns_every_partition_of_every_topic() -> None:
    dataset = Dataset("x", ("a", "b"), 10, 100, partitions=3)
    spec = Spec(bootstrap="b:9092", topics=list(dataset.topics), partitions=dataset.partitions, records=10)
    assert spec.assignment() == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2)]
    assert dataset.total_partitions == 6


def test_every_client_names_a_module() -> None:
    """Found, not imported: the peers' libraries are an optional extra."""
    for client in throughput.CLIENTS.values():
        assert importlib.util.find_spec(f"benchmarks.clients.{client.module}") is not None
    assert set(throughput.SCALE_CLIENTS) <= set(throughput.CLIENTS)


def _compare_rounds() -> list[dict[str, dict[str, Any]]]:
    old, new, peer = "poll() old (abc)", "poll() new (working tree)", compare.PEER
    return [{old: {"records_per_s": 100.0, "decoder": "native", "cpu_seconds_per_m_records": 2.0},
             new: {"records_per_s": 110.0, "decoder": "native", "cpu_seconds_per_m_records": 1.0},
             peer: {"records_per_s": 220.0}},
            {old: {"records_per_s": 200.0, "decoder": "native"}, new: {"records_per_s": 180.0, "decoder": "native"},
             peer: {"records_per_s": 360.0}},
            {old: {"error": "exit 1: Traceback | OSError: gone"}, new: {"records_per_s": 500.0, "decoder": "native"},
             peer: {"records_per_s": 1000.0}}]


def test_compare_takes_new_over_old_within_each_round() -> None:
    old, new = "poll() old (abc)", "poll() new (working tree)"
    rows = compare.summarise(_compare_rounds(), [(old, new)], compare.PEER)
    # Rounds 1 and 2 only (round 3's old run failed): 1.1 and 0.9, not the medians' ratio.
    assert rows[new]["new_vs_old"] == {"median": 1.0, "min": 0.9, "max": 1.1}
    assert rows[new]["cpu_new_vs_old"] == {"median": 0.5, "min": 0.5, "max": 0.5}  # round 1 only had CPU figures
    assert rows[compare.PEER]["vs_new"] == {"median": 2.0, "min": 2.0, "max": 2.0}
    assert rows[old]["ok_rounds"] == 2
    assert rows[old]["errors"] == ["exit 1: Traceback | OSError: gone"]
    assert rows[new]["records_per_s"]["median"] == 180.0
    assert rows[new]["decoder"] == "native"
    assert "new_vs_old" not in rows[old]


def test_compare_table_shows_ratios_spread_and_failures() -> None:
    old, new = "poll() old (abc)", "poll() new (working tree)"
    data = {"records": 3, "partitions": 6, "compression": "none",
            "rows": compare.summarise(_compare_rounds(), [(old, new)], compare.PEER)}
    text = compare.render({"old": "old (abc)", "new": "new (working tree)", "rounds": 3, "broker": "b",
                           "machine": "m", "sets": {"100 B": data}})
    assert "1.000 (0.900-1.100)" in text
    assert "2.00 (2.00-2.00)" in text
    assert f"{old} failed: OSError: gone" in text


def test_compare_arguments() -> None:
    args = compare.parse_args(["--base", "HEAD~1"])
    assert (args.base, args.new, args.rounds, args.sizes, args.decoder) == ("HEAD~1", None, 5,
                                                                            ["100 B", "1 KB", "10 KB"], "native")
    assert not args.save
    assert not args.no_arrow
    assert compare.parse_args(["--base", "x", "--rounds", "2", "--sizes", "1 KB", "--no-arrow"]).sizes == ["1 KB"]
    assert set(compare.SIZES) == {d.name for d in datasets(10)}
    with pytest.raises(SystemExit):
        compare.parse_args([])  # --base is required
    with pytest.raises(SystemExit):
        compare.parse_args(["--base", "x", "--rounds", "0"])


def test_compare_rows_alternate_old_and_new_each_in_its_own_tree() -> None:
    old = compare.Side("old", "HEAD~1", "abc1234", "/tmp/old")
    new = compare.Side("new", compare.WORKING_TREE, "", throughput.ROOT)
    rows = compare.rows(old, new, "python", arrow=True, peer=True)
    assert list(rows) == ["poll() old (HEAD~1 = abc1234)", "poll() new (working tree)",
                          "poll_arrow() old (HEAD~1 = abc1234)", "poll_arrow() new (working tree)", compare.PEER]
    assert rows["poll() old (HEAD~1 = abc1234)"].pythonpath == ("/tmp/old",)
    assert rows["poll_arrow() new (working tree)"].env == {"AIOKAFKA_LITE_NO_NATIVE": "1"}
    assert not rows[compare.PEER].pythonpath
    for client in rows.values():
        assert importlib.util.find_spec(f"benchmarks.clients.{client.module}") is not None


def test_compare_refuses_a_side_that_ran_another_tree_or_decoder() -> None:
    rows = {"a": throughput.Client("lite", pythonpath=("/tmp/old",))}
    compare.check_sides({"a": {"package": "/tmp/old/aiokafka_lite", "decoder": "native"}}, rows, "native")
    with pytest.raises(SystemExit, match="imported aiokafka_lite from /elsewhere"):
        compare.check_sides({"a": {"package": "/elsewhere/aiokafka_lite", "decoder": "native"}}, rows, "native")
    with pytest.raises(SystemExit, match="ran the python decoder, not native"):
        compare.check_sides({"a": {"package": "/tmp/old/aiokafka_lite", "decoder": "python"}}, rows, "native")


def _reference_run(confluent_rate: float) -> dict[str, dict[str, Any]]:
    return {throughput.LIMIT: _result(2e6, 0.2), throughput.BARE_FETCH: _result(4e6, 0.2),
            throughput.CEILING: _result(1e7, 0.4), throughput.LITE: _result(1e6, 1.0),
            CONFLUENT: _result(confluent_rate, 1.0)}


def test_the_limit_is_the_fastest_fetch_loop_and_every_row_is_also_a_ratio_to_confluent_tuned() -> None:
    run = _reference_run(5e5)
    throughput._with_ratios(run)
    assert throughput.run_limit(run) == 4e6  # the ceiling is no Fetch loop: not a candidate
    assert run[throughput.LITE]["fraction_of_limit"] == 0.25
    assert run[throughput.LIMIT]["fraction_of_limit"] == 0.5
    assert run[throughput.LITE]["vs_confluent_tuned"] == 2.0
    assert run[CONFLUENT]["vs_confluent_tuned"] == 1.0
    assert run[throughput.CEILING]["fraction_of_limit"] == 2.5
    assert throughput.above_limit(run) == {}  # the ceiling is above by design: no flag
    assert throughput.run_limit({throughput.LITE: _result(1e6, 1.0)}) is None
    assert set(throughput.REFERENCES) <= set(throughput.CLIENTS)


def _reference_table(run: dict[str, dict[str, Any]], compression: str = "none") -> str:
    throughput._with_ratios(run)
    dataset = Dataset("1 KB", ("t",), 1000, 1000, compression)
    return report.throughput_table({"1 KB": throughput._summarise([run], list(run), dataset)})


def test_a_client_above_the_limit_is_flagged_loudly() -> None:
    run = _reference_run(6e6)
    throughput._with_ratios(run)
    assert throughput.above_limit(run) == {CONFLUENT: 1.5}
    text = _reference_table(_reference_run(6e6))
    flagged = [line for line in text.splitlines() if report.ABOVE in line]
    assert len(flagged) == 1
    assert flagged[0].startswith(CONFLUENT)
    assert f"!! LIMIT EXCEEDED: {CONFLUENT} read 1.50x the limit" in text
    assert "x confluent tuned" in text
    quiet = _reference_table(_reference_run(5e5))
    assert "!!" not in quiet


def test_a_ceiling_below_the_limit_is_flagged_on_uncompressed_data_only() -> None:
    def run() -> dict[str, dict[str, Any]]:
        rows = _reference_run(5e5)
        rows[throughput.CEILING] = _result(3e6, 0.4)
        return rows

    assert "!! CEILING BELOW THE LIMIT: the loopback copy rate was 0.75x the limit" in _reference_table(run())
    assert "!!" not in _reference_table(run(), "lz4")
    assert "!!" not in _reference_table(run(), "zstd")


def test_limit_walks_batch_headers_only() -> None:
    from benchmarks.clients import limit

    def batch(base: int, last_delta: int, count: int, payload: int) -> bytes:
        data = bytearray(61 + payload)
        struct.pack_into(">qi", data, 0, base, len(data) - 12)
        struct.pack_into(">i", data, 23, last_delta)
        struct.pack_into(">i", data, 57, count)
        return bytes(data)

    data = batch(0, 9, 10, 500) + batch(10, 4, 5, 100)
    assert limit.walk(data) == (15, 15)
    assert limit.walk(memoryview(data + batch(15, 1, 2, 50)[:70])) == (15, 15)  # a partial batch is left
    assert limit.walk(b"") == (-1, 0)


def test_limit_deals_the_partitions_into_disjoint_groups_per_connection() -> None:
    from benchmarks.clients import limit

    partitions = [("t", p) for p in range(6)]
    per_connection = limit.groups_for(partitions, connections=2, in_flight=1)
    assert per_connection == [[{("t", 0): 0, ("t", 2): 0, ("t", 4): 0}], [{("t", 1): 0, ("t", 3): 0, ("t", 5): 0}]]
    many = [("t", p) for p in range(1200)]
    groups = [group for conn in limit.groups_for(many, connections=3, in_flight=2) for group in conn]
    assert len(groups) == 6
    assert sorted(tp for group in groups for tp in group) == sorted(many)
    assert limit.groups_for(partitions[:1], connections=2, in_flight=2) == [[{("t", 0): 0}]]  # one reader


def test_ceiling_measures_the_loopback_copy_rate() -> None:
    from benchmarks.clients import ceiling

    assert ceiling.loopback_bytes_per_s(8 << 20) > 50e6  # loopback copies GB/s; 50 MB/s would be broken


def test_a_saved_run_from_before_issue_24_shows_confluent_above_its_limit() -> None:
    """The old limit's label is still a reference row: its 1.0 is no flag; confluent-kafka's 1.66 is."""
    old = {"limit (bare Fetch)": _result(4.9e5, 0.4), CONFLUENT: _result(5.9e5, 0.6)}
    for result in old.values():
        result["fraction_of_limit"] = result["records_per_s"] / 4.9e5
    text = report.throughput_table({"1 KB": throughput._summarise([old], list(old), Dataset("1 KB", ("t",), 10, 1000))})
    assert [line.split("  ")[0] for line in text.splitlines() if report.ABOVE in line] == [CONFLUENT]


def test_the_whole_read_ratio_gives_no_head_start_to_a_client_that_prefetches_during_start_up() -> None:
    # confluent's first record comes after 0.5 s of start-up (its queue filled meanwhile), ours after 0.01 s
    lite = _result(9e5, 1.0, records=1_000_000, seconds=1.1, startup_seconds=0.01,
                   whole_read_records_per_s=1_000_000 / 1.1)
    confluent = _result(1e6, 1.5, records=1_000_000, seconds=1.5, startup_seconds=0.5,
                        whole_read_records_per_s=1_000_000 / 1.5)
    run = {throughput.LITE: lite, CONFLUENT: confluent}
    throughput._with_ratios(run)
    assert run[throughput.LITE]["vs_confluent_tuned"] == pytest.approx(0.9)
    assert run[throughput.LITE]["whole_read_vs_confluent_tuned"] == pytest.approx(1.5 / 1.1)
    text = report.throughput_table({"1 KB": throughput._summarise(
        [run], list(run), Dataset("1 KB", ("t",), 1_000_000, 1000))})
    assert "whole read x conf. tuned" in text
    assert "1.36" in next(line for line in text.splitlines() if line.startswith(throughput.LITE))


def test_render_with_no_save_prints_and_writes_no_chart(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import run as bench_run

    charted: list[object] = []
    monkeypatch.setattr(bench_run, "_charts", lambda results: charted.append(results) or [])
    saved = tmp_path / "results.json"
    saved.write_text('{"broker": "b", "runs": 1, "machine": "m", "throughput": {}}')
    bench_run.main(["--render", str(saved), "--no-save"])
    assert charted == []
    bench_run.main(["--render", str(saved)])
    assert len(charted) == 1
    capsys.readouterr()
