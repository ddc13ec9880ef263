"""`aiokafka-lite demo`: KIP-62 live, on an embedded broker (Tansu by default, no Java needed).

Two members share a group and read the orders that arrive. Member A's handler then hangs on a
batch: its heartbeats go on from the background task, so the broker keeps it; at
max_poll_interval_ms its poll-deadline watchdog sends LeaveGroup and B takes over everything, reading
again what A was handed but had not committed. A polls again and rejoins. Finally B closes (commit +
LeaveGroup) and A gets its partitions. Each step prints what the client did and when, measured from
the consumer's own metrics, apart from what the broker then took to rebalance; the story itself is in
demo_story.py. The exit status is 0 when every step's fact was observed, 1 when one was not.

On a terminal the members are shown in a live table (rich); otherwise as plain lines. Ctrl-C
(SIGTERM likewise) closes both members and stops the broker; the exit status is then 130 (143).
"""
from __future__ import annotations

import asyncio
import logging
import signal
import sys
from typing import Any

from .. import Consumer
from ..testing.apache_kafka import ApacheKafkaBroker
from ..testing.helpers import create_topic
from ..testing.tansu import TansuBroker
from .demo_members import Ledger, Member
from .demo_prerequisites import KAFKA_VERSION, prepare
from .demo_story import (
    HEARTBEAT_INTERVAL_MS,
    JOIN_ROUND,
    MAX_POLL_INTERVAL_MS,
    MAX_POLL_RECORDS,
    PARTITIONS,
    SESSION_TIMEOUT_MS,
    Ending,
    Orders,
    story,
)
from .demo_view import DemoView, MemberRow, PlainView, make_view, member_row
from .run import EXIT_OK, StopSignals, first_of, signal_status

TOPIC = "demo-orders"
GROUP = "demo-billing"
EXIT_STORY_CUT = 1  # a step's fact was not observed: the story said what happened instead


def rows(members: list[Member]) -> list[MemberRow]:
    return [member_row(m.name, m.consumer, polling=m.polling, consumed=m.consumed) for m in members]


async def refresh_forever(view: DemoView, members: list[Member]) -> None:
    while True:
        await asyncio.sleep(view.refresh_seconds)
        view.refresh(rows(members))


async def run_demo(bootstrap: str, view: DemoView, stop: asyncio.Event, broker_kind: str = "tansu",
                   topic: str = TOPIC, group: str = GROUP) -> Ending:
    """The story on ``bootstrap``, whose ``topic`` exists with PARTITIONS partitions; ``stop`` cuts it short."""
    common: dict[str, Any] = dict(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                  session_timeout_ms=SESSION_TIMEOUT_MS,
                                  heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS, max_poll_records=MAX_POLL_RECORDS)
    ledger = Ledger()
    a = Member("A", Consumer(topic, max_poll_interval_ms=MAX_POLL_INTERVAL_MS, client_id="demo-A", **common),
               ledger)
    b = Member("B", Consumer(topic, client_id="demo-B", **common), ledger)
    endings: list[Ending] = []

    async def told() -> None:
        endings.append(await story(view, a, b, Orders(bootstrap, topic, ledger), JOIN_ROUND[broker_kind]))

    refresher = asyncio.create_task(refresh_forever(view, [a, b]))
    try:
        return endings[0] if await first_of(told(), stop) else Ending.INTERRUPTED
    finally:
        refresher.cancel()
        for member in (a, b):
            await member.stop_polling()
            await member.consumer.close(timeout=10.0)
        view.refresh(rows([a, b]))  # the last frame shows both members closed


async def _main_with_signals(bootstrap: str, view: DemoView, broker_kind: str) -> int:
    """0 when every step was observed, 1 when one was not; 130 or 143 when SIGINT or SIGTERM cut it short."""
    with StopSignals() as signals:
        ending = await run_demo(bootstrap, view, signals.event, broker_kind)
    return {Ending.COMPLETE: EXIT_OK, Ending.CUT: EXIT_STORY_CUT}.get(ending, signals.status)


def _start_broker(broker_kind: str, view: DemoView) -> TansuBroker | ApacheKafkaBroker:
    if broker_kind == "kafka":
        view.event(f"starting an embedded Apache Kafka {KAFKA_VERSION} broker on 127.0.0.1")
        return ApacheKafkaBroker(KAFKA_VERSION)
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
            shown.event(f"topic {TOPIC!r} with {PARTITIONS} partitions, no records yet")
            status = asyncio.run(_main_with_signals(broker.bootstrap_servers, shown, broker_kind))
            if status not in (EXIT_OK, EXIT_STORY_CUT):
                shown.event("interrupted: both members closed")
        shown.event("broker stopped")
    except KeyboardInterrupt:  # Ctrl-C while the broker was starting: `with` has stopped it
        shown.event("interrupted")
        status = signal_status(signal.SIGINT)
    finally:
        logger.removeHandler(handler)
        shown.close()
    return status


__all__ = ["TOPIC", "Ending", "PlainView", "main", "run_demo"]
