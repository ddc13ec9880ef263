"""aiokafka-lite's ShareConsumer (KIP-932): one task polling a share group until every record came.

``spec.options``: ``group`` (a fresh share group whose ``share.auto.offset.reset`` the parent set to
earliest), ``mode`` (``"implicit"``: the records a poll returned are accepted by the next poll;
``"explicit"``: ``acknowledge(record, "accept")`` for each record before the next poll) and
optionally ``max_poll_records`` (our default, 500, as Java's, when absent).

The stopwatch stops at the last record, as ShareConsumerPerformance's window ends at its last
record; the final ``commit()`` that sends the last acknowledgements is timed apart
(``commit_seconds``), as the tool's ``commitSync()`` comes after its window too.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka_lite import ShareConsumer
from benchmarks.clients._harness import Result, Spec, Stopwatch, run
from benchmarks.clients.lite import extra as lite_extra

SILENCE = 60.0  # seconds without a record before giving up (the harness then says how many came)
_after: dict[str, Any] = {}  # what the run learnt after the stopwatch stopped, for extra()


async def share_loop(spec: Spec, watch: Stopwatch) -> Result:
    options = dict(spec.options)
    group, mode = options.pop("group"), options.pop("mode")
    explicit = mode == "explicit"
    share = ShareConsumer(*spec.topics, bootstrap_servers=spec.bootstrap, group_id=group,
                          share_acknowledgement_mode=mode, **options)
    count = payload = 0
    try:
        await share.start(timeout=60)
        last = time.monotonic()
        while count < spec.records and time.monotonic() - last < SILENCE:
            records = await share.poll(timeout=1.0)
            if not records:
                continue
            last = time.monotonic()
            watch.first(len(records))
            for record in records:
                payload += len(record.value)
                if explicit:
                    share.acknowledge(record, "accept")
            count += len(records)
        watch.stop()
        figures = share.metrics()  # polls; per broker, the share session's next epoch (about its requests)
        _after.update(polls=figures["polls"], share_sessions=figures.get("share_sessions"))
        began = time.perf_counter()
        results = await share.commit(timeout=60)
        _after["commit_seconds"] = time.perf_counter() - began
        if failed := {str(tp): repr(error) for tp, error in results.items() if error is not None}:
            raise SystemExit(f"the final commit failed: {failed}")
    finally:
        await share.close(timeout=30)
    return count, payload


def consume(spec: Spec, watch: Stopwatch) -> Result:
    return asyncio.run(share_loop(spec, watch))


def extra(spec: Spec) -> dict[str, Any]:
    return {**lite_extra(spec), **_after, "mode": spec.options.get("mode")}


if __name__ == "__main__":
    run(consume, extra)
