"""`aiokafka-lite demo`: KIP-62 live, on an embedded broker (Tansu by default, no Java needed).

Two members share a group. Member A then stops polling: its heartbeats go on from the background
task, so the broker keeps it; at max_poll_interval_ms its poll-deadline watchdog sends LeaveGroup and
B takes over everything. A polls again and rejoins. Finally B closes (commit + LeaveGroup) and A
gets its partitions. Each step prints what the client did and when, measured from the consumer's
own metrics, apart from what the broker then took to rebalance.

On a terminal the members are shown in a live table (rich); otherwise as plain lines. Ctrl-C
(SIGTERM likewise) closes both members and stops the broker; the exit status is then 130 (143).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from .. import Consumer
from ..testing.apache_kafka import ApacheKafkaBroker
from ..testing.helpers import create_topic, produce
from ..testing.tansu import TansuBroker
from .demo_prerequisites import prepare
from .demo_view import DemoView, MemberRow, PlainView, make_view, member_row
from .run import EXIT_OK, StopSignals, first_of, signal_status

TOPIC = "demo-orders"
GROUP = "demo-billing"
PARTITIONS = 4
# No step waits longer than this for the group to settle; the broker is local.
SETTLE_SECONDS = 20.0
# How often the story samples the members' state to time a handover.
SAMPLE_SECONDS = 0.02


# A handover costs the remaining member's next heartbeat (it hears of the rebalance in the answer)
# plus the broker's JoinGroup round. The embedded Kafka answers that round once every member has
# rejoined (and group.initial.rebalance.delay.ms=0). Tansu holds each JoinGroup until half of
# session_timeout_ms has passed, checking once a second (testing.tansu.DEVIATIONS["join_delay"]):
# 2000 ms is the shortest session that costs it one second, and still twice the join. A heartbeat
# every 250 ms keeps the wait to hear of a rebalance short. MAX_POLL_INTERVAL_MS above
# SESSION_TIMEOUT_MS shows KIP-62: heartbeats alone keep A in the group past the session timeout.
SESSION_TIMEOUT_MS = 2000
HEARTBEAT_INTERVAL_MS = 250
MAX_POLL_INTERVAL_MS = 3000  # member A's; B keeps the default
JOIN_ROUND = {  # how each broker answers the JoinGroup round, said next to the handover figures
    "kafka": "Kafka answers the JoinGroup once every member has rejoined",
    "tansu": f"Tansu answers each JoinGroup after half of session_timeout_ms, {SESSION_TIMEOUT_MS // 2} ms",
}


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

    def figure(self, name: str) -> Any:
        return self.consumer.metrics().get(name)


async def wait_for(condition: Callable[[], bool], seconds: float = SETTLE_SECONDS) -> bool:
    """Sample ``condition`` until it holds (True) or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    # The state changes inside the members' own poll tasks; sampling it is what a viewer does.
    while not condition():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(SAMPLE_SECONDS)
    return True


def both_stable(a: Member, b: Member) -> bool:
    return all(m.figure("group_state") == "STABLE" and m.consumer.assignment() for m in (a, b))


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:.0f} ms"


async def watchdog_step(view: DemoView, a: Member, b: Member, join_round: str) -> None:
    """A stops polling; its watchdog leaves at the poll deadline; then the broker hands A's partitions to B."""
    view.event(f"A stops polling (a stuck handler); its heartbeats go on from the background task; its "
               f"watchdog will leave at max_poll_interval_ms={MAX_POLL_INTERVAL_MS}")
    lapses_before = a.figure("poll_interval_lapses") or 0
    stable_for = 0.0  # the longest A was seen STABLE (heartbeating, in the group) without a poll

    def watchdog_fired() -> bool:
        nonlocal stable_for
        m = a.consumer.metrics()
        if m.get("group_state") == "STABLE":
            stable_for = max(stable_for, m.get("seconds_since_last_poll") or 0.0)
        return (m.get("poll_interval_lapses") or 0) > lapses_before

    await a.stop_polling()
    if not await wait_for(watchdog_fired):
        view.event(f"A's watchdog did not leave within {SETTLE_SECONDS:.0f} s")
        return
    # The consumer's own clocks: when it last polled, and how late after the deadline it left.
    left_at = time.monotonic()
    since_poll = a.figure("seconds_since_last_poll") or 0.0
    leave_delay = a.figure("last_leave_delay_seconds") or 0.0
    lapse = MAX_POLL_INTERVAL_MS / 1000 + leave_delay
    left_at -= since_poll - lapse  # the watchdog's moment, not when this sample saw it
    view.event(f"A's heartbeats kept it in the group for {stable_for:.1f} s without a poll, past "
               f"session_timeout_ms={SESSION_TIMEOUT_MS}")
    view.event(f"A's watchdog: LeaveGroup sent {_ms(leave_delay)} after the poll deadline "
               f"({lapse:.1f} s after A's last poll, max_poll_interval_ms={MAX_POLL_INTERVAL_MS})")
    if not await wait_for(lambda: b.owns(PARTITIONS)):
        view.event(f"broker: B did not get all {PARTITIONS} partitions within {SETTLE_SECONDS:.0f} s")
        return
    view.event(f"broker: B owns all {PARTITIONS} partitions {time.monotonic() - left_at:.1f} s later (the "
               f"rebalance: B hears of it in its next heartbeat and rejoins; {join_round}); without "
               f"the LeaveGroup the broker would first wait session_timeout_ms={SESSION_TIMEOUT_MS} "
               "for A's missing heartbeats")


async def close_step(view: DemoView, a: Member, b: Member, join_round: str) -> None:
    """B closes (commit + LeaveGroup); then the broker hands B's partitions to A."""
    view.event("B closes: close() commits its offsets and sends LeaveGroup")
    await b.stop_polling()
    started = time.monotonic()
    await b.consumer.close()
    closed_at = time.monotonic()
    view.event(f"B: commit + LeaveGroup in {_ms(closed_at - started)} (close() returned)")
    if not await wait_for(lambda: a.owns(PARTITIONS)):
        view.event(f"broker: A did not get all {PARTITIONS} partitions within {SETTLE_SECONDS:.0f} s")
        return
    view.event(f"broker: A owns all {PARTITIONS} partitions {time.monotonic() - closed_at:.1f} s later (the "
               f"rebalance: A hears of it in its next heartbeat and rejoins; {join_round})")


async def story(view: DemoView, a: Member, b: Member, join_round: str) -> None:
    await a.consumer.start()
    await b.consumer.start()
    a.start_polling()
    b.start_polling()
    view.event(f"two members join; each heartbeats every {HEARTBEAT_INTERVAL_MS} ms from a "
               f"background task (session_timeout_ms={SESSION_TIMEOUT_MS})")
    await wait_for(lambda: both_stable(a, b))
    await asyncio.sleep(2.0)  # a few heartbeats on the table
    view.event(f"records consumed so far: A {a.consumed}, B {b.consumed}")

    await watchdog_step(view, a, b, join_round)

    view.event("A polls again: the next poll() rejoins the group")
    a.start_polling()
    await wait_for(lambda: both_stable(a, b))
    await asyncio.sleep(1.0)

    await close_step(view, a, b, join_round)
    await a.stop_polling()
    await a.consumer.close()
    view.event(f"done: A consumed {a.consumed} records, B {b.consumed} "
               "(B re-read what A had not committed: at-least-once)")


def rows(members: list[Member]) -> list[MemberRow]:
    return [member_row(m.name, m.consumer, polling=m.polling, consumed=m.consumed) for m in members]


async def refresh_forever(view: DemoView, members: list[Member]) -> None:
    while True:
        await asyncio.sleep(view.refresh_seconds)
        view.refresh(rows(members))


async def run_demo(bootstrap: str, view: DemoView, stop: asyncio.Event, broker_kind: str = "tansu") -> bool:
    """The story on ``bootstrap``; True when it ran to the end, False when ``stop`` cut it short."""
    common: dict[str, Any] = dict(bootstrap_servers=bootstrap, group_id=GROUP, auto_offset_reset="earliest",
                                  session_timeout_ms=SESSION_TIMEOUT_MS,
                                  heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS)
    a = Member("A", Consumer(TOPIC, max_poll_interval_ms=MAX_POLL_INTERVAL_MS, client_id="demo-A",
                             **common))
    b = Member("B", Consumer(TOPIC, client_id="demo-B", **common))
    refresher = asyncio.create_task(refresh_forever(view, [a, b]))
    try:
        return await first_of(story(view, a, b, JOIN_ROUND[broker_kind]), stop)
    finally:
        refresher.cancel()
        for member in (a, b):
            await member.stop_polling()
            await member.consumer.close(timeout=10.0)
        view.refresh(rows([a, b]))  # the last frame shows both members closed


async def _main_with_signals(bootstrap: str, view: DemoView, broker_kind: str) -> int:
    """0 when the story ran to the end; 130 or 143 when SIGINT or SIGTERM cut it short."""
    with StopSignals() as signals:
        finished = await run_demo(bootstrap, view, signals.event, broker_kind)
    return EXIT_OK if finished else signals.status


def _start_broker(broker_kind: str, view: DemoView) -> TansuBroker | ApacheKafkaBroker:
    if broker_kind == "kafka":
        view.event("starting an embedded Apache Kafka 4.3.1 broker on 127.0.0.1")
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
    status = EXIT_OK
    try:
        with _start_broker(broker_kind, shown) as broker:
            create_topic(broker, TOPIC, partitions=PARTITIONS)
            sent = produce(broker, TOPIC, ((f"order-{i}", f'{{"amount": {i % 100}}}') for i in range(5000)))
            shown.event(f"topic {TOPIC!r} with {PARTITIONS} partitions, {sent} records produced")
            status = asyncio.run(_main_with_signals(broker.bootstrap_servers, shown, broker_kind))
            if status != EXIT_OK:
                shown.event("interrupted: both members closed")
        shown.event("broker stopped")
    except KeyboardInterrupt:  # Ctrl-C while the broker was starting: `with` has stopped it
        shown.event("interrupted")
        status = signal_status(signal.SIGINT)
    finally:
        logger.removeHandler(handler)
        shown.close()
    return status


__all__ = ["PlainView", "main", "run_demo"]
