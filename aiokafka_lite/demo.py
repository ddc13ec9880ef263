"""`aiokafka-lite demo`: KIP-62 live, on an embedded Tansu broker (no Java needed).

Two members share a group. Member A then stops polling: its poll-deadline watchdog leaves the
group at max_poll_interval_ms and B takes over everything, long before session_timeout_ms. A
polls again and rejoins. Finally B closes and hands its partitions to A at once.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import Any

from . import Consumer
from .testing.apache_kafka import ApacheKafkaBroker
from .testing.helpers import create_topic, produce
from .testing.tansu import TansuBroker

TOPIC = "demo-orders"
GROUP = "demo-billing"
PARTITIONS = 4
SESSION_MS = 6000
POLL_INTERVAL_MS = 3000


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def parts(consumer: Consumer) -> str:
    return ",".join(str(tp.partition) for tp in sorted(consumer.assignment())) or "-"


def status(name: str, consumer: Consumer) -> str:
    m = consumer.metrics()
    return (f"{name}: {m.get('group_state', '?'):8} generation {m.get('generation_id')}, partitions "
            f"[{parts(consumer)}], heartbeats {m.get('heartbeats_sent', 0)}")


async def keep_polling(name: str, consumer: Consumer, counts: dict[str, int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        counts[name] += len(await consumer.poll(timeout=0.2))


async def owns_all(consumer: Consumer) -> None:
    # The assignment changes inside the member's own poll task; sampling it is what a viewer does.
    while len(consumer.assignment()) < PARTITIONS:  # noqa: ASYNC110
        await asyncio.sleep(0.05)


async def show(seconds: float, members: dict[str, Consumer]) -> None:
    for _ in range(int(seconds)):
        await asyncio.sleep(1.0)
        say("   " + " | ".join(status(name, c) for name, c in members.items()))


async def run_demo(bootstrap: str) -> None:
    # Tansu holds each JoinGroup for about half of session_timeout_ms, so keep that short here.
    settings: dict[str, Any] = dict(bootstrap_servers=bootstrap, group_id=GROUP, auto_offset_reset="earliest",
                                    session_timeout_ms=SESSION_MS, heartbeat_interval_ms=1000)
    a = Consumer(TOPIC, max_poll_interval_ms=POLL_INTERVAL_MS, **settings)
    b = Consumer(TOPIC, **settings)
    counts = {"A": 0, "B": 0}
    await a.start()
    await b.start()
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    poll_a = asyncio.create_task(keep_polling("A", a, counts, stop_a))
    poll_b = asyncio.create_task(keep_polling("B", b, counts, stop_b))
    say("two members join; each heartbeats every 1 s from a background task")
    await show(5, {"A": a, "B": b})
    say(f"records consumed so far: A {counts['A']}, B {counts['B']}")

    say(f"A stops polling (a stuck handler); its watchdog will leave at max_poll_interval_ms={POLL_INTERVAL_MS}")
    stop_a.set()
    await poll_a
    started = time.monotonic()
    await owns_all(b)
    say(f"B owns all {PARTITIONS} partitions {time.monotonic() - started:.1f} s after A's last poll; "
        f"A's LeaveGroup went out {1000 * (a.metrics()['last_leave_delay_seconds'] or 0):.0f} ms after "
        f"its poll deadline (without it, the broker would wait for session_timeout_ms={SESSION_MS})")

    say("A polls again: the next poll() rejoins the group")
    stop_a.clear()
    poll_a = asyncio.create_task(keep_polling("A", a, counts, stop_a))
    await show(4, {"A": a, "B": b})

    say("B closes: commit, LeaveGroup, and A gets its partitions without waiting for a timeout")
    started = time.monotonic()
    stop_b.set()
    await poll_b
    await b.close()
    await owns_all(a)
    say(f"A owns all {PARTITIONS} partitions {time.monotonic() - started:.1f} s after B's close()")
    stop_a.set()
    await poll_a
    await a.close()
    say(f"done: A consumed {counts['A']} records, B {counts['B']}")


def main(broker_kind: str = "tansu") -> int:
    logging.basicConfig(level=logging.WARNING, format="[%(asctime)s] %(levelname)s %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stdout)
    broker: TansuBroker | ApacheKafkaBroker
    if broker_kind == "kafka":
        say("starting an embedded Apache Kafka 4.3.1 broker on 127.0.0.1 (downloads its jars once)")
        broker = ApacheKafkaBroker("4.3.1")
    else:
        say("starting an embedded Tansu broker on 127.0.0.1")
        broker = TansuBroker()
    with broker:
        create_topic(broker, TOPIC, partitions=PARTITIONS)
        sent = produce(broker, TOPIC, ((f"order-{i}", f'{{"amount": {i % 100}}}') for i in range(5000)))
        say(f"topic {TOPIC!r} with {PARTITIONS} partitions, {sent} records produced")
        try:
            asyncio.run(run_demo(broker.bootstrap_servers))
        except KeyboardInterrupt:
            say("interrupted")
    say("broker stopped")
    return 0
