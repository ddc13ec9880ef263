"""The limit: a pipelined bare-Fetch loop on both cores that decodes no record, only batch headers.

Per partition leader, ``connections`` plain blocking sockets (default 2; ``throughput.LIMITS``
also runs 1), each read by its own thread with ``recv_into`` into one reused buffer: the GIL is
released while the kernel copies, so one thread receives while another walks a response, and
with two sockets two Fetches per broker are always out, one per half of the partitions. A response
is decoded by the sans-IO Fetch schema (its records stay memoryviews into the buffer: no copy after
the kernel's) and only batch headers are read, to advance the offsets. Same fetch sizes as every
client; no asyncio.

``in_flight`` (default 1) Fetches per socket, each for its own partitions, measured slower: a broker
answers one connection's requests in order, so a group already at its end long-polls
``max_wait_ms`` and holds back the group queued behind it.

The row's options (``Spec.options``) may set ``connections`` and ``in_flight``.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite._net import ConnectionOptions
from aiokafka_lite._net.blocking import BlockingConnection
from aiokafka_lite._net.requests import metadata_request
from aiokafka_lite.protocol.api import decode_response, encode_request
from aiokafka_lite.protocol.messages import FETCH, METADATA
from benchmarks.clients._harness import Result, Spec, Stopwatch, run

_ENTRY = struct.Struct(">qi")  # baseOffset, batchLength
_INT = struct.Struct(">i")  # lastOffsetDelta at +23, recordsCount at +57
_SIZE = struct.Struct(">i")
MAX_FETCH_VERSION = 12
CONNECTIONS = 2  # per broker: one thread each (two cores here)
IN_FLIGHT = 1  # Fetch requests outstanding per connection, each for its own partitions
_wire = {"bytes": 0}  # the records fields' bytes, summed over the readers at the end
Offsets = dict[tuple[str, int], int]


def walk(data: bytes | memoryview) -> tuple[int, int]:
    """(next offset, records) of the complete batches in ``data``; (-1, 0) if there is none."""
    pos, size, next_offset, records = 0, len(data), -1, 0
    while size - pos >= 61:
        base, length = _ENTRY.unpack_from(data, pos)
        end = pos + 12 + length
        if end > size:
            break
        next_offset = base + _INT.unpack_from(data, pos + 23)[0] + 1
        records += _INT.unpack_from(data, pos + 57)[0]
        pos = end
    return next_offset, records


def fetch_body(spec: Spec, offsets: Offsets) -> dict[str, Any]:
    """A full (sessionless) Fetch for ``offsets``, with the data set's fetch sizes."""
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (topic, p), offset in offsets.items():
        by_topic[topic].append({"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
                                "log_start_offset": -1, "partition_max_bytes": spec.max_partition_fetch_bytes})
    return {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": spec.fetch_max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": parts} for topic, parts in by_topic.items()],
            "forgotten_topics_data": [], "rack_id": ""}


@dataclass
class Progress:
    """Shared by the reader threads: records so far, the stopwatch, the first failure."""

    spec: Spec
    watch: Stopwatch
    records: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    error: BaseException | None = None

    def add(self, records: int) -> None:
        with self.lock:
            self.records += records
            self.watch.first(records)
            if self.records >= self.spec.records and not self.done.is_set():
                self.watch.stop()
                self.done.set()

    def fail(self, exc: BaseException) -> None:
        with self.lock:
            if self.error is None and not self.done.is_set():
                self.error = exc
            self.done.set()


def _recv_exactly(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if not n:
            raise EOFError("the broker closed the connection")
        got += n


class _Reader:
    """One connection and its thread: ``in_flight`` Fetch requests out, one per partition group."""

    def __init__(self, address: tuple[str, int], groups: list[Offsets], version: int, progress: Progress) -> None:
        self.sock = socket.create_connection(address)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.groups, self.version, self.progress = groups, version, progress
        self.buffer = bytearray(0)  # replaced by a bigger one when a response does not fit: never resized
        self.correlation_id = 0
        self.wire_bytes = 0
        self.thread = threading.Thread(target=self._run, name="limit-reader", daemon=True)

    def _send(self, group: int, pending: deque[int]) -> None:
        self.correlation_id += 1
        body = fetch_body(self.progress.spec, self.groups[group])
        self.sock.sendall(encode_request(FETCH, self.version, self.correlation_id, "bench-limit", body))
        pending.append(group)

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # handed to the main thread, which raises it
            self.progress.fail(exc)

    def _loop(self) -> None:
        pending: deque[int] = deque()
        for group in range(len(self.groups)):
            self._send(group, pending)
        size_view = memoryview(bytearray(4))
        while not self.progress.done.is_set():
            _recv_exactly(self.sock, size_view)
            size = _SIZE.unpack(size_view)[0]
            if size > len(self.buffer):
                self.buffer = bytearray(size + (1 << 20))
            frame = memoryview(self.buffer)[:size]
            _recv_exactly(self.sock, frame)
            group = pending.popleft()
            self.progress.add(self._advance(decode_response(FETCH, self.version, frame), self.groups[group]))
            del frame  # no view may outlive the response: the buffer is reused (or replaced)
            if not self.progress.done.is_set():
                self._send(group, pending)

    def _advance(self, response: dict[str, Any], offsets: Offsets) -> int:
        records = 0
        for topic in response["responses"]:
            for part in topic["partitions"]:
                if part["error_code"]:
                    raise RuntimeError(f"Fetch {topic['topic']}-{part['partition_index']}: error {part['error_code']}")
                data = part["records"] or b""
                self.wire_bytes += len(data)
                next_offset, count = walk(data)
                if next_offset > 0:
                    offsets[topic["topic"], part["partition_index"]] = next_offset
                    records += count
        return records

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # unblocks the thread's recv
        self.thread.join()
        self.sock.close()


def _layout(spec: Spec) -> tuple[dict[int, tuple[str, int]], dict[int, list[tuple[str, int]]], int]:
    """(broker addresses, each leader's partitions, the Fetch version), from one Metadata round trip."""
    host, port = spec.bootstrap.rsplit(":", 1)
    conn = BlockingConnection(host, int(port), ConnectionOptions(), timeout=30.0)
    try:
        version = conn.version_for(METADATA)
        meta = conn.send(METADATA, version, metadata_request(version, spec.topics), timeout=30.0)
        fetch_version = conn.version_for(FETCH, MAX_FETCH_VERSION)
    finally:
        conn.close()
    brokers = {b["node_id"]: (b["host"], b["port"]) for b in meta["brokers"]}
    leaders = {(t["name"], p["partition_index"]): p["leader_id"] for t in meta["topics"] for p in t["partitions"]}
    by_leader: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for tp in spec.assignment():
        by_leader[leaders[tp]].append(tp)
    return brokers, by_leader, fetch_version


def groups_for(partitions: list[tuple[str, int]], connections: int, in_flight: int) -> list[list[Offsets]]:
    """The partitions dealt round-robin into ``connections`` x ``in_flight`` disjoint groups
    (fewer when there are fewer partitions), from offset 0; one list of groups per connection."""
    count = max(1, min(connections * in_flight, len(partitions)))
    groups: list[Offsets] = [{} for _ in range(count)]
    for i, tp in enumerate(partitions):
        groups[i % count][tp] = 0
    return [groups[c::connections] for c in range(min(connections, count))]


def consume(spec: Spec, watch: Stopwatch) -> Result:
    brokers, by_leader, version = _layout(spec)
    connections = int(spec.options.get("connections", CONNECTIONS))
    in_flight = int(spec.options.get("in_flight", IN_FLIGHT))
    progress = Progress(spec, watch)
    readers = [_Reader(brokers[leader], groups, version, progress)
               for leader, partitions in by_leader.items()
               for groups in groups_for(partitions, connections, in_flight)]
    try:
        for reader in readers:
            reader.thread.start()
        progress.done.wait()
    finally:
        for reader in readers:
            reader.close()
    _wire["bytes"] = sum(reader.wire_bytes for reader in readers)
    if progress.error is not None:
        raise progress.error
    return progress.records, progress.records * spec.value_size


def wire_bytes() -> int:
    """The record batches' bytes the last ``consume`` received (records fields only)."""
    return _wire["bytes"]


def extra(spec: Spec) -> dict[str, Any]:
    return {"wire_bytes": wire_bytes(), "options": {"connections": CONNECTIONS, "in_flight": IN_FLIGHT,
                                                      **spec.options}}


if __name__ == "__main__":
    run(consume, extra)
