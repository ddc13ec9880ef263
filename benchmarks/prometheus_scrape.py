"""How long a Prometheus scrape of the FastAPI example takes at 1,000 assigned partitions.

Starts Apache Kafka 4.3.1, creates a topic of ``--partitions`` partitions with ``--per-partition``
records in each, and runs examples/fastapi_worker's app in process (its lifespan: one consumer in a
group and the task that polls it) until the worker owns every partition and has processed every
record, so each partition has a known lag. Then, while the worker keeps polling, it times
``--scrapes`` scrapes of each kind, one after another with a short pause (the loop runs the consumer
in between), and reports the median, p99 and max in milliseconds:

* ``handler``: the app's ``GET /metrics`` route function (ConsumerCollector.text() and the app's
  two counters through prometheus_client): the work a scrape costs the service;
* ``fastapi``: the same request through the whole FastAPI app, called as an ASGI server calls it
  (routing, the response's headers and body sent; no socket, no HTTP parsing);
* ``httpx + fastapi``: the same through httpx's ASGITransport, the client's work included;
* ``metrics()``: ``consumer.metrics()`` alone, the snapshot every scrape starts from;
* ``generate_latest``: the same collector through a prometheus_client registry and its own text
  writer, for comparison (what ``register(consumer)`` + prometheus_client's exporters cost).

    python -m benchmarks.prometheus_scrape                       # 1,000 partitions, 1,000 scrapes each
    python -m benchmarks.prometheus_scrape --partitions 200 --scrapes 200 --no-save

Writes benchmarks/results/prometheus_scrape.json (``--no-save``: print only).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import logging
import os
import platform
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, generate_latest

from aiokafka_lite.testing.helpers import create_topic, produce

from .brokers import KAFKA_VERSION, start_broker

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "prometheus_scrape.json"
TARGET_MS = 5.0  # issue 22: under 5 ms per scrape at 1,000 partitions
# A GET /metrics as an ASGI server (uvicorn) hands it to the app.
SCOPE = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
         "path": "/metrics", "raw_path": b"/metrics", "query_string": b"", "root_path": "",
         "headers": [(b"host", b"worker"), (b"accept", b"*/*")], "client": ("127.0.0.1", 50000),
         "server": ("127.0.0.1", 8000)}


def load_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fastapi_worker_app", ROOT / "examples" / "fastapi_worker" / "app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def summary(times: list[tuple[float, float]]) -> dict[str, float]:
    """Milliseconds of wall time (what a scraper waits, other processes' load included) and of
    the loop thread's CPU time (what the scrape itself costs) per scrape."""
    out: dict[str, float] = {"scrapes": len(times)}
    for which, column in (("", 0), ("cpu_", 1)):
        ms = sorted(t[column] * 1000 for t in times)
        out.update({f"{which}median_ms": round(statistics.median(ms), 3),
                    f"{which}p99_ms": round(ms[max(int(len(ms) * 0.99) - 1, 0)], 3),
                    f"{which}max_ms": round(ms[-1], 3)})
    return out


async def timed(call: Callable[[], Awaitable[Any]], scrapes: int, pause: float) -> list[tuple[float, float]]:
    times = []
    for _ in range(scrapes):
        started, cpu_started = time.perf_counter(), time.thread_time()
        await call()
        times.append((time.perf_counter() - started, time.thread_time() - cpu_started))
        await asyncio.sleep(pause)  # the worker polls and heartbeats in between, as between real scrapes
    return times


async def measure(bootstrap: str, topic: str, partitions: int, records: int, scrapes: int,
                  pause: float) -> dict[str, Any]:
    app = load_app().create_app({"bootstrap.servers": bootstrap, "group.id": f"{topic}-group",
                                 "client.id": "bench-worker", "auto.offset.reset": "earliest"}, [topic])
    async with app.router.lifespan_context(app):
        worker = app.state.worker
        consumer = worker.consumer
        deadline = time.monotonic() + 120
        while worker.processed < records or len(consumer.assignment()) < partitions:
            if time.monotonic() > deadline:
                raise SystemExit(f"the worker processed {worker.processed} of {records} records, owns "
                                 f"{len(consumer.assignment())} of {partitions} partitions after 120 s")
            await asyncio.sleep(0.2)
        lagged = sum(1 for v in consumer.metrics()["lag"].values() if v is not None)
        [handler] = [r.endpoint for r in app.routes if getattr(r, "path", None) == "/metrics"]
        body = (await handler()).body
        registry = CollectorRegistry()
        registry.register(app.state.prometheus)

        async def asgi_scrape(http: httpx.AsyncClient) -> None:
            response = await http.get("/metrics")
            assert response.status_code == 200

        async def asgi_call() -> None:
            sent: list[dict[str, Any]] = []

            async def receive() -> dict[str, Any]:
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            await app(dict(SCOPE), receive, send)
            assert sent[0]["status"] == 200

        async def snapshot() -> None:
            consumer.metrics()

        async def through_registry() -> None:
            generate_latest(registry)

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://worker") as http:
            await timed(handler, 20, pause)  # warm-up
            rows = {
                "handler": summary(await timed(handler, scrapes, pause)),
                "fastapi": summary(await timed(asgi_call, scrapes, pause)),
                "httpx + fastapi": summary(await timed(lambda: asgi_scrape(http), scrapes, pause)),
                "metrics()": summary(await timed(snapshot, scrapes, pause)),
                "generate_latest": summary(await timed(through_registry, scrapes, pause)),
            }
        return {"partitions": partitions, "records": records, "partitions_with_lag": lagged,
                "body_bytes": len(body), "body_lines": body.count(b"\n"),
                "record_decoder": consumer.metrics()["record_decoder"], "results": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--per-partition", type=int, default=2, help="records produced to each partition")
    parser.add_argument("--scrapes", type=int, default=1000, help="timed scrapes of each kind")
    parser.add_argument("--pause", type=float, default=0.005, help="seconds between scrapes")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    module_app = load_app()  # its import configures logging at INFO: quiet the per-request lines
    del module_app
    logging.getLogger("httpx").setLevel(logging.WARNING)
    topic = f"prometheus-scrape-{int(time.time())}"
    records = args.partitions * args.per_partition
    with start_broker("kafka") as broker:
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, topic, partitions=args.partitions, timeout=120)
        produce(bootstrap, topic, [{"value": f"v{i}", "partition": i % args.partitions} for i in range(records)])
        result = asyncio.run(measure(bootstrap, topic, args.partitions, records, args.scrapes, args.pause))
    result.update({"broker": f"Apache Kafka {KAFKA_VERSION}", "python": platform.python_version(),
                   "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
                   "target_ms": TARGET_MS, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    print(f"{args.partitions} partitions ({result['partitions_with_lag']} with a lag sample), "
          f"{result['body_lines']} lines / {result['body_bytes']} bytes a scrape, decoder {result['record_decoder']}")
    print(f"  {'':16} {'wall ms: median':>15} {'p99':>8} {'max':>8}   {'CPU ms: median':>14} {'p99':>8} {'max':>8}")
    for name, row in result["results"].items():
        print(f"  {name:16} {row['median_ms']:15.3f} {row['p99_ms']:8.3f} {row['max_ms']:8.3f}   "
              f"{row['cpu_median_ms']:14.3f} {row['cpu_p99_ms']:8.3f} {row['cpu_max_ms']:8.3f}")
    print(f"  ({args.scrapes} scrapes each; load average {' '.join(f'{x:.2f}' for x in result['load_average'])})")
    if not args.no_save:
        RESULT.write_text(json.dumps(result, indent=2) + "\n")
        print(f"written to {RESULT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
