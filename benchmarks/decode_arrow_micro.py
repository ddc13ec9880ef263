"""Micro-benchmark: fetch data to one Arrow batch, the raw-span path against the Python-column path.

Both run the native decoder on fetch data already in memory (no broker) and end with a
``pyarrow.RecordBatch``:

* columns: each batch through ``decode_v2_batch`` (a bytes object per key and value), then
  ``records_to_arrow`` copies the Python columns (the path before ``decode_v2_raw``);
* raw: ``PartitionRecords.take()`` (``decode_v2_raw``: spans, no per-record object), then
  ``records_to_arrow`` copies the spans (what ``poll_arrow()`` does now).

Run: PYTHONPATH=$PWD python benchmarks/decode_arrow_micro.py [--repeat N]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]

from aiokafka_lite.arrow import build_arrow_batch
from aiokafka_lite.protocol import native
from aiokafka_lite.protocol.compression import Codec
from aiokafka_lite.protocol.records.columns import RecordColumns
from aiokafka_lite.protocol.records.decode import PartitionRecords, iter_batches
from aiokafka_lite.protocol.records.v2 import LOG_OVERHEAD
from benchmarks.decode_micro import fetch_data


def via_columns(data: bytes) -> int:
    chunks = []
    start = 0
    for batch in iter_batches(data, "t", 0):
        end = start + LOG_OVERHEAD + batch.header.batch_length
        offsets, stamps, stamp_type, keys, values, headers = native.active.decode_v2_batch(
            data, start, end, True, 1 << 30)
        chunks.append(RecordColumns("t", 0, offsets, stamps, stamp_type, keys, values, headers, None))
        start = end
    return int(pa.record_batch(build_arrow_batch(chunks)).num_rows)


def via_raw(data: bytes) -> int:
    chunks = PartitionRecords("t", 0, data, 0).take().chunks
    return int(pa.record_batch(build_arrow_batch(chunks)).num_rows)


def best_seconds(run: Callable[[bytes], int], data: bytes, records: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        assert run(data) == records
        best = min(best, time.perf_counter() - started)
    return best


def compare(label: str, data: bytes, records: int, repeat: int) -> None:
    old = best_seconds(via_columns, data, records, repeat)
    new = best_seconds(via_raw, data, records, repeat)
    print(f"{label:28} columns {records / old / 1e6:6.2f} M rows/s ({old * 1000:6.1f} ms)   "
          f"raw {records / new / 1e6:6.2f} M rows/s ({new * 1000:6.1f} ms)   ratio {old / new:4.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (the best is kept)")
    args = parser.parse_args()
    if not native.available():
        raise SystemExit(f"the native extension is not available: {native.why_python()}")
    native.use_decoder("native")
    compare("1M x 100 B, uncompressed", fetch_data(1_000_000, 100, 1000, Codec.NONE), 1_000_000, args.repeat)
    compare("200k x 1 KB, lz4", fetch_data(200_000, 1000, 200, Codec.LZ4), 200_000, args.repeat)


if __name__ == "__main__":
    main()
