"""The benchmark's data sets and a client that cannot read one, without a broker: the sets and their
selection (``--sets``, ``--sizes``), the 10 KB set's size, a skipped row from the client process to the table."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from benchmarks import compare, report, run, throughput
from benchmarks.clients import _harness
from benchmarks.data import SET_NAMES, Dataset, datasets

KAFKA_PYTHON = "kafka-python"
REASON = "kafka-python decodes zstd only with the zstandard package, not installed here"


def test_the_data_sets_in_order_with_10_kb_at_twice_the_1_kb_bytes() -> None:
    sets = {d.name: d for d in datasets(1_000_000)}
    assert list(sets) == list(SET_NAMES)
    ten, one = sets["10 KB"], sets["1 KB"]
    assert (ten.records, ten.value_size, ten.compression) == (40_000, 10_000, "none")
    assert ten.records * ten.value_size == 2 * one.records * one.value_size
    assert ten.batch * ten.value_size == one.batch * one.value_size  # the same bytes per poll() call
    assert (sets["100 B zstd"].records, sets["100 B zstd"].value_size, sets["100 B zstd"].compression) == (
        1_000_000, 100, "zstd")
    assert len({topic for d in sets.values() for topic in d.topics}) == len(sets)
    assert datasets(100_000, ["10 KB"])[0].records == 4_000  # --quick: 4 calls of 1,000, not one short one


def test_a_selection_keeps_the_sets_order_and_refuses_an_unknown_name() -> None:
    assert [d.name for d in datasets(10, ["100 B zstd", "10 KB"])] == ["10 KB", "100 B zstd"]
    with pytest.raises(ValueError, match="no data set named 2 KB"):
        datasets(10, ["1 KB", "2 KB"])


def test_run_sets_option() -> None:
    assert run._args([]).sets == list(SET_NAMES)
    assert run._args(["--sets", "1 KB", "10 KB"]).sets == ["1 KB", "10 KB"]
    with pytest.raises(SystemExit):
        run._args(["--sets", "2 KB"])


def test_compare_measures_10_kb_by_default_and_knows_every_set() -> None:
    assert compare.parse_args(["--base", "x"]).sizes == ["100 B", "1 KB", "10 KB"]
    assert compare.parse_args(["--base", "x", "--sizes", "100 B zstd"]).sizes == ["100 B zstd"]
    assert {"10 KB", "100 B zstd"} <= set(compare.SIZES)


def _measure(monkeypatch: pytest.MonkeyPatch, sets: list[str]) -> tuple[list[str], list[Dataset]]:
    """run.measure with throughput and scale only, nothing produced or measured: (the throughput
    part's set names, the scale part's two sets)."""
    measured: dict[str, list[Dataset]] = {}

    def recorder(part: str) -> Any:
        def measure(bootstrap: str, sets: list[Dataset], *rest: Any) -> dict[str, Any]:
            measured[part] = sets
            return {}
        return measure

    monkeypatch.setattr(run, "_produce", lambda bootstrap, sets: None)
    monkeypatch.setattr(throughput, "measure", recorder("throughput"))
    monkeypatch.setattr(throughput, "measure_scale", recorder("scale"))
    run.measure(run._args(["--only", "throughput", "scale", "--sets", *sets, "--records", "100"]), "b:9092")
    return [d.name for d in measured["throughput"]], measured["scale"]


def test_scale_reuses_the_100_b_set_only_when_the_throughput_part_made_it(monkeypatch: pytest.MonkeyPatch) -> None:
    names, (six, wide) = _measure(monkeypatch, ["10 KB", "100 B"])
    assert names == ["100 B", "10 KB"]
    assert six.name == "100 B"
    names, (six, wide) = _measure(monkeypatch, ["10 KB"])
    assert names == ["10 KB"]
    assert (six.name, six.value_size, six.records) == ("100 B", 100, 100)  # its own, not the 10 KB set
    assert wide.total_partitions == 1200


def test_the_client_process_gets_the_codec_and_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    specs: list[dict[str, Any]] = []

    def fake_run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        specs.append(json.loads(command[-1]))
        return subprocess.CompletedProcess(command, 0, json.dumps({"skipped": REASON}) + "\n", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    ten, zstd = datasets(1000, ["10 KB", "100 B zstd"])
    assert throughput.run_client(KAFKA_PYTHON, "b:9092", zstd) == {"skipped": REASON}
    throughput.run_client(KAFKA_PYTHON, "b:9092", ten)
    assert [(s["compression"], s["batch"]) for s in specs] == [("zstd", 10_000), ("none", 1000)]


def test_a_client_that_cannot_decode_prints_a_skip(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    def consume(spec: _harness.Spec, watch: _harness.Stopwatch) -> _harness.Result:
        raise _harness.Skipped(f"cannot decode {spec.compression}")

    spec = _harness.Spec(bootstrap="b:9092", topics=["t"], partitions=6, records=10, compression="zstd")
    monkeypatch.setattr("sys.argv", ["client", json.dumps(vars(spec))])
    _harness.run(consume)
    assert json.loads(capsys.readouterr().out) == {"skipped": "cannot decode zstd"}


def test_kafka_python_says_which_codec_package_it_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("kafka")
    from benchmarks.clients import kafka_python

    monkeypatch.setitem(kafka_python.CODECS, "zstd", (lambda: False, "zstandard"))
    monkeypatch.setitem(kafka_python.CODECS, "lz4", (lambda: True, "lz4"))
    assert kafka_python.cannot_decode("zstd") == REASON
    assert kafka_python.cannot_decode("lz4") is None
    assert kafka_python.cannot_decode("none") is None
    assert kafka_python.cannot_decode("gzip") is None
    spec = _harness.Spec(bootstrap="b:9092", topics=["t"], partitions=6, records=10, compression="zstd")
    with pytest.raises(_harness.Skipped, match="zstandard"):
        kafka_python.consume(spec, _harness.Stopwatch())  # before any connection


def _rate(rate: float) -> dict[str, Any]:
    return {"records_per_s": rate, "mb_per_s": rate / 1e4, "cpu_seconds": 1.0, "cpu_seconds_per_m_records": 1.0,
            "peak_rss_mb": 50.0, "startup_seconds": 0.1}


def test_a_skipped_row_is_shown_as_skipped_with_its_reason_not_as_failed() -> None:
    runs = [{throughput.LIMIT: _rate(2e7), throughput.LITE: _rate(2e6), throughput.CONFLUENT_TUNED: _rate(1e6),
             KAFKA_PYTHON: {"skipped": REASON}} for _ in range(2)]
    for one in runs:
        throughput._with_ratios(one)
    assert throughput.outcome(runs[0][KAFKA_PYTHON]) == f"skipped: {REASON}"
    assert throughput.outcome(runs[0][throughput.LITE]) == "2,000,000 records/s"
    assert throughput.outcome({"error": "exit 1: boom"}) == "exit 1: boom"
    zstd = datasets(1000, ["100 B zstd"])[0]
    summary = throughput._summarise(runs, list(runs[0]), zstd)
    entry = summary["clients"][KAFKA_PYTHON]
    assert (entry["ok_runs"], entry["skipped"], "errors" in entry) == (0, REASON, False)
    assert summary["clients"][throughput.LITE]["vs_confluent_tuned"]["median"] == 2.0
    assert summary["clients"][throughput.LITE]["fraction_of_limit"]["median"] == 0.1
    text = report.throughput_table({zstd.name: summary})
    row = next(line for line in text.splitlines() if line.startswith(KAFKA_PYTHON))
    assert "skipped (below)" in row
    assert "failed" not in text
    assert f"  {KAFKA_PYTHON} skipped: {REASON}" in text
    assert "zstd compression, up to 10,000 records a call" in text


def test_an_old_saved_result_without_the_batch_still_renders() -> None:
    data = {"records": 10, "compression": "none", "clients": {throughput.LITE: {"runs": 1, "ok_runs": 1}}}
    assert "up to 10,000 records a call" in report.throughput_table({"1 KB": data})


def test_charts_name_a_skipped_row(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    pytest.importorskip("matplotlib")
    from benchmarks import charts

    runs = [{throughput.LITE: _rate(2e6), throughput.LIMIT: _rate(2e7), KAFKA_PYTHON: {"skipped": REASON}}]
    throughput._with_ratios(runs[0])
    zstd = datasets(1000, ["100 B zstd"])[0]
    results = {"broker": "b", "throughput": {zstd.name: throughput._summarise(runs, list(runs[0]), zstd)}}
    titles: list[str] = []
    monkeypatch.setattr(charts.plt.Axes, "set_title", lambda ax, title, **kw: titles.append(title))
    charts.throughput_chart(results, tmp_path / "t.png", "fraction_of_limit")
    assert titles
    assert titles[0].endswith(f" partitions\nlimit: compressed bytes; skipped: {KAFKA_PYTHON}")
