"""`aiokafka-lite demo`: KIP-62 live, on an embedded Tansu broker (no Java needed).

Two members share a group. Member A then stops polling: its poll-deadline watchdog leaves the
group at max_poll_interval_ms and B takes over everything, long before session_timeout_ms. A
polls again and rejoins. Finally B closes and hands its partitions to A at once.

On a terminal the members are shown in a live table (rich); otherwise as plain lines. Ctrl-C
closes both members and stops the broker.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

from . import Consumer
from .cli_demo_view import DemoView, PlainView, make_view, member_row
from .cli_run import first_of
from .demo_prerequisites import prepare
from .testing.apache_kafka import ApacheKafkaBroker
from .testing.helpers import create_topic, produce
from .testing.tansu import TansuBroker

TOPIC = "demo-orders"
GROUP = "demo-billing"
PARTITIONS = 4
SESSION_MS = 6000
POLL_INTERVAL_MS = 3000
# No step waits longer than this for the group to settle; the broker is local.
SETTLE_SECONDS = 20.0


class Member:
    """One consumer of the demo group, with a poll loop that can be stopped and restarted."""

    def __init__(self, name: str, consumer: Consumer) -> None:
        self.name, self.consumer = name, consumer
        self.consumed = 0
        self.task: asyncio.Task[None] | None = None

    @property
    def polling(self) -> bool:
        return self.task is not None and not self.task.done()

    def start_polling(self) -> None:
        self.task = asyncio.create_task(self._poll_loop(), name=f"demo member {self.name}")

    async def stop_polling(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
            self.task = None

    async def _poll_loop(self) -> None:
        while True:
            self.consumed += len(await self.consumer.poll(timeout=0.2))

    def owns(self, count: int) -> bool:
        return len(self.consumer.assignment()) == count


async def wait_for(condition: Callable[[], bool], seconds: float = SETTLE_SECONDS) -> bool:
    """Sample ``condition`` until it holds (True) or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    # The state changes inside the members' own poll tasks; sampling it is what a viewer does.
    while not condition():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def both_stable(a: Member, b: Member) -> bool:
    return all(m.consumer.metrics().get("group_state") == "STABLE" and m.consumer.assignment() for m in (a, b))


async def story(view: DemoView, a: Member, b: Member) -> None:
    await a.consumer.start()
    await b.consumer.start()
    a.start_polling()
    b.start_polling()
    view.event("two members join; each heartbeats every 1 s from a background task")
    await wait_for(lambda: both_stable(a, b))
    await asyncio.sleep(2.0)  # a couple of heartbeats on the table
    view.event(f"records consumed so far: A {a.consumed}, B {b.consumed}")

    view.event(f"A stops polling (a stuck handler); its watchdog will leave at max_poll_interval_ms={POLL_INTERVAL_MS}")
    await a.stop_polling()
    started = time.monotonic()
    await wait_for(lambda: b.owns(PARTITIONS))
    leave_delay = a.consumer.metrics().get("last_leave_delay_seconds") or 0.0
    view.event(f"B owns all {PARTITIONS} partitions {time.monotonic() - started:.1f} s after A's last poll; "
               f"A's LeaveGroup went out {1000 * leave_delay:.0f} ms after its poll deadline "
               f"(without it, the broker would wait for session_timeout_ms={SESSION_MS})")

    view.event("A polls again: the next poll() rejoins the group")
    a.start_polling()
    await wait_for(lambda: both_stable(a, b))
    await asyncio.sleep(1.0)

    view.event("B closes: commit, LeaveGroup, and A gets its partitions without waiting for a timeout")
    started = time.monotonic()
    await b.stop_polling()
    await b.consumer.close()
    await wait_for(lambda: a.owns(PARTITIONS))
    view.event(f"A owns all {PARTITIONS} partitions {time.monotonic() - started:.1f} s after B's close()")
    await a.stop_polling()
    await a.consumer.close()
    view.event(f"done: A consumed {a.consumed} records, B {b.consumed} "
               "(B re-read what A had not committed: at-least-once)")


async def refresh_forever(view: DemoView, members: list[Member]) -> None:
    while True:
        await asyncio.sleep(view.refresh_seconds)
        view.refresh([member_row(m.name, m.consumer, polling=m.polling, consumed=m.consumed) for m in members])


async def run_demo(bootstrap: str, view: DemoView, stop: asyncio.Event) -> bool:
    """The story on ``bootstrap``; True when it ran to the end, False when ``stop`` cut it short."""
    # Tansu holds a new group's JoinGroup for about half of session_timeout_ms, so keep that short
    # here (testing.tansu.DEVIATIONS["join_delay"]).
    settings: dict[str, Any] = dict(bootstrap_servers=bootstrap, group_id=GROUP, auto_offset_reset="earliest",
                                    session_timeout_ms=SESSION_MS, heartbeat_interval_ms=1000)
    a = Member("A", Consumer(TOPIC, max_poll_interval_ms=POLL_INTERVAL_MS, client_id="demo-A", **settings))
    b = Member("B", Consumer(TOPIC, client_id="demo-B", **settings))
    refresher = asyncio.create_task(refresh_forever(view, [a, b]))
    try:
        return await first_of(story(view, a, b), stop)
    finally:
        refresher.cancel()
        for member in (a, b):
            await member.stop_polling()
            await member.consumer.close(timeout=10.0)


async def _main_with_signals(bootstrap: str, view: DemoView) -> bool:
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return await run_demo(bootstrap, view, stop)


def _start_broker(broker_kind: str, view: DemoView) -> TansuBroker | ApacheKafkaBroker:
    if broker_kind == "kafka":
        view.event("starting an embedded Apache Kafka 4.3.1 broker on 127.0.0.1 (downloads its jars once)")
        return ApacheKafkaBroker("4.3.1")
    view.event("starting an embedded Tansu broker on 127.0.0.1")
    return TansuBroker()


def main(broker_kind: str = "tansu", view: str = "auto") -> int:
    # Before the view: a missing package or tool is one line, and a jar download shows its progress.
    problem = prepare(broker_kind)
    if problem is not None:
        print(f"aiokafka-lite demo: {problem}", file=sys.stderr)
        return 1
    shown = make_view(view)
    logger = logging.getLogger("aiokafka_lite")
    handler = shown.log_handler()
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        with _start_broker(broker_kind, shown) as broker:
            create_topic(broker, TOPIC, partitions=PARTITIONS)
            sent = produce(broker, TOPIC, ((f"order-{i}", f'{{"amount": {i % 100}}}') for i in range(5000)))
            shown.event(f"topic {TOPIC!r} with {PARTITIONS} partitions, {sent} records produced")
            finished = asyncio.run(_main_with_signals(broker.bootstrap_servers, shown))
            if not finished:
                shown.event("interrupted: both members closed")
        shown.event("broker stopped")
    except KeyboardInterrupt:  # Ctrl-C while the broker was starting: `with` has stopped it
        shown.event("interrupted")
    finally:
        logger.removeHandler(handler)
        shown.close()
    return 0


__all__ = ["PlainView", "main", "run_demo"]
