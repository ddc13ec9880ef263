"""The native FrameReader's pool of I/O threads as a test sees it: its size, its threads, and which
reactor serves which reader.

The pool's threads stay for the life of the process, so exact thread counts are checked in a fresh
process: ``run_child(check)`` runs one of the ``child_*`` functions below in one (``python -c``) and
returns its complaint, or None.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
LIMIT = 8 * 1024 * 1024


def _cgroup_cpus() -> int | None:
    """The CPU quota of this process's cgroup v2 and its ancestors, rounded down (as Rust's
    ``available_parallelism`` takes it), or None without one."""
    try:
        with open("/proc/self/cgroup") as lines:
            path = next((line.split("::", 1)[1].strip() for line in lines if line.startswith("0::")), None)
    except OSError:
        return None
    if path is None:
        return None
    quota: int | None = None
    here = Path("/sys/fs/cgroup" + path.rstrip("/"))
    while True:
        with contextlib.suppress(OSError, ValueError):
            limit, period = (here / "cpu.max").read_text().split()
            if limit != "max":
                cpus = max(int(limit) // int(period), 1)
                quota = cpus if quota is None else min(quota, cpus)
        if here == Path("/sys/fs/cgroup"):
            return quota
        here = here.parent


def pool_size() -> int:
    """The pool's reactors at most: ``min(available_parallelism, 4)``."""
    cores = len(os.sched_getaffinity(0))
    quota = _cgroup_cpus()
    return min(cores if quota is None else min(cores, quota), 4)


def io_threads() -> int:
    """The reactor threads of this process (by their name)."""
    count = 0
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(FileNotFoundError), open(f"/proc/self/task/{task}/comm") as comm:
            count += comm.read().strip() == "aiokafka-frames"
    return count


def _epolls() -> dict[int, set[int]]:
    """Every epoll fd of this process and the fds registered with it (from /proc/self/fdinfo)."""
    found: dict[int, set[int]] = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") != "anon_inode:[eventpoll]":
                continue
            with open(f"/proc/self/fdinfo/{name}") as info:
                found[int(name)] = {int(line.split()[1]) for line in info if line.startswith("tfd:")}
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def _inode(fd: int) -> int | None:
    try:
        return os.fstat(fd).st_ino
    except OSError:
        return None


def served_by(ours: socket.socket) -> int:
    """The epoll fd of the reactor serving the reader of ``ours`` (its dup is registered there)."""
    inode = os.fstat(ours.fileno()).st_ino
    hits = [epoll for epoll, fds in _epolls().items()
            if any(fd != ours.fileno() and _inode(fd) == inode for fd in fds)]
    assert len(hits) == 1, f"the reader of fd {ours.fileno()} is registered with {len(hits)} epolls"
    return hits[0]


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def receives(reader: Any, peer: socket.socket, payload: bytes) -> bool:
    """Whether a frame of ``payload`` sent by ``peer`` comes out of ``reader`` within 5 s."""
    assert len(payload) >= 4, "a frame under 4 bytes ends the reader (a size outside 4..=max)"
    peer.sendall(framed(payload))
    deadline = time.monotonic() + 5
    got: list[bytes] = []
    while not got and time.monotonic() < deadline:
        select.select([reader.notify_fd()], [], [], 0.5)
        frames, _ = reader.take()
        got += frames
    return got == [payload]


def wait_end(reader: Any) -> tuple[str, int, str] | None:
    """The reason ``reader`` ended, waited for up to 5 s."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        select.select([reader.notify_fd()], [], [], 0.5)
        _, end = reader.take()
        if end is not None:
            return tuple(end)
    return None


class Child:
    """What a check in the child process uses: fresh readers, and its complaints."""

    def __init__(self) -> None:
        from aiokafka_lite._net import frame_thread

        self.reader_class: Any = frame_thread._FRAME_READER
        self.pool = pool_size()
        self.pairs: list[tuple[socket.socket, socket.socket]] = []
        self.problems: list[str] = []

    def open(self) -> tuple[Any, socket.socket, socket.socket]:
        ours, peer = socket.socketpair()
        self.pairs.append((ours, peer))
        return self.reader_class(ours.fileno(), LIMIT), ours, peer

    def close(self) -> None:
        for ours, peer in self.pairs:
            ours.close()
            peer.close()

    def expect(self, what: str, got: object, expected: object) -> None:
        if got != expected:
            self.problems.append(f"{what}: {got!r}, expected {expected!r}")


def child_thread_counts(child: Child) -> None:
    """One reader at a time: one thread; the pool's size of readers or more: exactly that many."""
    child.expect("threads before any reader", io_threads(), 0)
    first, _, peer = child.open()
    child.expect("threads with 1 reader", io_threads(), 1)
    child.expect("the first reader receives", receives(first, peer, b"first"), True)
    first.close()
    second, _, peer = child.open()  # goes to the same (now empty) reactor
    child.expect("threads with 1 reader after another closed", io_threads(), 1)
    child.expect("the second reader receives", receives(second, peer, b"second"), True)
    more = []
    for count in range(2, 2 * child.pool + 3):
        reader, _, _ = child.open()
        more.append(reader)
        child.expect(f"threads with {count} readers", io_threads(), min(count, child.pool))
    for reader in [second, *more]:
        reader.close()
    child.expect("threads after every reader closed", io_threads(), child.pool)


def child_two_readers_two_threads(child: Child) -> None:
    """Two readers (a consumer's two fetch lanes) are served by two reactors, on two threads."""
    lane1, ours1, peer1 = child.open()
    lane2, ours2, peer2 = child.open()
    child.expect("threads with 2 readers", io_threads(), 2)
    child.expect("the two readers share a reactor", served_by(ours1) == served_by(ours2), False)
    child.expect("lane 1 receives", receives(lane1, peer1, b"lane 1"), True)
    child.expect("lane 2 receives", receives(lane2, peer2, b"lane 2"), True)
    lane1.close()
    lane2.close()


def child_refill(child: Child) -> None:
    """Two readers per reactor; the two on one reactor close; the next two readers go there."""
    opened = [child.open() for _ in range(2 * child.pool)]
    by_reactor: dict[int, list[int]] = {}
    for index, (_, ours, _) in enumerate(opened):
        by_reactor.setdefault(served_by(ours), []).append(index)
    child.expect("readers per reactor", sorted(len(i) for i in by_reactor.values()), [2] * child.pool)
    emptied = served_by(opened[-1][1])  # the last reactor filled: not the lowest slot
    for index in by_reactor[emptied]:
        opened[index][0].close()
    fresh = [child.open() for _ in range(2)]
    child.expect("threads after the refill", io_threads(), child.pool)
    child.expect("reactors of the new readers", [served_by(ours) for _, ours, _ in fresh], [emptied, emptied])
    for reader, _, peer in fresh:
        child.expect("a new reader receives", receives(reader, peer, b"refilled"), True)
    for index, (reader, _, peer) in enumerate(opened):
        if index not in by_reactor[emptied]:
            child.expect("an old reader receives", receives(reader, peer, b"still"), True)
    for reader, _, _ in opened + fresh:
        reader.close()


def child_ended_then_closed_counts_once(child: Child) -> None:
    """A reader that ended by itself (EOF) and is then closed leaves its reactor's count at 0, not
    below: the next two readers go to that reactor (the lowest slot, counts equal after the first)."""
    first, ours1, peer1 = child.open()
    second, _, _ = child.open()
    home = served_by(ours1)
    peer1.close()
    child.expect("the first reader's end", wait_end(first), ("eof", 0, ""))
    first.close()
    third, ours3, peer3 = child.open()
    fourth, ours4, _ = child.open()
    child.expect("reactor of the next reader", served_by(ours3), home)
    child.expect("reactor of the one after", served_by(ours4), home)
    child.expect("the next reader receives", receives(third, peer3, b"after"), True)
    for reader in (second, third, fourth):
        reader.close()


def run_child(check: str) -> str | None:
    """Run ``child_<check>`` in a fresh process; its problems (one a line) or None."""
    code = ("import sys; from tests.unit.net import frame_pool as f; c = f.Child(); "
            f"f.child_{check}(c); c.close(); print('\\n'.join(c.problems) or 'ok'); sys.exit(bool(c.problems))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    if done.returncode == 0 and done.stdout.strip() == "ok":
        return None
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"

