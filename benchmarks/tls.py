"""poll() over TLS against plaintext, beside confluent-kafka (issue 43): ``python -m benchmarks.tls``.

    python -m benchmarks.tls [--records 1000000] [--runs 3] [--profile FILE]

On plaintext connections the native extension receives responses on its I/O threads; on TLS the
event loop receives them (asyncio's SSL transport, OpenSSL decrypting on the loop's thread), while
librdkafka decrypts on its broker threads. This measures what that costs: Apache Kafka (the testing
package's default broker, 4.4.0) with a PLAINTEXT and an SSL listener (a certificate from a CA made
for the run), the same records read by
aiokafka-lite ``poll()`` and by confluent-kafka (tuned, as in ``benchmarks.run``) over each listener,
alternating, each in its own process. Per row: records/s (first record to last) and the process's
CPU seconds per million records; then TLS / plaintext for each client. ``--profile FILE`` writes a
cProfile of one aiokafka-lite TLS read (the loop's share of the decryption shows there).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.idle import cpu_seconds
from benchmarks.timed_read import read_timed

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 6


def _lite(spec: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    from aiokafka_lite import Consumer, TopicPartition

    async def read() -> dict[str, Any]:
        tls = {"security_protocol": "SSL", "ssl_cafile": spec["ca"]} if spec["tls"] else {}
        consumer = Consumer(bootstrap_servers=spec["bootstrap"], enable_auto_commit=False,
                            auto_offset_reset="earliest", max_poll_records=10_000, **tls)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(spec["topic"], p) for p in range(PARTITIONS)])
            timed = await read_timed(consumer, spec["records"], poll_timeout=5.0)
            assert timed.first is not None
            return {"records": timed.records, "seconds": timed.last - timed.first}
        finally:
            await consumer.close()

    cpu0 = cpu_seconds()
    if spec.get("profile"):
        import cProfile

        profiler = cProfile.Profile()
        result = profiler.runcall(asyncio.run, read())
        profiler.dump_stats(spec["profile"])
    else:
        result = asyncio.run(read())
    result["cpu_seconds"] = cpu_seconds() - cpu0
    return result


def _confluent(spec: dict[str, Any]) -> dict[str, Any]:
    import confluent_kafka

    settings: dict[str, Any] = {"bootstrap.servers": spec["bootstrap"], "group.id": f"b-{uuid.uuid4().hex[:8]}",
                                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                "fetch.queue.backoff.ms": 10}
    if spec["tls"]:
        settings.update({"security.protocol": "SSL", "ssl.ca.location": spec["ca"]})
    cpu0 = cpu_seconds()
    consumer = confluent_kafka.Consumer(settings)
    try:
        consumer.assign([confluent_kafka.TopicPartition(spec["topic"], p, confluent_kafka.OFFSET_BEGINNING)
                         for p in range(PARTITIONS)])
        first: float | None = None
        read = 0
        while read < spec["records"]:
            messages = consumer.consume(10_000, timeout=5.0)
            if messages and first is None:
                first = time.perf_counter()
            read += sum(1 for m in messages if m.error() is None)
        assert first is not None
        seconds = time.perf_counter() - first
    finally:
        consumer.close()
    return {"records": read, "seconds": seconds, "cpu_seconds": cpu_seconds() - cpu0}


CLIENTS = {"aiokafka-lite": _lite, "confluent-kafka": _confluent}


def _run_child(spec: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "benchmarks.tls", "--child", json.dumps(spec)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"{spec['client']} ({'TLS' if spec['tls'] else 'plaintext'}) failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tls", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", help="write a cProfile of one aiokafka-lite TLS read here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(CLIENTS[spec["client"]](spec)), flush=True)
        return
    from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker
    from aiokafka_lite.testing.certs import TestCA, kafka_ssl_listener_properties
    from aiokafka_lite.testing.helpers import create_topic, produce

    with tempfile.TemporaryDirectory(prefix="aiokafka-lite-tls-bench-") as scratch:
        ca = TestCA.create(Path(scratch) / "ca")
        cert = ca.issue("broker", ["localhost", "127.0.0.1"])
        broker = ApacheKafkaBroker(extra_listeners={"SSL": "SSL"},
                                   extra_properties=kafka_ssl_listener_properties("SSL", cert)).start()
        try:
            plain = broker.bootstrap_servers
            tls = f"127.0.0.1:{broker.listener_port('SSL')}"
            topic = f"bench-tls-{uuid.uuid4().hex[:8]}"
            create_topic(plain, topic, partitions=PARTITIONS)
            value = b"x" * args.value_bytes
            produce(plain, topic, ({"value": value, "partition": i % PARTITIONS} for i in range(args.records)),
                    timeout=600, linger_ms=20, batch_size=1_000_000)
            rows: dict[str, list[dict[str, Any]]] = {}
            for run in range(args.runs):
                for client in CLIENTS:
                    for secure in (False, True) if run % 2 == 0 else (True, False):
                        label = f"{client} {'TLS' if secure else 'plaintext'}"
                        spec = {"client": client, "bootstrap": tls if secure else plain, "tls": secure,
                                "ca": str(ca.cert_path), "topic": topic, "records": args.records}
                        result = _run_child(spec)
                        rows.setdefault(label, []).append(result)
                        print(f"[{time.strftime('%H:%M:%S')}] run {run + 1}: {label}: "
                              f"{result['records'] / result['seconds']:,.0f} records/s", file=sys.stderr, flush=True)
            if args.profile:
                _run_child({"client": "aiokafka-lite", "bootstrap": tls, "tls": True, "ca": str(ca.cert_path),
                            "topic": topic, "records": args.records, "profile": args.profile})
        finally:
            broker.stop()
    summary = {}
    print(f"{args.records:,} x {args.value_bytes} B, {PARTITIONS} partitions, Apache Kafka {broker.version}, "
          f"{args.runs} runs (medians)")
    for label, results in rows.items():
        rate = statistics.median(r["records"] / r["seconds"] for r in results)
        cpu = statistics.median(r["cpu_seconds"] / r["records"] * 1e6 for r in results)
        summary[label] = {"records_per_s": rate, "cpu_s_per_million": cpu}
        print(f"  {label:28} {rate:>12,.0f} records/s   {cpu:6.2f} CPU s per 1M")
    for client in CLIENTS:
        tls_rate = summary[f"{client} TLS"]["records_per_s"]
        plain_rate = summary[f"{client} plaintext"]["records_per_s"]
        print(f"  {client}: TLS / plaintext {tls_rate / plain_rate:.2f}")
    lite_tls, theirs_tls = (summary[f"{c} TLS"]["records_per_s"] for c in CLIENTS)
    print(f"  aiokafka-lite / confluent-kafka over TLS: {lite_tls / theirs_tls:.2f}")
    print(json.dumps({"records": args.records, "value_bytes": args.value_bytes, "rows": rows, "summary": summary}))


if __name__ == "__main__":
    main()
