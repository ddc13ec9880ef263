"""The demo's story, step by step; each sentence says what the members and the ledger observed.

Orders are produced in two stages, so the story holds by construction: the first arrive once both
members are in the group (each reads its own partitions); the second once A's handler is set to hang
on its next batch, so A is handed a batch it never finishes, with more records waiting behind it on
its partitions. B then takes those partitions over from A's last commit and reads what A was handed
again. A step whose fact was not observed says what happened instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from enum import Enum
from typing import Any

from ..testing.helpers import produce
from .demo_members import Ledger, Member
from .demo_view import DemoView

PARTITIONS = 4
FIRST_ORDERS, MORE_ORDERS = 2000, 3000  # per stage; each stage spread evenly over the partitions
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
# Fewer than the MORE_ORDERS // PARTITIONS (750) each partition gets: A's stuck batch leaves records
# waiting behind it on each of its partitions.
MAX_POLL_RECORDS = 500
JOIN_ROUND = {  # how each broker answers the JoinGroup round, said next to the handover figures
    "kafka": "Kafka answers the JoinGroup once every member has rejoined",
    "tansu": f"Tansu answers each JoinGroup after half of session_timeout_ms, {SESSION_TIMEOUT_MS // 2} ms",
}


class StoryCut(Exception):
    """A step's fact was not observed: the step has said what happened instead, the story ends."""


class Ending(Enum):
    COMPLETE = "every step observed"
    CUT = "a step's fact was not observed"
    INTERRUPTED = "Ctrl-C or SIGTERM"


async def wait_for(condition: Callable[[], bool], seconds: float = SETTLE_SECONDS) -> bool:
    """Sample ``condition`` until it holds (True) or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    # The state changes inside the members' own poll tasks; sampling it is what a viewer does.
    while not condition():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(SAMPLE_SECONDS)
    return True


async def settle(view: DemoView, condition: Callable[[], bool], failure: str) -> None:
    if not await wait_for(condition):
        view.event(f"{failure} within {SETTLE_SECONDS:.0f} s; the demo stops here")
        raise StoryCut(failure)


def both_stable(a: Member, b: Member) -> bool:
    return all(m.figure("group_state") == "STABLE" and m.consumer.assignment() for m in (a, b))


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:.0f} ms"


class Orders:
    """The orders the story sends: keys order-0, order-1, ..., spread evenly over the partitions."""

    def __init__(self, bootstrap: str, topic: str, ledger: Ledger) -> None:
        self.bootstrap, self.topic, self.ledger = bootstrap, topic, ledger
        self.sent = 0

    async def send(self, count: int) -> None:
        records: list[dict[str, Any]] = []
        for i in range(self.sent, self.sent + count):
            records.append({"key": f"order-{i}", "value": f'{{"amount": {i % 100}}}', "partition": i % PARTITIONS})
            self.ledger.produced[i % PARTITIONS] += 1
        self.sent += count
        # The producer blocks until every record is acknowledged; the members poll meanwhile.
        await asyncio.to_thread(produce, self.bootstrap, self.topic, records)

    def all_read(self) -> bool:
        return len(self.ledger.orders) >= self.sent


async def join_step(view: DemoView, a: Member, b: Member, orders: Orders) -> None:
    await a.consumer.start()
    await b.consumer.start()
    a.start_polling()
    b.start_polling()
    view.event(f"two members join; each heartbeats every {HEARTBEAT_INTERVAL_MS} ms from a "
               f"background task (session_timeout_ms={SESSION_TIMEOUT_MS})")
    await settle(view, lambda: both_stable(a, b), "the two members did not both get partitions")
    await orders.send(FIRST_ORDERS)
    view.event(f"{FIRST_ORDERS} orders arrive, spread over the {PARTITIONS} partitions; each member "
               "reads its own")
    await settle(view, orders.all_read, f"the {FIRST_ORDERS} orders were not all read")
    await asyncio.sleep(2.0)  # a few heartbeats on the table
    view.event(f"records consumed so far: A {a.consumed}, B {b.consumed}")


async def hang_step(view: DemoView, a: Member, orders: Orders) -> None:
    """A's handler hangs on the first batch of the next orders, with more of them waiting behind it."""
    a.hang_on_next_batch()
    await orders.send(MORE_ORDERS)
    await settle(view, lambda: a.stuck_batch > 0, f"A was handed none of the {MORE_ORDERS} new orders")
    view.event(f"{MORE_ORDERS} more orders arrive; A's handler hangs on a batch of {a.stuck_batch} (A stops "
               f"polling), {orders.ledger.unread_on(a.partitions())} more wait on its partitions; its "
               f"heartbeats go on from the background task; its watchdog will leave at "
               f"max_poll_interval_ms={MAX_POLL_INTERVAL_MS}")


async def watchdog_step(view: DemoView, a: Member, b: Member, join_round: str) -> None:
    """A's watchdog leaves at the poll deadline; then the broker hands A's partitions to B."""
    stable_for = 0.0  # the longest A was seen STABLE (heartbeating, in the group) without a poll
    b_had_all = False  # B seen owning every partition before A's watchdog left: A was out already

    def watchdog_fired() -> bool:
        nonlocal stable_for, b_had_all
        m = a.consumer.metrics()
        if (m.get("poll_interval_lapses") or 0) > 0:
            return True
        if m.get("group_state") == "STABLE":
            stable_for = max(stable_for, m.get("seconds_since_last_poll") or 0.0)
        b_had_all = b_had_all or b.owns(PARTITIONS)
        return False

    await settle(view, watchdog_fired, "A's watchdog did not leave")
    # The consumer's own clocks: when it last polled, and how late after the deadline it left.
    left_at = time.monotonic()
    since_poll = a.figure("seconds_since_last_poll") or 0.0
    leave_delay = a.figure("last_leave_delay_seconds") or 0.0
    lapse = MAX_POLL_INTERVAL_MS / 1000 + leave_delay
    left_at -= since_poll - lapse  # the watchdog's moment, not when this sample saw it
    if stable_for * 1000 > SESSION_TIMEOUT_MS:
        view.event(f"A's heartbeats kept it in the group for {stable_for:.1f} s without a poll, past "
                   f"session_timeout_ms={SESSION_TIMEOUT_MS}")
    else:
        view.event(f"A was seen in the group for only {stable_for:.1f} s without a poll, not past "
                   f"session_timeout_ms={SESSION_TIMEOUT_MS}")
    view.event(f"A's watchdog: LeaveGroup sent {_ms(leave_delay)} after the poll deadline "
               f"({lapse:.1f} s after A's last poll, max_poll_interval_ms={MAX_POLL_INTERVAL_MS})")
    if b_had_all:
        view.event(f"broker: B owned all {PARTITIONS} partitions before A's watchdog left (the broker had "
                   "removed A already); the demo stops here")
        raise StoryCut("B took over before the LeaveGroup")
    await settle(view, lambda: b.owns(PARTITIONS), f"broker: B did not get all {PARTITIONS} partitions")
    view.event(f"broker: B owns all {PARTITIONS} partitions {time.monotonic() - left_at:.1f} s later (the "
               f"rebalance: B hears of it in its next heartbeat and rejoins; {join_round}); without "
               f"the LeaveGroup the broker would first wait session_timeout_ms={SESSION_TIMEOUT_MS} "
               "for A's missing heartbeats")


async def reread_step(view: DemoView, orders: Orders) -> None:
    """B reads A's former partitions from A's last commit: what A was handed since, it reads again."""
    await settle(view, orders.all_read, f"the {orders.sent} orders were not all read")
    again = orders.ledger.rereads["B", "A"]
    if again:
        view.event(f"B reads A's former partitions from A's last committed offsets: the {again} records "
                   "A was handed since its last commit are read a second time (at-least-once)")
    else:
        view.event("B reads A's former partitions from A's last committed offsets: A had committed "
                   "every record it was handed, so none is read twice")


async def close_step(view: DemoView, a: Member, b: Member, join_round: str) -> None:
    """B closes (commit + LeaveGroup); then the broker hands B's partitions to A."""
    view.event("B closes: close() commits its offsets and sends LeaveGroup")
    await b.stop_polling()
    started = time.monotonic()
    await b.consumer.close()
    closed_at = time.monotonic()
    view.event(f"B: commit + LeaveGroup in {_ms(closed_at - started)} (close() returned)")
    await settle(view, lambda: a.owns(PARTITIONS), f"broker: A did not get all {PARTITIONS} partitions")
    view.event(f"broker: A owns all {PARTITIONS} partitions {time.monotonic() - closed_at:.1f} s later (the "
               f"rebalance: A hears of it in its next heartbeat and rejoins; {join_round})")


def summary(consumed_by_a: int, consumed_by_b: int, orders: Orders) -> str:
    """The done line: what each member read, whether every order was read, and what was read twice."""
    ledger = orders.ledger
    missing = orders.sent - len(ledger.orders)
    read = f"{missing} of the {orders.sent} orders not read" if missing > 0 else f"all {orders.sent} orders read"
    twice = [f"{reader} re-read {count} that {first} had been handed but not committed"
             for (reader, first), count in sorted(ledger.rereads.items()) if count]
    again = f"; {', '.join(twice)}: at-least-once" if twice else "; none read twice"
    return f"done: A consumed {consumed_by_a} records, B {consumed_by_b}; {read}{again}"


async def story(view: DemoView, a: Member, b: Member, orders: Orders, join_round: str) -> Ending:
    ending = Ending.COMPLETE
    try:
        await join_step(view, a, b, orders)
        await hang_step(view, a, orders)
        await watchdog_step(view, a, b, join_round)
        await reread_step(view, orders)
        view.event("A polls again: the next poll() rejoins the group")
        a.start_polling()
        await settle(view, lambda: both_stable(a, b), "A and B were not both in the group again")
        await asyncio.sleep(1.0)
        await close_step(view, a, b, join_round)
    except StoryCut:
        ending = Ending.CUT  # the step said what happened; the summary still says what was read
    await a.stop_polling()
    await a.consumer.close()
    view.event(summary(a.consumed, b.consumed, orders))
    return ending
