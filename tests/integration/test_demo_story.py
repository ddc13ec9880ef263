"""`aiokafka-lite demo`'s story holds in every run (issue 41): ten stories per broker, each checked
for the story's invariants from what it printed, not for its timings.

The stories run on the session's broker, started once, each with a topic and group of its own, five at
a time: a story is mostly waiting (the watchdog's 3 s, the rebalances), so ten one after the other
would cost two minutes per broker, and running them side by side also tells whether the story holds
on a busy machine.
"""

from __future__ import annotations

import asyncio
import io
import re
import uuid

import pytest

from aiokafka_lite.cli.demo import Ending, PlainView, run_demo
from aiokafka_lite.cli.demo_story import FIRST_ORDERS, MAX_POLL_RECORDS, MORE_ORDERS, PARTITIONS, SESSION_TIMEOUT_MS
from aiokafka_lite.testing.helpers import create_topic

STORIES = 10
STORIES_AT_ONCE = 5
FIXTURE = {"tansu": "tansu_broker", "kafka": "apache_kafka_broker"}


def _number(pattern: str, text: str, problems: list[str]) -> list[int]:
    found = re.search(pattern, text)
    if found is None:
        problems.append(f"no line matching {pattern!r}")
        return [-1] * re.compile(pattern).groups
    return [int(group) for group in found.groups()]


def story_problems(text: str) -> list[str]:
    """What in the printed story is not so; [] when every invariant holds."""
    problems: list[str] = []
    total = FIRST_ORDERS + MORE_ORDERS
    # Records were waiting when A's handler hung: each member had read the first orders, A was
    # handed a batch of the next ones and more of them waited behind it.
    so_far_a, so_far_b = _number(r"records consumed so far: A (\d+), B (\d+)", text, problems)
    if not (so_far_a > 0 and so_far_b > 0 and so_far_a + so_far_b >= FIRST_ORDERS):
        problems.append(f"before A hung, not both members had read: A {so_far_a}, B {so_far_b}")
    stuck, waiting = _number(r"A's handler hangs on a batch of (\d+) \(A stops polling\), (\d+) more wait on its "
                             r"partitions", text, problems)
    if not (0 < stuck <= MAX_POLL_RECORDS and waiting > 0):
        problems.append(f"A's stuck batch {stuck}, records waiting behind it {waiting}")
    # KIP-62: A's heartbeats, not its polls, kept it in the group past the session timeout.
    kept = re.search(r"A's heartbeats kept it in the group for ([\d.]+) s without a poll, past", text)
    if kept is None or float(kept.group(1)) * 1000 <= SESSION_TIMEOUT_MS:
        problems.append(f"A was not seen kept in the group past session_timeout_ms: {kept}")
    for handover in (rf"broker: B owns all {PARTITIONS} partitions", rf"broker: A owns all {PARTITIONS} partitions"):
        if handover not in text:
            problems.append(f"no line {handover!r}")
    # B took A's partitions over from A's last commit: it read again at least the batch A hung on.
    [reread] = _number(r"the (\d+) records A was handed since its last commit are read a second time "
                       r"\(at-least-once\)", text, problems)
    if reread < stuck:
        problems.append(f"B re-read {reread} records, fewer than A's uncommitted batch of {stuck}")
    consumed_a, consumed_b = _number(r"done: A consumed (\d+) records, B (\d+); all "
                                     rf"{total} orders read", text, problems)
    twice = sum(int(n) for n in re.findall(r"re-read (\d+) that \w had been handed but not committed", text))
    if twice < reread or consumed_a + consumed_b < total + twice:
        problems.append(f"done line: A {consumed_a} + B {consumed_b} records, {twice} read twice, of {total} orders")
    if "the demo stops here" in text:
        problems.append("a step's fact was not observed")
    return problems


async def one_story(bootstrap: str, broker_kind: str) -> tuple[Ending, str]:
    topic, group = f"demo-orders-{uuid.uuid4().hex[:8]}", f"demo-billing-{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(create_topic, bootstrap, topic, PARTITIONS)
    out = io.StringIO()
    ending = await run_demo(bootstrap, PlainView(out), asyncio.Event(), broker_kind, topic=topic, group=group)
    return ending, out.getvalue()


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("broker_kind", [pytest.param(kind, marks=pytest.mark.broker(kind), id=kind)
                                         for kind in FIXTURE])
async def test_demo_story_holds_in_every_run(broker_kind: str, request: pytest.FixtureRequest) -> None:
    bootstrap = request.getfixturevalue(FIXTURE[broker_kind]).bootstrap_servers
    stories: list[tuple[Ending, str]] = []
    for _ in range(STORIES // STORIES_AT_ONCE):
        stories += await asyncio.gather(*(one_story(bootstrap, broker_kind) for _ in range(STORIES_AT_ONCE)))
    failures = []
    for run, (ending, text) in enumerate(stories, 1):
        problems = story_problems(text) + ([] if ending is Ending.COMPLETE else [f"ended {ending}"])
        if problems:
            failures.append(f"story {run}: " + "; ".join(problems) + "\n" + text)
    assert not failures, f"{len(failures)} of {len(stories)} stories broke an invariant:\n" + "\n".join(failures)
