"""Records to one Arrow batch: the native builder beside its pyarrow twin (a micro-benchmark, no broker).

    PYTHONPATH=. python benchmarks/arrow_micro.py                 # 1,000,000 x 100 B in chunks of 10,000
    PYTHONPATH=. python benchmarks/arrow_micro.py --records 200000 --value-size 1000 --runs 5

Each chunk is a ``RecordColumns`` as the decoder makes it: offsets a range, one timestamp per record,
keys None, distinct 100-byte values, no headers. The time covers ``build_arrow_batch`` and the import
into ``pyarrow.RecordBatch`` (the best of the runs is reported).
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]

from aiokafka_lite.arrow import build_arrow_batch
from aiokafka_lite.protocol import native
from aiokafka_lite.protocol.records.columns import RecordColumns


def _chunks(records: int, chunk: int, size: int) -> list[RecordColumns]:
    noise = os.urandom(size * 2)
    out = []
    for start in range(0, records, chunk):
        n = min(chunk, records - start)
        values = [noise[i % size:i % size + size] for i in range(start, start + n)]
        out.append(RecordColumns("bench", start // chunk % 8, range(start, start + n),
                                 list(range(1_700_000_000_000 + start, 1_700_000_000_000 + start + n)), 0,
                                 [None] * n, values, None, 0))
    return out


def _best_seconds(chunks: list[RecordColumns], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        began = time.perf_counter()
        batch = pa.record_batch(build_arrow_batch(chunks))
        best = min(best, time.perf_counter() - began)
        assert batch.num_rows == sum(map(len, chunks))
        del batch
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=10_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if not native.available():
        raise SystemExit(f"the native extension is not available: {native.why_python() or 'not built'}")
    chunks = _chunks(args.records, args.chunk, args.value_size)
    seconds = {}
    for name in ("native", "python"):
        native.use_decoder(name)  # type: ignore[arg-type]
        seconds[name] = _best_seconds(chunks, args.runs)
        print(f"{name:>7}: {seconds[name] * 1000:8.1f} ms  {args.records / seconds[name]:>14,.0f} rows/s")
    print(f"native / python: {seconds['python'] / seconds['native']:.1f}x faster "
          f"({args.records:,} x {args.value_size} B in chunks of {args.chunk:,}, best of {args.runs}, "
          f"pyarrow {pa.__version__})")


if __name__ == "__main__":
    main()
