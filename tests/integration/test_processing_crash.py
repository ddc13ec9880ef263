"""process() killed with SIGKILL mid-run, then restarted (Apache Kafka 4.3.1), on both group
protocols: every record is handled at least once, and the records handled again are exactly those
the last commit (watermark plus metadata) did not cover.

Classic: a static member, so the restart takes the killed member's place at once. KIP-848: the
broker refuses a static member's instance id (UNRELEASED_INSTANCE_ID) while the killed member's
session lasts, so the restart joins as a new, dynamic member; it is assigned the partitions when
the killed member's session lapses (group.consumer.session.timeout.ms, 10 s on the test broker)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.processing import Processor, decode
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import report, until

pytestmark = pytest.mark.asyncio

PARTITIONS, RECORDS, KEYS = 3, 3000, 100

# The first run, in a process of its own: each finished record is written (line-buffered, so the
# line is the kernel's before the handler returns) to the file named.
CHILD = """
import asyncio, json, sys
from aiokafka_lite import Consumer
from aiokafka_lite.processing import Processor
topic, path, settings = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

async def main():
    out = open(path, "a", buffering=1)
    async def handler(record):
        await asyncio.sleep(0.3 if record.offset % 50 == 0 else 0.005)  # slow ones hold the watermark back
        out.write(f"{record.partition} {record.offset}\\n")
    async with Consumer(topic, **settings) as consumer:
        await Processor(consumer, handler, concurrency=20, commit_interval=0.05).run()

asyncio.run(main())
"""


def lines_of(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    return [(int(p), int(o)) for p, o in (line.split() for line in path.read_text().splitlines() if line.strip())]


@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
async def test_a_killed_run_restarts_and_handles_again_only_what_the_commit_did_not_cover(
        apache_kafka_broker: Any, unique_topic: str, unique_group: str, tmp_path: Path, group_protocol: str) -> None:
    broker = apache_kafka_broker
    create_topic(broker, unique_topic, partitions=PARTITIONS)
    produce(broker, unique_topic, [(f"k{i % KEYS}", str(i)) for i in range(RECORDS)], enable_idempotence=True)
    done_file = tmp_path / "done.txt"
    settings: dict[str, Any] = dict(
        bootstrap_servers=broker.bootstrap_servers, group_id=unique_group, group_protocol=group_protocol,
        enable_auto_commit=False, auto_offset_reset="earliest")
    if group_protocol == "classic":
        settings.update(group_instance_id="worker-1", session_timeout_ms=10000, heartbeat_interval_ms=500)
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", CHILD, unique_topic, str(done_file),
                                                 json.dumps(settings), start_new_session=True)
    try:
        await until(lambda: len(lines_of(done_file)) >= RECORDS // 3 or child.returncode is not None, 60.0,
                    "a third of the records handled by the first run")
        assert child.returncode is None, "the first run ended by itself"
        await asyncio.sleep(0.2)  # some commits land; the kill still comes mid-run
        os.killpg(child.pid, signal.SIGKILL)
    finally:
        if child.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # killed above already
                os.killpg(child.pid, signal.SIGKILL)
        await asyncio.wait_for(child.wait(), 30.0)
    first = lines_of(done_file)
    assert len(first) < RECORDS, "killed mid-run"
    tps = [TopicPartition(unique_topic, p) for p in range(PARTITIONS)]
    second: list[tuple[int, int]] = []

    async def handler(record: Any) -> None:
        second.append((record.partition, record.offset))

    async with Consumer(unique_topic, **settings) as consumer:
        committed = await consumer.committed(tps)
        covered: set[tuple[int, int]] = set()
        for tp, om in committed.items():
            if om is not None:
                covered |= {(tp.partition, o) for o in range(om.offset)}
                ranges = decode(om.metadata, om.offset).ranges
                covered |= {(tp.partition, o) for start, end in ranges for o in range(start, end)}
        everything = {(p, o) for p in range(PARTITIONS) for o in range(RECORDS)
                      if o < (await consumer.end_offsets([tps[p]]))[tps[p]]}
        processor = Processor(consumer, handler, concurrency=20)
        task = asyncio.create_task(processor.run())
        # KIP-848: about 10 s pass before the killed member's session lapses and the partitions move.
        await until(lambda: len(second) >= len(everything - covered) or task.done(), 60.0, "the rest handled")
        processor.stop()
        result = await asyncio.wait_for(task, 30.0)
    assert len(everything) == RECORDS
    assert covered <= set(first), "a commit covered a record that had not finished"
    assert len(second) == len(set(second))
    assert set(second) == everything - covered  # everything else, and nothing the commit covered
    again = set(second) & set(first)
    assert again == set(first) - covered
    above = {(p, o) for p, o in covered if o >= committed[tps[p]].offset}  # what only the metadata covered
    assert result.skipped == len(above)
    assert above, "the slow records held the watermarks back: the metadata covered records above them"
    report({"test": "processing-sigkill", "group_protocol": group_protocol, "records": RECORDS, "first_run": len(first),
            "covered_by_commit": len(covered), "handled_again": len(again), "skipped_by_metadata": result.skipped})
