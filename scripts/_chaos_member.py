"""One group member of the chaos soak, in its own process (``scripts/chaos_soak.py`` starts it).

    python scripts/_chaos_member.py '{"bootstrap": ..., "topic": ..., "group": ..., "log": path,
                                      "pace": path, "stall_seconds": 7.0, "settings": {...}}'

Polls, "processes" each batch by appending one line per record to its log, flushes, then commits
the batch's offsets explicitly and logs the outcome. Log lines (``t`` is CLOCK_MONOTONIC, which
is system-wide, so the driver can order events across processes):

    R <t_delivered> <partition> <offset> <value>     a record processed
    C <t_done> ok <partition>:<next offset>,...      a commit that succeeded
    F <t_done> <error type>                          a commit that failed

SIGUSR1 makes the member stall once (a non-blocking sleep of ``stall_seconds``, longer than
``max_poll_interval_ms``) between receiving a batch and processing it, so its poll deadline lapses
while it holds records. SIGTERM makes it stop cleanly: it finishes (and commits) the batch in hand,
then closes the consumer, which leaves the group. The driver paces processing through the ``pace``
file (records per second for this member; 0 = as fast as possible) so the soak lasts long enough
for its faults.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The driver may ask for a stall the moment a member starts, before run() installs its handler:
# SIGUSR1's default action would kill the member (a soak failed so: "member 1 exited with -10").
_EARLY_STALL = threading.Event()
signal.signal(signal.SIGUSR1, lambda _signum, _frame: _EARLY_STALL.set())

from aiokafka_lite import Consumer, ConsumerRecord, OffsetAndMetadata, TopicPartition  # noqa: E402
from aiokafka_lite.errors import KafkaError, KafkaTimeoutError  # noqa: E402

POLL_TIMEOUT = 0.5
COMMIT_TIMEOUT = 10.0
MAX_PACED_SLEEP = 0.5  # one paced batch never sleeps longer than this (well inside the poll deadline)


class Pace:
    """Reads the driver's pace file when it changes: records per second, 0 = unthrottled."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.rate = 0.0
        self._mtime = 0.0

    def refresh(self) -> float:
        try:
            mtime = os.stat(self.path).st_mtime
            if mtime != self._mtime:
                self._mtime = mtime
                self.rate = float(Path(self.path).read_text().strip() or 0)
        except (OSError, ValueError):
            pass  # the driver rewrites the file atomically; a miss keeps the last rate
        return self.rate

    def batch_size(self, max_poll_records: int) -> int:
        if self.rate <= 0:
            return max_poll_records
        return max(1, min(max_poll_records, int(self.rate * MAX_PACED_SLEEP)))


def _commit_offsets(records: list[ConsumerRecord]) -> dict[TopicPartition, OffsetAndMetadata]:
    nexts: dict[TopicPartition, int] = {}
    for record in records:
        tp = TopicPartition(record.topic, record.partition)
        nexts[tp] = max(nexts.get(tp, 0), record.offset + 1)
    return {tp: OffsetAndMetadata(offset) for tp, offset in nexts.items()}


def _log_records(log: IO[str], delivered: float, records: list[ConsumerRecord]) -> None:
    log.write("".join(f"R {delivered:.6f} {r.partition} {r.offset} {r.value.decode()}\n" for r in records))
    log.flush()


async def _commit(consumer: Consumer, log: IO[str], records: list[ConsumerRecord]) -> None:
    offsets = _commit_offsets(records)
    try:
        await consumer.commit(offsets, timeout=COMMIT_TIMEOUT)
    except KafkaError as exc:  # e.g. CommitFailedError after a rebalance: the records come again
        log.write(f"F {time.monotonic():.6f} {type(exc).__name__}\n")
    else:
        done = ",".join(f"{tp.partition}:{o.offset}" for tp, o in offsets.items())
        log.write(f"C {time.monotonic():.6f} ok {done}\n")
    log.flush()


async def run(spec: dict[str, Any], log: IO[str]) -> None:
    stall_requested, stop_requested = asyncio.Event(), asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, stall_requested.set)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop_requested.set)
    if _EARLY_STALL.is_set():
        stall_requested.set()
    pace = Pace(spec["pace"])
    max_poll_records = int(spec["settings"].get("max_poll_records", 500))
    consumer = Consumer(spec["topic"], bootstrap_servers=spec["bootstrap"], group_id=spec["group"],
                        **spec["settings"])
    try:
        # A fault may come while the member starts (a broker restart of 10 s against start()'s own
        # 10 s bound, on a slow machine): start() then raises, as KIP-266 says, and an application
        # tries again, as this member does.
        while not stop_requested.is_set():
            try:
                await consumer.start()
                break
            except KafkaTimeoutError as exc:
                log.write(f"E {time.monotonic():.6f} {type(exc).__name__}\n")
                log.flush()
        while not stop_requested.is_set():
            pace.refresh()
            try:
                batch = await consumer.poll(timeout=POLL_TIMEOUT, max_records=pace.batch_size(max_poll_records))
            except KafkaError as exc:  # typed errors are allowed; polling goes on
                log.write(f"E {time.monotonic():.6f} {type(exc).__name__}\n")
                await asyncio.sleep(0.1)
                continue
            records = list(batch)
            if not records:
                continue
            delivered = time.monotonic()
            if stall_requested.is_set():
                stall_requested.clear()
                await asyncio.sleep(float(spec["stall_seconds"]))  # the poll deadline lapses
            _log_records(log, delivered, records)
            if pace.rate > 0:
                await asyncio.sleep(min(len(records) / pace.rate, MAX_PACED_SLEEP))
            await _commit(consumer, log, records)
    finally:
        await consumer.close()


def _exit_with_parent() -> None:
    """The driver may itself be SIGKILLed: a member whose parent is gone ends instead of lingering."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def main() -> None:
    _exit_with_parent()
    spec = json.loads(sys.argv[1])
    with open(spec["log"], "a", encoding="ascii") as log:
        asyncio.run(run(spec, log))


if __name__ == "__main__":
    main()
