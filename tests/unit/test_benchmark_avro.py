"""benchmarks.avro without a broker or a registry: the ten-field schema and its records, the framing
checked against confluent-kafka's own AvroSerializer (on its mock registry), the clients' settings
and order, and the per-run ratios, summary, target line and lookup line from made-up client results."""

from __future__ import annotations

import io
import warnings
from datetime import UTC, datetime, timedelta
from typing import Any

import fastavro
import pytest

from benchmarks import avro, throughput


def mock_registry() -> Any:
    with warnings.catch_warnings():  # authlib warns of its own httpx module on import
        warnings.simplefilter("ignore")
        from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
    return MockSchemaRegistryClient({"url": "mock://"})


def test_the_schema_has_ten_fields_and_every_value_fits_it() -> None:
    assert len(avro.SCHEMA["fields"]) == 10
    parsed = avro.parsed_schema()
    for i in range(6):  # every kind: note or none, 0-2 tags, each currency
        value = avro.make_value(i)
        assert fastavro.validate(value, parsed, raise_errors=True)
        assert value["id"] == i
    assert avro.make_value(0)["note"] is None
    assert avro.make_value(1)["note"] is not None


def test_the_framing_is_confluents_avro_serializers_byte_for_byte() -> None:
    registry = mock_registry()
    values = [avro.make_value(i) for i in range(3)]
    theirs = avro.serialized_by_confluent(registry, "orders", values)
    schema_id = avro.check_framing(registry, "orders")  # raises SystemExit on any difference
    assert int.from_bytes(theirs[0][1:5], "big") == schema_id
    parsed = avro.parsed_schema()
    assert [avro.encode(parsed, schema_id, value) for value in values] == theirs
    assert theirs[0][:1] == b"\x00"


def test_a_framed_value_decodes_to_the_record_it_was_made_from() -> None:
    parsed = avro.parsed_schema()
    framed = avro.encode(parsed, 7, avro.make_value(4))
    assert framed[:5] == b"\x00\x00\x00\x00\x07"
    decoded = fastavro.schemaless_reader(io.BytesIO(framed[5:]), parsed)
    created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(milliseconds=4)
    assert decoded == {**avro.make_value(4), "created": created}
    assert list(avro.framed_values(7, 3)) == [avro.encode(parsed, 7, avro.make_value(i)) for i in range(3)]


def test_the_expected_id_sum_is_the_sum_of_the_ids_produced() -> None:
    for records in (0, 1, 2, 10, 1_000_000):
        assert avro.expected_id_sum(records) == sum(range(records))


def test_the_clients_alternate_and_confluent_kafka_is_tuned_as_the_throughput_rows() -> None:
    assert [avro.order_of(k) for k in range(3)] == [avro.PEERS, avro.PEERS[::-1], avro.PEERS]
    confluent = avro.client_for(avro.CONFLUENT, "http://127.0.0.1:1/apis/ccompat/v7", 10)
    lite = avro.client_for(avro.LITE, "http://127.0.0.1:1/apis/ccompat/v7", 10, env={"BENCH_PROFILE_DIR": "/x"})
    assert confluent.module == "avro_confluent"
    assert lite.module == "avro_lite"
    assert avro.client_for(avro.ARROW, "http://x", 10).module == "avro_lite_arrow"
    assert confluent.options["fetch.queue.backoff.ms"] == throughput.TUNED_BACKOFF_MS
    assert "fetch.queue.backoff.ms" not in lite.options
    assert lite.options["avro"] == {"registry": "http://127.0.0.1:1/apis/ccompat/v7", "id_sum": 45,
                                    "reader_schema": avro.SCHEMA}
    assert lite.env == {"AIOKAFKA_LITE_NO_NATIVE": "0", "BENCH_PROFILE_DIR": "/x"}


def test_the_defaults_are_a_million_records_and_three_runs() -> None:
    args = avro.arguments([])
    assert (args.records, args.runs, args.no_save, args.profile, args.no_profile) == (1_000_000, 3, False, False, False)
    assert avro.arguments(["--records", "200", "--runs", "1", "--no-save"]).records == 200


def result(rate: float, whole: float, other: int = 0) -> dict[str, Any]:
    http = {"GET schemas/ids/1": 1, **({"GET associations/resources/-/orders": other} if other else {})}
    registry = {"http_requests": http}
    return {"records": 1000, "records_per_s": rate, "whole_read_records_per_s": whole, "startup_seconds": 0.5,
            "cpu_seconds": 2.0, "cpu_seconds_per_m_records": 2000.0, "peak_rss_mb": 80.0, "registry": registry}


def runs(*rates: tuple[float, float, float]) -> list[dict[str, dict[str, Any]]]:
    raw = []
    for confluent, lite, arrow in rates:
        run = {avro.CONFLUENT: result(confluent, confluent / 2, other=1), avro.LITE: result(lite, lite / 2),
               avro.ARROW: result(arrow, arrow / 2)}
        avro.with_ratios(run)
        raw.append(run)
    return raw


def test_the_ratios_are_taken_within_each_run_then_summarised() -> None:
    # Run 2 is slow for both: within the run the ratio is still 2.0.
    raw = runs((10_000, 20_000, 60_000), (5_000, 10_000, 20_000), (10_000, 12_000, 40_000))
    assert [run[avro.LITE]["x_confluent"] for run in raw] == [2.0, 2.0, 1.2]
    assert [run[avro.LITE]["whole_read_x_confluent"] for run in raw] == [2.0, 2.0, 1.2]
    assert all(run[avro.CONFLUENT]["x_confluent"] == 1.0 for run in raw)
    rows = avro.summarise(raw)
    assert rows[avro.LITE]["x_confluent"] == {"median": 2.0, "min": 1.2, "max": 2.0}
    assert rows[avro.LITE]["records_per_s"] == {"median": 12_000, "min": 10_000, "max": 20_000}
    assert rows[avro.LITE]["schema_id_requests"] == [1]
    assert rows[avro.LITE]["other_requests"] == [0]
    assert rows[avro.CONFLUENT]["schema_id_requests"] == [1]
    assert rows[avro.CONFLUENT]["other_requests"] == [1]
    line, met = avro.verdict(rows, avro.LITE)
    assert met is True
    assert "poll() >= 1.5x confluent-kafka's records/s: MET (median 2.00x, runs 1.20-2.00x)" in line
    line, met = avro.verdict(rows, avro.ARROW)
    assert met is False
    assert "poll_arrow() >= 5.0x confluent-kafka's records/s: NOT MET (median 4.00x, runs 4.00-6.00x)" in line
    assert "one per schema id: holds" in avro.lookup_line(rows)
    text = avro.table(rows)
    assert "12,000 (10,000-20,000)" in text
    assert "2.00 (1.20-2.00)" in text


def test_below_the_target_and_more_than_one_lookup_are_said() -> None:
    raw = runs((10_000, 14_000, 60_000))
    raw[0][avro.LITE]["registry"]["http_requests"]["GET schemas/ids/1"] = 2
    rows = avro.summarise(raw)
    line, met = avro.verdict(rows, avro.LITE)
    assert met is False
    assert "NOT MET (median 1.40x" in line
    assert "aiokafka-lite poll(): 2 GET schemas/ids/<id> per consumer (NOT one per schema id)" in avro.lookup_line(rows)
    assert avro.request_lines(rows) == [
        "  confluent-kafka: GET schemas/ids/1 x1; GET associations/resources/-/orders x1",
        "  aiokafka-lite poll(): GET schemas/ids/1 x2", "  aiokafka-lite poll_arrow(): GET schemas/ids/1 x1"]


def test_a_failed_client_is_a_row_and_no_verdict() -> None:
    raw = runs((10_000, 20_000, 60_000))
    raw[0][avro.LITE] = {"error": "exit 1: the decoded ids sum to 3, not 45"}
    rows = avro.summarise(raw)
    assert rows[avro.LITE]["ok_runs"] == 0
    assert rows[avro.LITE]["errors"]
    assert avro.verdict(rows, avro.LITE) == (
        "target: poll() >= 1.5x confluent-kafka's records/s: not measured (a client failed)", None)
    assert "failed: exit 1: the decoded ids sum to 3" in avro.table(rows)


@pytest.mark.parametrize("label", avro.PEERS)
def test_each_client_module_imports(label: str) -> None:
    import importlib

    module = importlib.import_module(f"benchmarks.clients.{avro.MODULES[label]}")
    assert callable(module.consume)
    assert callable(module.extra)
