"""A group member in its own process, for the liveness benchmarks.

    python -m benchmarks.member '{"client": "lite"|"aiokafka", "bootstrap": ..., "topic": ...,
                                  "group": ..., "settings": {...}}'

Polls in a loop and prints ``{"t": time.monotonic(), "owned": <partitions>}`` each time its
assignment size changes (CLOCK_MONOTONIC is system-wide, so the parent can compare the times).
Closes cleanly when its stdin closes; the parent may also SIGKILL it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from typing import Any


def _report(owned: int) -> None:
    print(json.dumps({"t": time.monotonic(), "owned": owned}), flush=True)


def _stdin_closed() -> threading.Event:
    closed = threading.Event()

    def wait() -> None:
        sys.stdin.read()
        closed.set()

    threading.Thread(target=wait, daemon=True).start()
    return closed


async def _lite(spec: dict[str, Any], stop: threading.Event) -> None:
    from aiokafka_lite import Consumer

    async with Consumer(spec["topic"], bootstrap_servers=spec["bootstrap"], group_id=spec["group"],
                        **spec["settings"]) as consumer:
        owned = -1
        while not stop.is_set():
            await consumer.poll(timeout=0.1)
            if len(consumer.assignment()) != owned:
                owned = len(consumer.assignment())
                _report(owned)


async def _aiokafka(spec: dict[str, Any], stop: threading.Event) -> None:
    import aiokafka

    consumer = aiokafka.AIOKafkaConsumer(spec["topic"], bootstrap_servers=spec["bootstrap"],
                                         group_id=spec["group"], **spec["settings"])
    await consumer.start()
    try:
        owned = -1
        while not stop.is_set():
            await consumer.getmany(timeout_ms=100)
            if len(consumer.assignment()) != owned:
                owned = len(consumer.assignment())
                _report(owned)
    finally:
        await consumer.stop()


def main() -> None:
    spec = json.loads(sys.argv[1])
    stop = _stdin_closed()
    asyncio.run(_lite(spec, stop) if spec["client"] == "lite" else _aiokafka(spec, stop))


if __name__ == "__main__":
    main()
