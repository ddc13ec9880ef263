"""The ceiling: how fast this machine moves bytes into a process through a loopback TCP socket,
converted to records/s with the data set's bytes per record on the wire.

A sender process writes from memory as fast as it can; this process reads with ``recv_into`` into
one preallocated buffer (the GIL released, nothing parsed), and the best of ``TRANSFERS`` transfers
counts. No broker reads a log and no request waits for an answer: it is the copy every Kafka
client's bytes go through here, with nothing else. (A sender using ``sendfile`` from the page
cache, as the broker does, measured slower.) The data set is first read once, untimed, by the
limit's loop, to count its bytes (the record batches as the broker sends them).

The row's records/s and MB/s are that conversion (``loopback_bytes_per_s`` / ``wire_bytes_per_record``);
its CPU seconds and peak RSS are this process's (the untimed read included), not the sender's.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from typing import Any

from benchmarks.clients import limit
from benchmarks.clients._harness import Result, Spec, Stopwatch, run

COPY_BYTES = 1 << 28  # per transfer (about 0.05-0.2 s at 1.5-5 GB/s)
TRANSFERS = 5  # the best one counts: a ceiling is what the machine can do, not what others left it
CHUNK = 1 << 20  # bytes per recv_into
_SENDER = """
import socket, sys
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
chunk, left = memoryview(bytes(1 << 20)), int(sys.argv[2])
while left > 0:
    sock.sendall(chunk[:min(left, len(chunk))])
    left -= len(chunk)
sock.close()
"""
_figures: dict[str, float] = {}


def loopback_bytes_per_s(total: int) -> float:
    """Bytes/s this process receives from a sender process over loopback TCP, ``total`` bytes sent;
    timed from the first chunk received to the last."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        sender = subprocess.Popen([sys.executable, "-c", _SENDER, str(server.getsockname()[1]), str(total)])
        try:
            conn, _ = server.accept()
            with conn:
                view = memoryview(bytearray(CHUNK))
                first = conn.recv_into(view)
                began, got = time.perf_counter(), first
                while got < total:
                    n = conn.recv_into(view)
                    if not n:
                        raise EOFError(f"the sender stopped after {got} of {total} bytes")
                    got += n
                seconds = time.perf_counter() - began
        finally:
            if sender.wait(timeout=60) != 0:
                raise RuntimeError(f"the loopback sender exited with {sender.returncode}")
    return (got - first) / seconds


def consume(spec: Spec, watch: Stopwatch) -> Result:
    records, _ = limit.consume(spec, Stopwatch())  # untimed: only its bytes per record count
    per_record = limit.wire_bytes() / records
    rate = max(loopback_bytes_per_s(COPY_BYTES) for _ in range(TRANSFERS))
    watch.stop()
    _figures.update(loopback_bytes_per_s=rate, wire_bytes_per_record=per_record, records_per_s=rate / per_record,
                    mb_per_s=rate / per_record * spec.value_size / 1e6)
    return records, records * spec.value_size


def extra(spec: Spec) -> dict[str, Any]:
    """The conversion replaces the harness's records/s and MB/s (those timed the untimed read)."""
    return dict(_figures)


if __name__ == "__main__":
    run(consume, extra)
