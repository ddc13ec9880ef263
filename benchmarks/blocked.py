"""Issue 7's blocked-loop row: a member whose handler runs ``time.sleep(20)`` on the event loop.

session_timeout_ms=6000. The blocked member runs in this process; a second member in another
process records its partition count, so it sees a rebalance exactly when one happens.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks.peers import PARTITIONS, InProcess, Member, group_settings, new_topic, settle

BLOCK_SECONDS = 20.0
ROWS = (("aiokafka-lite task", "lite", "task"), ("aiokafka-lite thread", "lite", "thread"),
        ("aiokafka", "aiokafka", ""))


async def blocked_member(client: str, mode: str, bootstrap: str) -> dict[str, Any]:
    topic, group = new_topic(bootstrap, "blocked"), f"bench-{uuid.uuid4().hex[:8]}"
    settings = group_settings(heartbeat_mode=mode) if mode else group_settings()
    peer = Member(client, bootstrap, topic, group, group_settings())
    member = InProcess(client, bootstrap, topic, group, settings)
    await member.start()
    try:
        if not await settle(member, peer):
            return {"error": "the group did not settle"}
        settled = len(peer.changes)
        blocked_at = time.monotonic()
        time.sleep(BLOCK_SECONDS)  # noqa: ASYNC251 -- the point: a handler that blocks the loop
        await member.poll(0.5)
        took = peer.first_time_owning(PARTITIONS, blocked_at)
        out: dict[str, Any] = {
            "block_seconds": BLOCK_SECONDS,
            "rebalanced": len(peer.changes) > settled,
            "peer_took_partitions_after_seconds": None if took is None else took - blocked_at,
            "member_owns_after_block": member.owned(),
        }
        metrics = member.metrics()
        if metrics:
            out.update({k: metrics.get(k) for k in ("group_state", "loop_stalls", "heartbeats_sent")})
        return out
    finally:
        await member.close()
        peer.close()


async def run_all(bootstrap: str, log: Callable[[str], None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, client, mode in ROWS:
        log(f"blocked loop: {label}")
        try:
            out[label] = await blocked_member(client, mode, bootstrap)
        except Exception as exc:  # keep the other rows
            out[label] = {"error": f"{type(exc).__name__}: {exc}"}
    return out
