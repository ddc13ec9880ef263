"""The benchmark's bookkeeping without a broker: ratios within a run, what-ran fields, the tables."""

from __future__ import annotations

import importlib.util
from typing import Any

from benchmarks import report, throughput
from benchmarks.clients._harness import Spec
from benchmarks.data import Dataset, scale_datasets

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
