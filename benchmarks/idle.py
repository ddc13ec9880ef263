"""Idle cost: CPU% and RSS of one consumer in a stable group with nothing to read.

    python -m benchmarks.idle '{"client": "lite"|"lite-thread"|"aiokafka", "bootstrap": ..., "topic": ...,
                                "seconds": 30}'

The consumer subscribes, waits until it owns every partition and has read the few records, then
keeps polling (timeout 1 s, as an application would) while CPU time is measured for ``seconds``.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
import uuid
from typing import Any

from benchmarks.peers import PARTITIONS, InProcess, group_settings


def cpu_seconds() -> float:
    """This process's CPU time so far (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mb() -> float:
    """This process's resident memory now, in MiB."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize() / 2**20


async def measure(spec: dict[str, Any]) -> dict[str, Any]:
    client = "aiokafka" if spec["client"] == "aiokafka" else "lite"
    settings = group_settings(heartbeat_interval_ms=3000, session_timeout_ms=45000)
    if spec["client"] == "lite-thread":
        settings["heartbeat_mode"] = "thread"
    member = InProcess(client, spec["bootstrap"], spec["topic"], f"bench-idle-{uuid.uuid4().hex[:8]}", settings)
    await member.start()
    try:
        deadline = time.monotonic() + 60
        while member.owned() != PARTITIONS and time.monotonic() < deadline:
            await member.poll(0.2)
        for _ in range(5):  # read what is there, so the rest is truly idle
            await member.poll(0.2)
        cpu0, wall0 = cpu_seconds(), time.monotonic()
        while time.monotonic() - wall0 < spec["seconds"]:
            await member.poll(1.0)
        cpu, wall = cpu_seconds() - cpu0, time.monotonic() - wall0
        return {"seconds": wall, "cpu_seconds": cpu, "cpu_percent": 100 * cpu / wall, "rss_mb": rss_mb(),
                "owned": member.owned()}
    finally:
        await member.close()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(measure(json.loads(sys.argv[1])))), flush=True)
