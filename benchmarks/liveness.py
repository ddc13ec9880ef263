"""Liveness figures: how fast partitions move to a peer, and how steady heartbeats are under load.

Every scenario uses session_timeout_ms=6000 and heartbeat_interval_ms=1000 (``peers``); times are
CLOCK_MONOTONIC, comparable across this process and the member subprocesses.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks.peers import PARTITIONS, InProcess, Member, group_settings, new_topic, settle

LAPSE_MS = 5000
HANDOVER_TIMEOUT = 40.0


def _group() -> str:
    return f"bench-{uuid.uuid4().hex[:8]}"


async def after_close(client: str, bootstrap: str) -> dict[str, Any]:
    """Seconds from close() being called to the peer owning every partition."""
    topic, group = new_topic(bootstrap, "live-close"), _group()
    peer = Member(client, bootstrap, topic, group, group_settings())
    member = InProcess(client, bootstrap, topic, group, group_settings())
    await member.start()
    closed = False
    try:
        if not await settle(member, peer):
            return {"error": "the group did not settle"}
        began = time.monotonic()
        await member.close()
        closed = True
        close_seconds = time.monotonic() - began
        handed = await peer.wait_owning(PARTITIONS, began, HANDOVER_TIMEOUT)
        return {"close_seconds": close_seconds, "handover_seconds": None if handed is None else handed - began}
    finally:
        if not closed:
            await member.close()
        peer.close()


async def after_lapse(client: str, bootstrap: str) -> dict[str, Any]:
    """A member stops polling (its loop stays free): seconds from its poll deadline to the peer owning all."""
    topic, group = new_topic(bootstrap, "live-lapse"), _group()
    peer = Member(client, bootstrap, topic, group, group_settings())
    member = InProcess(client, bootstrap, topic, group, group_settings(max_poll_interval_ms=LAPSE_MS))
    await member.start()
    try:
        if not await settle(member, peer):
            return {"error": "the group did not settle"}
        last_poll = time.monotonic()
        await member.poll(0.0)
        deadline = last_poll + LAPSE_MS / 1000
        handed = await peer.wait_owning(PARTITIONS, last_poll, HANDOVER_TIMEOUT)
        out: dict[str, Any] = {"max_poll_interval_ms": LAPSE_MS,
                               "handover_seconds": None if handed is None else handed - deadline}
        if client == "lite":
            out["leave_delay_seconds"] = member.metrics().get("last_leave_delay_seconds")
        return out
    finally:
        await member.close()
        peer.close()


async def after_sigkill(client: str, bootstrap: str) -> dict[str, Any]:
    """The member's process is SIGKILLed: seconds until the peer owns every partition (session expiry)."""
    topic, group = new_topic(bootstrap, "live-kill"), _group()
    victim = Member(client, bootstrap, topic, group, group_settings())
    peer = Member(client, bootstrap, topic, group, group_settings())
    try:
        deadline = time.monotonic() + 60
        # The members are other processes, seen through their output: polling is all there is.
        while time.monotonic() < deadline:
            if victim.owned == peer.owned == PARTITIONS // 2:
                break
            await asyncio.sleep(0.05)
        if victim.owned != PARTITIONS // 2:
            return {"error": "the group did not settle"}
        began = time.monotonic()
        victim.kill()
        handed = await peer.wait_owning(PARTITIONS, began, HANDOVER_TIMEOUT)
        return {"session_timeout_ms": 6000, "handover_seconds": None if handed is None else handed - began}
    finally:
        victim.close()
        peer.close()


def _patch_heartbeats(client: str, mode: str, stamps: list[float]) -> Callable[[], None]:
    """Timestamp every heartbeat as it is sent; returns the undo function (benchmark-only patching)."""
    if client == "aiokafka":
        from aiokafka.consumer.group_coordinator import GroupCoordinator as Target
        name = "_do_heartbeat"
    elif mode == "thread":
        from aiokafka_lite.group.classic.heartbeat_thread import HeartbeatThread as Target
        name = "_heartbeat"
    else:
        from aiokafka_lite.group.classic.coordinator import GroupCoordinator as Target
        name = "heartbeat"
    original = getattr(Target, name)

    def stamped(*args: Any, **kwargs: Any) -> Any:
        stamps.append(time.monotonic())
        return original(*args, **kwargs)

    setattr(Target, name, stamped)
    return lambda: setattr(Target, name, original)


async def _busy_worker(stop: asyncio.Event, slice_seconds: float) -> None:
    """Other async work on the same loop: CPU in short slices, yielding between them."""
    while not stop.is_set():
        end = time.perf_counter() + slice_seconds
        while time.perf_counter() < end:
            pass
        await asyncio.sleep(0)


async def heartbeat_jitter(client: str, bootstrap: str, seconds: float, mode: str = "task",
                           workers: int = 20, slice_seconds: float = 0.002) -> dict[str, Any]:
    """Heartbeat spacing while ``workers`` tasks keep the loop busy in ``slice_seconds`` CPU slices."""
    interval = 0.5
    topic = new_topic(bootstrap, "live-jitter")
    settings = group_settings(heartbeat_interval_ms=int(interval * 1000))
    if client == "lite":
        settings["heartbeat_mode"] = mode
    stamps: list[float] = []
    undo = _patch_heartbeats(client, mode, stamps)
    member = InProcess(client, bootstrap, topic, _group(), settings)
    stop = asyncio.Event()
    try:
        await member.start()
        while member.owned() != PARTITIONS:
            await member.poll(0.1)
        busy = [asyncio.create_task(_busy_worker(stop, slice_seconds)) for _ in range(workers)]
        stamps.clear()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await member.poll(0.1)
        stop.set()
        await asyncio.gather(*busy)
    finally:
        undo()
        await member.close()
    gaps = sorted(b - a for a, b in itertools.pairwise(stamps))
    if len(gaps) < 2:
        return {"error": f"only {len(stamps)} heartbeats in {seconds} s"}
    late = [g - interval for g in gaps]
    load = f"{workers} tasks x {slice_seconds * 1000:.0f} ms CPU slices"
    return {"interval_ms": interval * 1000, "heartbeats": len(stamps), "load": load,
            "gap_p50_ms": statistics.median(gaps) * 1000, "gap_p99_ms": gaps[int(0.99 * (len(gaps) - 1))] * 1000,
            "gap_max_ms": gaps[-1] * 1000, "late_max_ms": max(late) * 1000,
            "jitter_stdev_ms": statistics.pstdev(gaps) * 1000}


async def run_all(bootstrap: str, quick: bool, log: Callable[[str], None]) -> dict[str, Any]:
    jitter_seconds = 5.0 if quick else 15.0
    scenarios: list[tuple[str, str, Callable[[], Any]]] = [
        ("after_close", "lite", lambda: after_close("lite", bootstrap)),
        ("after_close", "aiokafka", lambda: after_close("aiokafka", bootstrap)),
        ("after_lapse", "lite", lambda: after_lapse("lite", bootstrap)),
        ("after_lapse", "aiokafka", lambda: after_lapse("aiokafka", bootstrap)),
        ("after_sigkill", "lite", lambda: after_sigkill("lite", bootstrap)),
        ("after_sigkill", "aiokafka", lambda: after_sigkill("aiokafka", bootstrap)),
        ("heartbeat_jitter", "lite", lambda: heartbeat_jitter("lite", bootstrap, jitter_seconds)),
        ("heartbeat_jitter", "lite-thread", lambda: heartbeat_jitter("lite", bootstrap, jitter_seconds, "thread")),
        ("heartbeat_jitter", "aiokafka", lambda: heartbeat_jitter("aiokafka", bootstrap, jitter_seconds)),
    ]
    out: dict[str, Any] = {}
    for name, client, scenario in scenarios:
        log(f"liveness: {name} ({client})")
        try:
            out.setdefault(name, {})[client] = await scenario()
        except Exception as exc:  # one failed scenario must not lose the others' figures
            out.setdefault(name, {})[client] = {"error": f"{type(exc).__name__}: {exc}"}
    return out
