"""Micro-benchmark: receiving ~6 MB response frames over loopback TCP, asyncio StreamReader against
the native reader thread (``_net/frame_thread.py`` ThreadedFrames), side by side in one run.

A sender process writes ``--mb`` MB of size-prefixed frames of about 6 MB as fast as it can; the
receiver takes them

* (a) through ``asyncio.StreamReader.readexactly`` as ``_net/connection.py`` reads today (a reader
  task, limit 8 MiB), handing each frame to the application through a queue;
* (b) through ThreadedFrames: a Rust thread receives, the loop's thread only takes whole frames
  (copying each into a ``bytes``);
* (c) the same with ``zero_copy=True``: the application gets a memoryview of the thread's buffer.

The application is a task that, for each frame, runs a pure-Python loop of ``--work-ms`` (0: none),
standing in for decoding. Each row prints MB/s and CPU seconds: the loop's thread without the
application's work ("loop CPU"), and the whole process ("process CPU", the reader thread included).

Run: PYTHONPATH=$PWD python benchmarks/frame_reader_micro.py [--mb 600] [--work-ms 5] [--repeat 3]
     [--loop asyncio|uvloop]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from aiokafka_lite._net import frame_thread

FRAME_BYTES = 6 * 1024 * 1024
STREAM_BUFFER_LIMIT = 8 << 20  # connection.py's
MAX_FRAME_BYTES = 100 * 1024 * 1024


def send(port: int, total_mb: int) -> None:
    """The sender process: frames of 6 MB +- 64 KB until ``total_mb`` MB are written, then close."""
    payload = os.urandom(FRAME_BYTES + 65536)
    sizes = [FRAME_BYTES + delta for delta in (-65536, -4096, 0, 4097, 65536)]
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sent = 0
        index = 0
        while sent < total_mb * 1024 * 1024:
            size = sizes[index % len(sizes)]
            sock.sendall(size.to_bytes(4, "big"))
            sock.sendall(memoryview(payload)[:size])
            sent += 4 + size
            index += 1


@dataclass
class Result:
    seconds: float
    received: int
    loop_cpu: float
    process_cpu: float


class Application:
    """Takes frames in order and works on each for a fixed number of pure-Python iterations."""

    def __init__(self, iterations: int) -> None:
        self.iterations = iterations
        self.frames: asyncio.Queue[bytes | memoryview | None] = asyncio.Queue()
        self.received = 0
        self.work_cpu = 0.0

    async def run(self) -> None:
        while (frame := await self.frames.get()) is not None:
            self.received += len(frame)
            started = time.thread_time()
            total = 0
            for i in range(self.iterations):
                total += i
            self.work_cpu += time.thread_time() - started


async def read_with_stream_reader(sock: socket.socket, app: Application) -> None:
    """connection.py's reader, copied: readexactly the size, check it, readexactly the frame."""
    reader, writer = await asyncio.open_connection(sock=sock, limit=STREAM_BUFFER_LIMIT)
    try:
        while True:
            try:
                header = await reader.readexactly(4)
            except asyncio.IncompleteReadError:
                break
            size = int.from_bytes(header, "big", signed=True)
            if size < 4 or size > MAX_FRAME_BYTES:
                raise ValueError(f"announced a {size}-byte response frame")
            app.frames.put_nowait(await reader.readexactly(size))
    finally:
        writer.close()
    app.frames.put_nowait(None)


async def read_with_thread(sock: socket.socket, app: Application, zero_copy: bool = False) -> None:
    done = asyncio.get_running_loop().create_future()

    def on_error(exc: Exception) -> None:
        done.set_result(exc)

    frames = frame_thread.ThreadedFrames(sock.fileno(), asyncio.get_running_loop(), app.frames.put_nowait,
                                         on_error, MAX_FRAME_BYTES, zero_copy=zero_copy)
    try:
        await done  # EOF ends it, after every frame
    finally:
        frames.close()
    app.frames.put_nowait(None)


async def read_with_thread_zero_copy(sock: socket.socket, app: Application) -> None:
    await read_with_thread(sock, app, zero_copy=True)


Read = Callable[[socket.socket, Application], Coroutine[Any, Any, None]]


def receive_once(read: Read, total_mb: int, iterations: int,
                 loop_factory: Callable[[], asyncio.AbstractEventLoop]) -> Result:
    with socket.create_server(("127.0.0.1", 0)) as server:
        sender = subprocess.Popen([sys.executable, __file__, "--send", str(server.getsockname()[1]),
                                   "--mb", str(total_mb)])
        sock, _ = server.accept()
    sock.setblocking(False)
    app_holder: list[Application] = []

    async def main() -> None:
        app = Application(iterations)
        app_holder.append(app)
        await asyncio.gather(read(sock, app), app.run())

    cpu_before = os.times()
    loop_cpu_before = time.thread_time()
    started = time.perf_counter()
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(main())
    seconds = time.perf_counter() - started
    loop_cpu = time.thread_time() - loop_cpu_before - app_holder[0].work_cpu
    cpu_after = os.times()
    sock.close()
    sender.wait()
    process_cpu = (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system)
    return Result(seconds, app_holder[0].received, loop_cpu, process_cpu - app_holder[0].work_cpu)


def iterations_for(ms: float) -> int:
    """Iterations of Application's loop that take about ``ms`` milliseconds here."""
    if ms <= 0:
        return 0
    count = 2_000_000
    started = time.thread_time()
    total = 0
    for i in range(count):
        total += i
    per_ms = count / ((time.thread_time() - started) * 1000)
    return int(per_ms * ms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=600)
    parser.add_argument("--work-ms", type=float, default=5.0, help="application work per frame")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--send", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.send is not None:
        send(args.send, args.mb)
        return
    if not frame_thread.available():
        sys.exit("the native extension has no FrameReader: build it first")
    factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop
    if args.loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    print(f"{args.mb} MB in frames of ~6 MB over loopback TCP, {args.loop}, medians of {args.repeat}; "
          "CPU seconds exclude the application's work")
    for work_ms in sorted({0.0, args.work_ms}):
        iterations = iterations_for(work_ms)
        for label, read in (("(a) StreamReader.readexactly", read_with_stream_reader),
                            ("(b) ThreadedFrames (Rust thread)", read_with_thread),
                            ("(c) ThreadedFrames, zero_copy", read_with_thread_zero_copy)):
            runs = [receive_once(read, args.mb, iterations, factory) for _ in range(args.repeat)]
            assert all(run.received == runs[0].received for run in runs)
            rate = statistics.median(run.received / run.seconds for run in runs) / 1e6
            loop_cpu = statistics.median(run.loop_cpu for run in runs)
            process_cpu = statistics.median(run.process_cpu for run in runs)
            print(f"work {work_ms:4.1f} ms/frame  {label:34} {rate:8.0f} MB/s   loop CPU {loop_cpu:6.3f} s   "
                  f"process CPU {process_cpu:6.3f} s")


if __name__ == "__main__":
    main()
