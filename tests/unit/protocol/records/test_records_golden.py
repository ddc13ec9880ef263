"""Batches written by librdkafka (captured by tests/data/capture_batches.py) decode as expected."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.protocol.compression import Codec
from aiokafka_lite.protocol.records.decode import PartitionRecords, iter_batches

pytestmark = pytest.mark.usefixtures("record_decoder")

BATCHES = Path(__file__).resolve().parents[4] / "tests" / "data" / "batches"
CASES = sorted(p.stem for p in BATCHES.glob("*.json"))


def load(case: str) -> tuple[bytes, dict[str, Any]]:
    return (BATCHES / f"{case}.bin").read_bytes(), json.loads((BATCHES / f"{case}.json").read_text())


def b64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def test_golden_files_exist() -> None:
    assert {"v2_none", "v2_gzip", "v2_snappy", "v2_lz4", "v2_zstd", "v2_transactions"} <= set(CASES)


@pytest.mark.parametrize("case", CASES)
def test_golden_batch_decodes_to_what_was_produced(case: str) -> None:
    data, meta = load(case)
    check_crcs = meta.get("check_crcs", True)
    batches = list(iter_batches(data, meta["topic"], meta["partition"], check_crcs=check_crcs))
    assert {b.codec for b in batches if not b.is_control} == {Codec[meta["codec"].upper()]}
    assert len(batches) > 1  # several batches per fetch, as linger/batch settings intended
    reader = PartitionRecords(meta["topic"], meta["partition"], data, 0,
                              check_crcs=check_crcs,
                              read_committed=meta.get("isolation_level") == "read_committed",
                              aborted_transactions=meta.get("expected_aborted_transactions"))
    records = reader.take()
    got = [{"offset": r.offset, "timestamp": r.timestamp, "key": r.key, "value": r.value,
            "headers": [list(h) for h in r.headers]} for r in records]
    want = [{"offset": e["offset"], "timestamp": e["timestamp"], "key": b64(e["key"]),
             "value": b64(e["value"]),
             "headers": [[k, b64(v)] for k, v in e["headers"]]} for e in meta["records"]]
    assert got == want
    assert reader.position == meta["high_watermark"]
    assert {r.timestamp_type for r in records} == {0}


@pytest.mark.parametrize("case", [c for c in CASES if c != "v2_transactions"])
def test_golden_crcs_are_verified(case: str) -> None:
    data, meta = load(case)
    for batch in iter_batches(data, meta["topic"], 0):
        batch.validate_crc()


def test_golden_transactions_read_uncommitted_sees_aborted_records() -> None:
    data, meta = load("v2_transactions")
    reader = PartitionRecords(meta["topic"], 0, data, 0, check_crcs=False)
    assert [r.offset for r in reader.take()] == meta["read_uncommitted_offsets"]
    assert reader.position == meta["high_watermark"]
