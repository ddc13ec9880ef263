"""Avro values through poll() (issue 42): aiokafka-lite's AvroDeserializer beside confluent-kafka's
AvroDeserializer on the same records, side by side in one run.

    python -m benchmarks.avro                                   # 1,000,000 records, 3 runs
    python -m benchmarks.avro --records 100000 --runs 1 --no-save

Starts Apache Kafka 4.3.1 and an Apicurio Registry (its Confluent-compatible API), registers one Avro
schema (a record of ten fields: ``SCHEMA``) under ``<topic>-value`` through confluent-kafka's
AvroSerializer, checks that the framing this benchmark writes (magic byte 0, the id as 4 bytes
big-endian, then ``fastavro.schemaless_writer``'s bytes) is byte for byte what that serializer
writes for a few records, and produces N records so framed to a 6-partition topic. Then, per run,
in an order that alternates from run to run, each client reads all N records in its own process
(benchmarks/clients/avro_*.py, through the throughput harness):

- confluent-kafka: ``Consumer.consume(num_messages=10,000)`` with benchmarks/clients/confluent.py's
  settings (tuned ``fetch.queue.backoff.ms``), each message's value through
  ``confluent_kafka.schema_registry.avro.AvroDeserializer`` with a ``SerializationContext``;
- aiokafka-lite: ``Consumer(value_deserializer=AvroDeserializer(SchemaRegistryClient(url)))``,
  ``await poll()`` with ``max_poll_records=10,000`` (the native record decoder), poll() awaiting the
  schema lookup itself;
- aiokafka-lite poll_arrow(): the same with ``AvroDeserializer(..., reader_schema=SCHEMA)``: each
  batch's value column is the schema's struct, decoded natively; the ``id`` field summed by pyarrow.

Both sum every decoded value's ``id`` and fail unless it is the sum of the ids produced. Records/s
counts from the first batch, decoded, to the last record (the harness's ``records_per_s``: ours gets
its batches decoded from poll(); confluent-kafka's clock starts once it decoded its first batch, so
neither window holds the first lookup); "whole read" counts from making the consumer. "x confluent"
is the ratio within each run, then summarised (median, min-max). Each client process counts the
HTTP requests its registry client sent. The issue's target: our poll() at >= 1.5x confluent-kafka's
records/s, and our poll_arrow() at >= 5x. Below either (or with ``--profile``), one more run of
each client under cProfile (not counted) prints the top 15 functions by own time (``--no-profile``: none).

Writes benchmarks/results/avro-<time>.json (``--no-save``: print only).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import fastavro

from aiokafka_lite.schema_registry.wire import frame
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.schema_registry import APICURIO_VERSION, ApicurioRegistry, confluent_client_config
from benchmarks.brokers import describe, start_broker
from benchmarks.data import PARTITIONS, Dataset
from benchmarks.report import grid, median_and_spread
from benchmarks.throughput import TUNED_BACKOFF_MS, Client, run_client, summary

SCHEMA: dict[str, Any] = {
    "type": "record", "name": "Order", "namespace": "bench.avro",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "quantity", "type": "int"},
        {"name": "currency", "type": {"type": "enum", "name": "Currency", "symbols": ["EUR", "USD", "GBP", "JPY"]}},
        {"name": "paid", "type": "boolean"},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "sku", "type": "string"},
    ],
}
CURRENCIES = ("EUR", "USD", "GBP", "JPY")
TAGS = ((), ("gift",), ("express", "fragile"))
CREATED_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
BATCH = 10_000  # records per poll() / consume() call, as the throughput harness

CONFLUENT = f"confluent-kafka Consumer + AvroDeserializer (tuned fetch.queue.backoff.ms={TUNED_BACKOFF_MS})"
LITE = "aiokafka-lite Consumer poll(), value_deserializer=AvroDeserializer"
ARROW = "aiokafka-lite Consumer poll_arrow(), AvroDeserializer(reader_schema=...): a struct column"
PEERS = (CONFLUENT, LITE, ARROW)
MODULES = {CONFLUENT: "avro_confluent", LITE: "avro_lite", ARROW: "avro_lite_arrow"}
SHORT = {CONFLUENT: "confluent-kafka", LITE: "aiokafka-lite poll()", ARROW: "aiokafka-lite poll_arrow()"}
FIGURES = ("records_per_s", "whole_read_records_per_s", "startup_seconds", "cpu_seconds",
           "cpu_seconds_per_m_records", "peak_rss_mb", "x_confluent", "whole_read_x_confluent")
TARGETS = {LITE: 1.5, ARROW: 5.0}
RESULTS = Path(__file__).parent / "results"


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- the records ---------------------------------------------------------------------------------

def make_value(i: int) -> dict[str, Any]:
    """Record ``i``: deterministic, every field type of ``SCHEMA`` exercised (a third have no note)."""
    return {
        "id": i,
        "customer": f"customer-{i % 10_000:05d}",
        "amount": (i % 100_000) / 100 + 0.99,
        "quantity": i % 50 + 1,
        "currency": CURRENCIES[i % 4],
        "paid": i % 3 != 0,
        "created": CREATED_MS + i,
        "note": None if i % 3 == 0 else f"deliver after {i % 24:02d}:00",
        "tags": list(TAGS[i % 3]),
        "sku": f"SKU-{i % 5_000:06d}",
    }


def expected_id_sum(records: int) -> int:
    """What the decoded ids of records 0 .. records-1 sum to."""
    return records * (records - 1) // 2


def parsed_schema() -> Any:
    return fastavro.parse_schema(SCHEMA)


def encode(parsed: Any, schema_id: int, value: dict[str, Any]) -> bytes:
    """A value in Confluent's wire format: magic byte 0, the id (4 bytes big-endian), the Avro binary."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, value)
    return frame(schema_id, out.getbuffer())


def framed_values(schema_id: int, records: int) -> Iterator[bytes]:
    parsed = parsed_schema()
    for i in range(records):
        yield encode(parsed, schema_id, make_value(i))


def confluent_registry() -> Any:
    """confluent_kafka.schema_registry with its avro module (authlib's import warning silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import confluent_kafka.schema_registry as registry
        import confluent_kafka.schema_registry.avro  # noqa: F401
    return registry


def serialized_by_confluent(registry_client: Any, topic: str, values: list[dict[str, Any]]) -> list[bytes]:
    """``values`` through confluent-kafka's AvroSerializer under ``<topic>-value`` (registering
    ``SCHEMA`` there when the registry does not have it yet)."""
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = confluent_registry().avro.AvroSerializer(registry_client, json.dumps(SCHEMA),
                                                          conf={"auto.register.schemas": True})
    context = SerializationContext(topic, MessageField.VALUE)
    return [serializer(value, context) for value in values]


def check_framing(registry_client: Any, topic: str, samples: int = 3) -> int:
    """Register ``SCHEMA`` through confluent-kafka's AvroSerializer and check that ``encode`` writes
    what it writes for the first ``samples`` records (each kind of note and tags); the schema id."""
    values = [make_value(i) for i in range(samples)]
    theirs = serialized_by_confluent(registry_client, topic, values)
    schema_id = int.from_bytes(theirs[0][1:5], "big")
    parsed = parsed_schema()
    ours = [encode(parsed, schema_id, value) for value in values]
    if ours != theirs:
        raise SystemExit(f"the benchmark's framing differs from confluent-kafka's AvroSerializer: "
                         f"{ours[0].hex()} against {theirs[0].hex()}")
    return schema_id


def produce_records(bootstrap: str, topic: str, schema_id: int, records: int) -> float:
    """Create the 6-partition topic and fill it round-robin over its partitions; the seconds it took."""
    began = time.monotonic()
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    rows = ({"key": None, "value": value, "partition": i % PARTITIONS}
            for i, value in enumerate(framed_values(schema_id, records)))
    produce(bootstrap, topic, rows, timeout=300.0, linger_ms=20, batch_size=1_000_000, enable_idempotence=True)
    return time.monotonic() - began


# -- the runs ------------------------------------------------------------------------------------

def client_for(label: str, registry_url: str, records: int, env: dict[str, str] | None = None) -> Client:
    """The client process for ``label``: confluent-kafka tuned as the throughput rows, ours with the
    native record decoder (its JSON's ``decoder`` says which ran)."""
    avro = {"registry": registry_url, "id_sum": expected_id_sum(records), "reader_schema": SCHEMA}
    tuned = {"fetch.queue.backoff.ms": TUNED_BACKOFF_MS} if label == CONFLUENT else {}
    return Client(MODULES[label], env={"AIOKAFKA_LITE_NO_NATIVE": "0", **(env or {})}, options={"avro": avro, **tuned})


def order_of(run: int) -> tuple[str, ...]:
    """The clients' order in run ``run`` (from 0): alternating, so drift hits all alike."""
    return PEERS if run % 2 == 0 else PEERS[::-1]


def with_ratios(run: dict[str, dict[str, Any]]) -> None:
    """Each row's records/s (and whole-read records/s) over confluent-kafka's, within one run."""
    base = run.get(CONFLUENT, {})
    for result in run.values():
        for ratio, figure in (("x_confluent", "records_per_s"), ("whole_read_x_confluent", "whole_read_records_per_s")):
            if result.get(figure) and base.get(figure):
                result[ratio] = result[figure] / base[figure]


def measure(bootstrap: str, dataset: Dataset, registry_url: str, runs: int) -> list[dict[str, dict[str, Any]]]:
    raw = []
    for k in range(runs):
        run: dict[str, dict[str, Any]] = {}
        for label in order_of(k):
            _log(f"run {k + 1}/{runs}: {label}")
            run[label] = run_client(label, bootstrap, dataset,
                                    client=client_for(label, registry_url, dataset.records))
            rate = run[label].get("records_per_s")
            _log(f"    {rate:,.0f} records/s" if rate else f"    {run[label].get('error')}")
        with_ratios(run)
        raw.append({label: run[label] for label in PEERS})
    return raw


def lookups(result: dict[str, Any]) -> tuple[int, int]:
    """(HTTP requests for a schema by id, other HTTP requests) of one client run."""
    http = result.get("registry", {}).get("http_requests", {})
    by_id = sum(n for request, n in http.items() if "schemas/ids/" in request)
    return by_id, sum(http.values()) - by_id


def summarise(raw: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label in PEERS:
        ok = [run[label] for run in raw if "records_per_s" in run.get(label, {})]
        entry: dict[str, Any] = {"runs": len(raw), "ok_runs": len(ok)}
        if errors := [run[label]["error"] for run in raw if "error" in run.get(label, {})]:
            entry["errors"] = errors
        for figure in FIGURES:
            if values := [r[figure] for r in ok if r.get(figure) is not None]:
                entry[figure] = summary(values)
        entry["registry_per_run"] = [r.get("registry") for r in ok]
        counted = [lookups(r) for r in ok]
        entry["schema_id_requests"] = sorted({c[0] for c in counted})
        entry["other_requests"] = sorted({c[1] for c in counted})
        for key in ("version", "librdkafka", "decoder", "loop", "options"):
            if values := [r[key] for r in ok if key in r]:
                entry[key] = values[0]
        out[label] = entry
    return out


def _counts(values: list[int]) -> str:
    return "/".join(str(v) for v in values) or "-"


def table(rows: dict[str, Any]) -> str:
    header = ("client", "records/s (median, min-max)", "x confluent-kafka", "whole read records/s",
              "whole read x conf.", "CPU s per 1M", "peak RSS MB", "registry GET schemas/ids", "other requests")
    lines: list[tuple[str, ...]] = [header]
    for label, entry in rows.items():
        if not entry["ok_runs"]:
            lines.append((label, "failed: " + "; ".join(entry.get("errors", []))[:150], *[""] * 7))
            continue
        cells = [median_and_spread(entry, figure, digits=digits) or "-" for figure, digits in (
            ("records_per_s", 0), ("x_confluent", 2), ("whole_read_records_per_s", 0),
            ("whole_read_x_confluent", 2), ("cpu_seconds_per_m_records", 2), ("peak_rss_mb", 0))]
        lines.append((label, *cells, _counts(entry["schema_id_requests"]), _counts(entry["other_requests"])))
    return "\n".join(grid(lines))


def verdict(rows: dict[str, Any], label: str) -> tuple[str, bool | None]:
    """The target line of ``label`` (its records/s over confluent-kafka's, median of the per-run
    ratios) and whether it is met (None: not measured)."""
    target, name = TARGETS[label], "poll_arrow()" if label == ARROW else "poll()"
    ratio = rows.get(label, {}).get("x_confluent")
    if ratio is None:
        return f"target: {name} >= {target}x confluent-kafka's records/s: not measured (a client failed)", None
    met = ratio["median"] >= target
    return (f"target: {name} >= {target}x confluent-kafka's records/s: {'MET' if met else 'NOT MET'} "
            f"(median {ratio['median']:.2f}x, runs {ratio['min']:.2f}-{ratio['max']:.2f}x)"), met


def lookup_line(rows: dict[str, Any]) -> str:
    """"One registry request per schema id per consumer", as counted in each client process."""
    parts = []
    for label, entry in rows.items():
        counts = entry.get("schema_id_requests") or []
        held = counts == [1]
        parts.append(f"{SHORT[label]}: {_counts(counts)} GET schemas/ids/<id> per consumer "
                     f"({'one per schema id: holds' if held else 'NOT one per schema id'})")
    return "registry lookups (1 schema id in the topic): " + "; ".join(parts)


def request_lines(rows: dict[str, Any]) -> list[str]:
    """Each client's registry HTTP requests as counted in its process, per run (method and path)."""
    lines = []
    for label, entry in rows.items():
        runs = ["; ".join(f"{request} x{n}" for request, n in (counts or {}).get("http_requests", {}).items()) or "none"
                for counts in entry.get("registry_per_run", [])]
        lines.append(f"  {SHORT[label]}: " + (" | ".join(runs) if len(set(runs)) > 1 else runs[0] if runs else "-"))
    return lines


def profile(bootstrap: str, dataset: Dataset, registry_url: str, label: str, top: int = 15) -> str:
    """One more run of ``label`` under cProfile (the harness's BENCH_PROFILE_DIR); the top ``top``
    functions by own time, as pstats prints them."""
    with tempfile.TemporaryDirectory(prefix="avro-profile-") as directory:
        client = client_for(label, registry_url, dataset.records, env={"BENCH_PROFILE_DIR": directory})
        result = run_client(label, bootstrap, dataset, client=client)
        files = sorted(Path(directory).glob("*.prof"))
        if not files:
            return f"no profile written: {result.get('error')}"
        out = io.StringIO()
        stats = pstats.Stats(str(files[0]), stream=out)
        stats.sort_stats("tottime").print_stats(top)
        rate = result.get("records_per_s")
        head = f"{label}, under cProfile: " + (f"{rate:,.0f} records/s" if rate else str(result.get("error")))
        return head + "\n" + out.getvalue().strip()


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.avro", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--no-profile", action="store_true", help="no cProfile run, even below the target")
    parser.add_argument("--profile", action="store_true", help="a cProfile run of each client even above the target")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    load_before = os.getloadavg()
    topic = f"bench-avro-{uuid.uuid4().hex[:6]}"
    profiles: dict[str, str] = {}
    with ExitStack() as stack:  # the broker and the registry stop whatever happens
        _log(f"starting {describe('kafka')} and Apicurio Registry {APICURIO_VERSION}")
        broker = stack.enter_context(start_broker("kafka"))
        registry = stack.enter_context(ApicurioRegistry())
        bootstrap, registry_url = broker.bootstrap_servers, registry.url
        peer = stack.enter_context(confluent_registry().SchemaRegistryClient(confluent_client_config(registry_url)))
        schema_id = check_framing(peer, topic)
        subject_versions = peer.get_versions(f"{topic}-value")
        _log(f"schema id {schema_id} under {topic}-value (versions {subject_versions}); the framing matches "
             f"confluent-kafka's AvroSerializer; producing {args.records:,} records")
        produced = produce_records(bootstrap, topic, schema_id, args.records)
        value_size = len(encode(parsed_schema(), schema_id, make_value(1)))
        dataset = Dataset("avro, 10 fields", (topic,), args.records, value_size, batch=BATCH)
        raw = measure(bootstrap, dataset, registry_url, args.runs)
        rows = summarise(raw)
        verdicts = {label: verdict(rows, label) for label in TARGETS}
        missed = any(met is False for _, met in verdicts.values())
        if args.profile or (missed and not args.no_profile):
            for label in (LITE, ARROW, CONFLUENT):
                _log(f"profiling {label}")
                profiles[label] = profile(bootstrap, dataset, registry_url, label)
    print(f"\n{describe('kafka')}, Apicurio Registry {APICURIO_VERSION}; {args.records:,} Avro records "
          f"(10 fields, {value_size} B framed for record 1), {PARTITIONS} partitions, {BATCH:,} a call; "
          f"{args.runs} run(s), median (min-max), order alternating")
    print(table(rows))
    print("\n".join(line for line, _ in verdicts.values()))
    print(lookup_line(rows))
    print("registry HTTP requests per consumer process, per run if they differ:")
    print("\n".join(request_lines(rows)))
    for text in profiles.values():
        print(f"\nprofile: {text}")
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"avro-{time.strftime('%Y%m%d-%H%M%S')}.json"
        path.write_text(json.dumps({
            "broker": describe("kafka"), "registry": f"Apicurio Registry {APICURIO_VERSION}",
            "records": args.records, "runs": args.runs, "partitions": PARTITIONS, "batch": BATCH,
            "schema": SCHEMA, "schema_id": schema_id, "value_size_record_1": value_size,
            "started": started, "produce_seconds": produced, "cpus": os.cpu_count(),
            "load_average": {"before": load_before, "after": os.getloadavg()},
            "python": sys.version.split()[0], "targets": {label: TARGETS[label] for label in TARGETS},
            "targets_met": {label: met for label, (_, met) in verdicts.items()},
            "clients": rows, "profiles": profiles, "raw": raw}, indent=1, default=str) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
