"""Micro-benchmark: the record decoder alone, Rust against pure Python, side by side in one run.

Decodes fetch data already in memory (no broker, no consumer) through PartitionRecords, the
consumer's decoding entry point, and prints records/s for each decoder and their ratio:

* 1,000,000 records of 100 bytes, uncompressed, in batches of 1,000 records;
* 200,000 records of 1 KB, lz4, in batches of 200 records.

A last row times iteration alone (``for r in records: n += len(r.value)`` over 1M decoded records):
RecordColumns' pure-Python iterator against the native one.

Run: PYTHONPATH=$PWD python benchmarks/decode_micro.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import time

from aiokafka_lite.protocol import native
from aiokafka_lite.protocol.compression import Codec
from aiokafka_lite.protocol.records.build import RecordSpec, build_record_batch
from aiokafka_lite.protocol.records.columns import RecordChunks
from aiokafka_lite.protocol.records.decode import PartitionRecords


def fetch_data(records: int, size: int, per_batch: int, codec: Codec) -> bytes:
    """``records`` records of ``size`` bytes (8-byte key, the rest value) in batches."""
    parts = []
    for base in range(0, records, per_batch):
        specs = [RecordSpec(b"%08d" % (base + i), os.urandom(size // 4).hex().encode()[: size - 8] * 1)
                 for i in range(per_batch)]
        parts.append(build_record_batch(specs, base_offset=base, codec=codec))
    return b"".join(parts)


def decode_seconds(data: bytes, iterate: bool) -> float:
    started = time.perf_counter()
    reader = PartitionRecords("t", 0, data, 0)
    chunks = reader.take()
    if iterate:
        for _ in chunks:
            pass
    else:
        for chunk in chunks.chunks:
            _ = chunk.values  # the native decoder makes the Python columns on first access
    return time.perf_counter() - started


def compare(label: str, data: bytes, records: int, repeat: int) -> None:
    for iterate in (False, True):
        rates = {}
        for name in ("python", "native"):
            native.use_decoder(name)
            best = min(decode_seconds(data, iterate) for _ in range(repeat))
            rates[name] = records / best
        what = "decode + iterate" if iterate else "decode to columns"
        print(f"{label:32} {what:18} python {rates['python'] / 1e6:6.2f} M rec/s   "
              f"native {rates['native'] / 1e6:6.2f} M rec/s   ratio {rates['native'] / rates['python']:5.2f}x")


def iterate_seconds(records: RecordChunks) -> float:
    started = time.perf_counter()
    n = 0
    for r in records:
        n += len(r.value)
    return time.perf_counter() - started


def compare_iteration(data: bytes, records: int, repeat: int) -> None:
    native.use_decoder("native")
    chunks = PartitionRecords("t", 0, data, 0).take()
    best: dict[native.DecoderName, float] = {"python": float("inf"), "native": float("inf")}
    for _ in range(repeat):  # interleaved: a shared machine's load changes between runs
        for name in best:
            native.use_decoder(name)
            best[name] = min(best[name], iterate_seconds(chunks))
    rates = {name: records / seconds for name, seconds in best.items()}
    print(f"{'1M x 100 B, decoded':32} {'iterate (loop)':18} python {rates['python'] / 1e6:6.2f} M rec/s   "
          f"native {rates['native'] / 1e6:6.2f} M rec/s   ratio {rates['native'] / rates['python']:5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (the best is kept)")
    args = parser.parse_args()
    if not native.available():
        raise SystemExit(f"the native extension is not available: {native.why_python()}")
    small = fetch_data(1_000_000, 100, 1000, Codec.NONE)
    compare("1M x 100 B, uncompressed", small, 1_000_000, args.repeat)
    compare("200k x 1 KB, lz4", fetch_data(200_000, 1000, 200, Codec.LZ4), 200_000, args.repeat)
    compare_iteration(small, 1_000_000, args.repeat)


if __name__ == "__main__":
    main()
