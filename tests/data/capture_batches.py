"""Capture golden record batches written by librdkafka, for the decoder's unit tests.

Run: .venv/bin/python tests/data/capture_batches.py

It starts librdkafka's mock cluster (it lives inside a confluent_kafka.Producer handle, on
127.0.0.1), produces the same records once per compression codec (and as committed/aborted
transactions), then reads each partition's raw ``records`` bytes back
with a hand-written Fetch v4 request over a plain socket. For every case it writes
``batches/<case>.bin`` (the raw bytes) and ``batches/<case>.json`` (what a decoder must find).
The mock cluster, and with it every broker, stops when the producers are garbage-collected
at the end of ``main()``.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import sys
from pathlib import Path
from typing import Any

import confluent_kafka

OUT_DIR = Path(__file__).parent / "batches"
BASE_TS = 1_700_000_000_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def sample_records() -> list[dict[str, Any]]:
    """Records covering what a decoder must handle: headers, null key/value, empty value, sizes."""
    records: list[dict[str, Any]] = []
    for i in range(12):
        key: bytes | None = b"key-%d" % i
        value: bytes | None = (b"value-%d " % i) * (1 + i * 7)
        headers: list[tuple[str, bytes | None]] = []
        if i % 3 == 0:
            headers = [("trace-id", b"t%d" % i), ("empty", b""), ("none", None)]
        if i == 4:
            key = None
        if i == 5:
            value = None
        if i == 6:
            value = b""
        records.append({"key": key, "value": value, "headers": headers, "timestamp": BASE_TS + i * 1000})
    return records


def produce(producer: confluent_kafka.Producer, topic: str, records: list[dict[str, Any]]) -> None:
    for r in records:
        producer.produce(topic, value=r["value"], key=r["key"], partition=0, timestamp=r["timestamp"],
                         headers=r["headers"] or None)
    if producer.flush(15) != 0:
        raise RuntimeError(f"could not deliver all records to {topic}")


# --- a minimal Fetch v4 client (non-flexible request header v1, response header v0) ----------

def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def fetch_all(host: str, port: int, topic: str, isolation_level: int = 0) -> dict[str, Any]:
    """Fetch partition 0 from offset 0 up to the end, concatenating the raw records bytes.

    The mock broker answers each Fetch with only some batches, so this fetches again from the
    offset after the last complete batch until it reaches the high watermark (or the LSO).
    """
    result = fetch_v4(host, port, topic, 0, isolation_level)
    chunks = [result["records"]]
    end = result["last_stable_offset"] if isolation_level else result["high_watermark"]
    position = _next_offset(result["records"], 0)
    while position < end:
        more = fetch_v4(host, port, topic, position, isolation_level)
        if not more["records"]:
            raise RuntimeError(f"fetch at {position} returned nothing before the end {end}")
        chunks.append(more["records"])
        position = _next_offset(more["records"], position)
    return {**result, "records": b"".join(chunks)}


def _next_offset(records: bytes, position: int) -> int:
    """The offset after the last complete v2 batch (independent of the decoder under test)."""
    pos = 0
    while pos + 61 <= len(records):
        base_offset, length = struct.unpack_from(">qi", records, pos)
        if pos + 12 + length > len(records):
            break
        last_offset_delta = struct.unpack_from(">i", records, pos + 23)[0]
        position = base_offset + last_offset_delta + 1
        pos += 12 + length
    return position


def fetch_v4(host: str, port: int, topic: str, offset: int, isolation_level: int = 0) -> dict[str, Any]:
    body = struct.pack(">iiiib", -1, 500, 1, 64 * 1024 * 1024, isolation_level)
    body += struct.pack(">i", 1) + _string(topic)
    body += struct.pack(">i", 1) + struct.pack(">iqi", 0, offset, 64 * 1024 * 1024)
    header = struct.pack(">hhi", 1, 4, 7) + _string("golden-capture")
    request = header + body
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        response = _recv_exact(sock, size)
    return _parse_fetch_v4(response)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def _parse_fetch_v4(data: bytes) -> dict[str, Any]:
    pos = 0

    def take(fmt: str) -> Any:
        nonlocal pos
        values = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return values[0] if len(values) == 1 else values

    take(">i")  # correlation id
    take(">i")  # throttle_time_ms
    assert take(">i") == 1, "expected one topic"
    name_len = take(">h")
    pos += name_len
    assert take(">i") == 1, "expected one partition"
    _partition, error_code, high_watermark, last_stable = take(">ihqq")
    if error_code:
        raise RuntimeError(f"fetch error code {error_code}")
    aborted_count = take(">i")
    aborted = [list(take(">qq")) for _ in range(max(aborted_count, 0))]
    records_len = take(">i")
    records = data[pos:pos + records_len] if records_len > 0 else b""
    return {"high_watermark": high_watermark, "last_stable_offset": last_stable,
            "aborted_transactions": aborted if aborted_count >= 0 else None, "records": records}


# --- cases --------------------------------------------------------------------------------------

def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def expected_json(records: list[dict[str, Any]], first_offset: int) -> list[dict[str, Any]]:
    return [{"offset": first_offset + i, "timestamp": r["timestamp"], "key": _b64(r["key"]),
             "value": _b64(r["value"]), "headers": [[k, _b64(v)] for k, v in r["headers"]]}
            for i, r in enumerate(records)]


def save(case: str, fetched: dict[str, Any], meta: dict[str, Any]) -> None:
    (OUT_DIR / f"{case}.bin").write_bytes(fetched["records"])
    meta = {**meta, "high_watermark": fetched["high_watermark"],
            "last_stable_offset": fetched["last_stable_offset"],
            "aborted_transactions": fetched["aborted_transactions"]}
    (OUT_DIR / f"{case}.json").write_text(json.dumps(meta, indent=1) + "\n")
    attrs = _first_batch_codec_bits(fetched["records"])
    print(f"{case:24s} {len(fetched['records']):6d} bytes, first batch magic/codec {attrs}")


def _first_batch_codec_bits(records: bytes) -> tuple[int, int]:
    magic = records[16]
    if magic == 2:
        return magic, struct.unpack_from(">h", records, 21)[0] & 7
    return magic, records[18] & 7


def capture_codecs(bootstrap: str, host: str, port: int) -> None:
    records = sample_records()
    for codec in CODECS:
        topic = f"golden-{codec}"
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                                             "linger.ms": 200, "batch.num.messages": 5,
                                             "enable.idempotence": codec == "zstd"})
        produce(producer, topic, records)
        fetched = fetch_all(host, port, topic)
        check_codec(codec, fetched["records"], 2)
        save(f"v2_{codec}", fetched, {"topic": topic, "partition": 0, "magic": 2, "codec": codec,
                                      "records": expected_json(records, 0)})


def capture_transactions(bootstrap: str, host: str, port: int) -> None:
    """Committed, aborted, committed: read_committed must keep only the committed records."""
    topic = "golden-txn"
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "golden-tx",
                                         "linger.ms": 50})
    producer.init_transactions(15)
    plan = (("commit", 0, 3), ("abort", 3, 6), ("commit", 6, 9))
    records = sample_records()
    kept: list[dict[str, Any]] = []
    all_offsets: list[int] = []
    aborted_first_offsets: list[int] = []
    offsets_seen = 0
    for outcome, start, stop in plan:
        producer.begin_transaction()
        produce(producer, topic, records[start:stop])
        if outcome == "commit":
            producer.commit_transaction(15)
        else:
            producer.abort_transaction(15)
        # each transaction takes its records' offsets plus one for its control marker
        if outcome == "commit":
            kept.extend(dict(r, offset=offsets_seen + i) for i, r in enumerate(records[start:stop]))
        else:
            aborted_first_offsets.append(offsets_seen)
        all_offsets.extend(range(offsets_seen, offsets_seen + stop - start))
        offsets_seen += (stop - start) + 1
    fetched = fetch_all(host, port, topic, isolation_level=1)
    expected = [{**e, "offset": r["offset"]} for e, r in zip(expected_json(kept, 0), kept, strict=True)]
    producer_id = struct.unpack_from(">q", fetched["records"], 43)[0]
    save("v2_transactions", fetched, {
        "topic": topic, "partition": 0, "magic": 2, "codec": "none", "isolation_level": "read_committed",
        # The mock broker writes its control batches with CRC 0 and returns no aborted-transaction
        # list, so the decoder is checked with check_crcs=False and the list a real broker would send.
        "check_crcs": False,
        "expected_aborted_transactions": [[producer_id, first] for first in aborted_first_offsets],
        "read_uncommitted_offsets": all_offsets, "records": expected})


def check_codec(codec: str, records: bytes, magic: int) -> None:
    got_magic, got_codec = _first_batch_codec_bits(records)
    want = CODECS.index(codec)
    if (got_magic, got_codec) != (magic, want):
        raise RuntimeError(f"broker returned magic {got_magic} codec {got_codec}, wanted {magic}/{want}")


def main() -> int:
    OUT_DIR.mkdir(exist_ok=True)
    cluster = confluent_kafka.Producer({"test.mock.num.brokers": 1})
    broker = next(iter(cluster.list_topics(timeout=10).brokers.values()))
    bootstrap = f"{broker.host}:{broker.port}"
    capture_codecs(bootstrap, broker.host, broker.port)
    capture_transactions(bootstrap, broker.host, broker.port)
    del cluster  # destroying the handle stops the mock cluster
    return 0


if __name__ == "__main__":
    sys.exit(main())
