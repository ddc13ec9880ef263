"""The native FrameReader's pool of I/O threads: many readers on a few threads, each on its own.

Uses the extension's ``FrameReader`` directly (no event loop): a test waits on a reader's notify
eventfd with ``select`` and takes its frames. The peers are blocking socketpair ends, written from
the test's thread or from helper threads.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import random
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite._net import frame_thread
from tests.decoders import require_native
from tests.unit.net.frame_pool import io_threads, pool_size, run_child

LIMIT = 8 * 1024 * 1024
# The reactors' threads: min(available_parallelism, 4), started as readers need them.
POOL = pool_size()


@pytest.fixture(autouse=True)
def frame_reader_built() -> None:
    require_native()
    if not frame_thread.available():
        pytest.fail("the native extension has no FrameReader (an old build): rebuild it", pytrace=False)
    # Each I/O thread and its two fds exist from its first reader on: start them all before counting
    # fds (POOL readers at once fill every slot).
    made = [socket.socketpair() for _ in range(POOL)]
    readers = [reader_class()(ours.fileno(), LIMIT) for ours, _ in made]
    for reader in readers:
        reader.close()
    for ours, peer in made:
        ours.close()
        peer.close()


def reader_class() -> Any:
    return frame_thread._FRAME_READER


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def all_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class Collected:
    """One reader's frames and end, taken as they come."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.frames: list[bytes] = []
        self.end: tuple[str, int, str] | None = None
        self.ends = 0

    def take(self) -> None:
        frames, end = self.reader.take()
        self.frames += frames
        if end is not None:
            self.end = end
            self.ends += 1


def wait_all(readers: list[Collected], done: Any, timeout: float = 20.0) -> None:
    """Take from every reader as its notify fd fires until ``done()`` (or fail at ``timeout``)."""
    by_fd = {collected.reader.notify_fd(): collected for collected in readers}
    deadline = time.monotonic() + timeout
    while not done():
        left = deadline - time.monotonic()
        assert left > 0, "the frames did not all arrive in time"
        ready, _, _ = select.select(list(by_fd), [], [], min(left, 0.5))
        for fd in ready:
            by_fd[fd].take()


@pytest.fixture
def pairs(request: pytest.FixtureRequest) -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    made = [socket.socketpair() for _ in range(getattr(request, "param", 200))]
    yield made
    for ours, peer in made:
        ours.close()
        peer.close()


def test_200_readers_are_served_by_the_pool_threads(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    before_all, before_io = all_threads(), io_threads()
    readers = [Collected(reader_class()(ours.fileno(), LIMIT)) for ours, _ in pairs]
    assert io_threads() == POOL  # 200 readers >= POOL: every slot has its thread, and no more
    assert all_threads() - before_all <= POOL - before_io
    for index, (_, peer) in enumerate(pairs):
        peer.sendall(framed(struct.pack(">i", index)))
    wait_all(readers, lambda: all(len(r.frames) == 1 for r in readers))
    assert [r.frames for r in readers] == [[struct.pack(">i", i)] for i in range(len(pairs))]
    assert io_threads() == POOL
    for collected in readers:
        collected.reader.close()


def test_interleaved_frames_on_many_sockets_arrive_in_order_per_reader(
        pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    rng = random.Random(43)
    expected = [[rng.randbytes(rng.choice([4, rng.randint(4, 300), rng.randint(4, 20_000)]))
                 for _ in range(rng.randint(1, 8))] for _ in pairs]
    streams = [bytearray(b"".join(framed(p) for p in payloads)) for payloads in expected]
    readers = [Collected(reader_class()(ours.fileno(), LIMIT)) for ours, _ in pairs]
    pending = list(range(len(pairs)))
    while pending:  # a random piece of a random socket's stream at a time
        index = rng.choice(pending)
        stream = streams[index]
        piece = rng.randint(1, min(len(stream), 5000))
        pairs[index][1].sendall(stream[:piece])
        del stream[:piece]
        if not stream:
            pending.remove(index)
        if rng.random() < 0.05:
            for collected in readers:
                collected.take()
    wait_all(readers, lambda: all(len(r.frames) == len(e) for r, e in zip(readers, expected, strict=True)))
    assert [r.frames for r in readers] == expected
    assert all(r.end is None for r in readers)
    for collected in readers:
        collected.reader.close()


@pytest.mark.parametrize("pairs", [20], indirect=True)
def test_a_bad_size_ends_that_reader_alone(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    readers = [Collected(reader_class()(ours.fileno(), 1000)) for ours, _ in pairs]
    bad = 7
    pairs[bad][1].sendall(framed(b"fine") + struct.pack(">i", 5000) + b"x" * 100)
    wait_all(readers, lambda: readers[bad].end is not None)
    assert readers[bad].frames == [b"fine"]
    assert readers[bad].end == ("size", 5000, "")
    for round_ in range(3):  # the others keep receiving, before and after the bad one ended
        for index, (_, peer) in enumerate(pairs):
            if index != bad:
                peer.sendall(framed(bytes([index, round_]) * 2))
        wait_all(readers, lambda r=round_: all(len(c.frames) == r + 1 for i, c in enumerate(readers) if i != bad))
    for index, collected in enumerate(readers):
        if index != bad:
            assert collected.frames == [bytes([index, r]) * 2 for r in range(3)]
            assert collected.end is None
        collected.reader.close()
    assert readers[bad].ends == 1  # the end was handed out once


@pytest.mark.parametrize("pairs", [10], indirect=True)
def test_eof_and_reset_end_their_reader_alone(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    readers = [Collected(reader_class()(ours.fileno(), LIMIT)) for ours, _ in pairs]
    pairs[2][1].sendall(framed(b"last") + b"\x00\x00\x00\x10ab")
    pairs[2][1].shutdown(socket.SHUT_WR)
    wait_all(readers, lambda: readers[2].end is not None)
    assert readers[2].frames == [b"last"]
    assert readers[2].end == ("eof", 6, "")
    for index, (_, peer) in enumerate(pairs):
        if index != 2:
            peer.sendall(framed(b"more"))
    wait_all(readers, lambda: all(c.frames for c in readers))
    assert all(c.frames == [b"more"] for i, c in enumerate(readers) if i != 2)
    for collected in readers:
        collected.reader.close()


@pytest.mark.parametrize("pairs", [10], indirect=True)
def test_close_mid_frame_and_while_delivering_leaves_the_others_running(
        pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    fds_before = open_fds()
    readers = [Collected(reader_class()(ours.fileno(), LIMIT)) for ours, _ in pairs]
    assert open_fds() == fds_before + 2 * len(pairs)  # a dup and a notify eventfd each
    pairs[0][1].sendall(b"\x00\x01\x00\x00" + b"half")  # reader 0 waits mid-frame
    stop = threading.Event()

    def flood(peer: socket.socket) -> None:  # reader 1 is busy receiving when it is closed
        chunk = framed(bytes(1024 * 1024))
        with contextlib.suppress(OSError):
            while not stop.is_set():
                peer.sendall(chunk)

    pairs[1][1].settimeout(5)
    flooder = threading.Thread(target=flood, args=(pairs[1][1],))
    flooder.start()
    try:
        time.sleep(0.1)
        started = time.monotonic()
        readers[0].reader.close()
        readers[1].reader.close()
        assert time.monotonic() - started < 1.0
        assert not readers[0].reader.open
        assert not readers[1].reader.open
        assert open_fds() == fds_before + 2 * (len(pairs) - 2)  # both dups (and eventfds) closed
        assert readers[0].reader.take() == ([], None)
    finally:
        stop.set()
        pairs[1][0].close()  # unblocks the flooder's sendall
        flooder.join(10)
    for index, (_, peer) in enumerate(pairs[2:], start=2):
        peer.sendall(framed(bytes([index]) * 5))
    wait_all(readers[2:], lambda: all(c.frames for c in readers[2:]))
    assert [c.frames for c in readers[2:]] == [[bytes([i]) * 5] for i in range(2, len(pairs))]
    for collected in readers:
        collected.reader.close()
    assert open_fds() == fds_before - 1  # the test closed reader 1's socket itself


@pytest.mark.parametrize("pairs", [100], indirect=True)
def test_close_from_many_threads_at_once(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    fds_before = open_fds()
    readers = [reader_class()(ours.fileno(), LIMIT) for ours, _ in pairs]
    for index, (_, peer) in enumerate(pairs):  # some have frames queued, some are mid-frame
        peer.sendall(framed(b"abcd") if index % 3 else b"\x00\x00\x10\x00xy")
    time.sleep(0.05)
    barrier = threading.Barrier(8)
    failures: list[BaseException] = []

    def close_share(share: list[Any]) -> None:
        try:
            barrier.wait(5)
            for reader in share:
                reader.close()
                reader.close()
        except BaseException as exc:  # reported by the test
            failures.append(exc)

    closers = [threading.Thread(target=close_share, args=(readers[n::8],)) for n in range(8)]
    for closer in closers:
        closer.start()
    for closer in closers:
        closer.join(10)
    assert not any(closer.is_alive() for closer in closers)
    assert failures == []
    assert not any(reader.open for reader in readers)
    assert open_fds() == fds_before
    # The reactor still serves new readers afterwards.
    ours, peer = pairs[0]
    fresh = Collected(reader_class()(ours.fileno(), LIMIT))
    peer.sendall(framed(b"after"))
    wait_all([fresh], lambda: bool(fresh.frames))
    assert fresh.frames == [b"after"]
    fresh.reader.close()


@pytest.mark.parametrize("pairs", [10], indirect=True)
def test_a_dropped_reader_closes_its_fds_and_the_others_go_on(
        pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    fds_before = open_fds()
    readers = [Collected(reader_class()(ours.fileno(), LIMIT)) for ours, _ in pairs]
    pairs[3][1].sendall(framed(b"queued, never taken") + b"\x00\x00")
    time.sleep(0.05)
    dropped = readers.pop(3)
    del dropped
    gc.collect()
    assert open_fds() == fds_before + 2 * (len(pairs) - 1)
    pairs[3][1].sendall(b"still")  # the dup is gone, the caller's socket is not
    assert pairs[3][0].recv(64).endswith(b"still")
    for index, (_, peer) in enumerate(pairs):
        if index != 3:
            peer.sendall(framed(b"next"))
    wait_all(readers, lambda: all(c.frames for c in readers))
    assert all(c.frames == [b"next"] for c in readers)
    readers.clear()  # the last references: dropped without close()
    gc.collect()
    assert open_fds() == fds_before


def reference(stream: bytes) -> list[bytes]:
    """The frames of ``stream`` as Kafka's framing defines them."""
    out, at = [], 0
    while at < len(stream):
        (size,) = struct.unpack_from(">i", stream, at)
        out.append(stream[at + 4:at + 4 + size])
        at += 4 + size
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads=st.lists(st.one_of(st.binary(min_size=4, max_size=64), st.binary(min_size=4, max_size=70_000)),
                         min_size=1, max_size=8),
       cuts=st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=20),
       others=st.integers(min_value=0, max_value=3))
def test_random_split_points_give_the_reference_frames(payloads: list[bytes], cuts: list[float],
                                                       others: int) -> None:
    """One stream cut at random points, with ``others`` readers receiving the same stream alongside."""
    stream = b"".join(framed(p) for p in payloads)
    points = sorted({int(cut * len(stream)) for cut in cuts} | {0, len(stream)})
    made = [socket.socketpair() for _ in range(1 + others)]
    try:
        readers = [Collected(reader_class()(ours.fileno(), LIMIT)) for ours, _ in made]
        expected = reference(stream)
        for start, end in itertools.pairwise(points):
            for _, peer in made:
                peer.sendall(stream[start:end])
        wait_all(readers, lambda: all(len(c.frames) >= len(expected) for c in readers))
        for collected in readers:
            collected.reader.close()
        assert all(c.frames == expected and c.end is None for c in readers)
    finally:
        for ours, peer in made:
            ours.close()
            peer.close()


EXIT_SCRIPT = """
import socket, struct
from aiokafka_lite._net import frame_thread
pairs = [socket.socketpair() for _ in range(5)]
readers = [frame_thread._FRAME_READER(ours.fileno(), 100) for ours, _ in pairs]
pairs[0][1].sendall(b"\\x00\\x00\\x00\\x08half")  # one mid-frame
readers[1].close()
print("made", flush=True)
"""


def test_interpreter_exit_with_open_readers_does_not_hang() -> None:
    done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], capture_output=True, text=True, timeout=30,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "made"


@pytest.mark.parametrize("pairs", [2], indirect=True)
def test_a_forked_child_serves_its_own_readers(pairs: list[tuple[socket.socket, socket.socket]]) -> None:
    """Fork is survived, not supported: the child's new reader works, an inherited one closes at once."""
    inherited = reader_class()(pairs[0][0].fileno(), LIMIT)
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        status = 1
        try:
            started = time.monotonic()
            inherited.close()
            fresh = Collected(reader_class()(pairs[1][0].fileno(), LIMIT))
            pairs[1][1].sendall(framed(b"child"))
            wait_all([fresh], lambda: bool(fresh.frames), timeout=10)
            fresh.reader.close()
            status = 0 if fresh.frames == [b"child"] and time.monotonic() - started < 5 else 2
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    collected = Collected(inherited)  # the parent's reader is unaffected
    pairs[0][1].sendall(framed(b"parent"))
    wait_all([collected], lambda: bool(collected.frames))
    assert collected.frames == [b"parent"]
    inherited.close()


def test_one_reader_runs_one_thread_and_many_run_the_whole_pool() -> None:
    """In a fresh process: 1 reader, 1 thread (also after it closed and another opened); k readers,
    min(k, POOL) threads; never more; they stay after every reader closed."""
    assert run_child("thread_counts") is None


@pytest.mark.skipif(POOL < 2, reason="one core (available_parallelism 1): the pool is one thread")
def test_two_readers_are_served_by_two_threads() -> None:
    """A consumer's two fetch lanes: two readers are on two reactors, so two threads receive them."""
    assert run_child("two_readers_two_threads") is None


def test_the_fewest_readers_rule_refills_a_reactor_whose_readers_closed() -> None:
    """Two readers per reactor; both on the last reactor close; the next two go to that reactor, the
    thread count stays POOL, and the new and old readers all receive."""
    assert run_child("refill") is None


@pytest.mark.skipif(POOL < 2, reason="one core (available_parallelism 1): there is no other reactor to prefer")
def test_a_reader_that_ended_and_was_closed_is_counted_down_once() -> None:
    assert run_child("ended_then_closed_counts_once") is None
