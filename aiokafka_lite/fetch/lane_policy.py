"""How many fetch connections ("lanes") each broker gets: ``fetch_connections_per_broker``.

An int N is exactly N lanes per broker. ``"auto"`` (the default) starts every broker at one lane and
opens a second one while that broker's fetch responses show the consumer is throughput-bound: after
``OPEN_AFTER_BUSY`` busy responses in a row (see ``busy_response``), until ``CLOSE_AFTER_CALM``
responses in a row were not busy and ``CLOSE_AFTER_SECONDS`` have passed since the last busy one;
both conditions, so that neither a burst of quick small answers nor one slow long poll flaps it.

Pure: no asyncio and no clock of its own; the fetcher passes each answered fetch's figures and the
time, the planner asks ``lanes()``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

AUTO = "auto"
AUTO_MAX_LANES = 2  # what "auto" opens at most: the measured gain is from the second lane (issue 24)
OPEN_AFTER_BUSY = 3  # one busy answer may be the backlog a consumer starts with; three are a stream
CLOSE_AFTER_CALM = 20  # at the default 500 ms long poll, 20 idle answers over two lanes are 5 s
CLOSE_AFTER_SECONDS = 3.0  # ... and quick small answers (a trickle) must span this much time too
# A response carrying at least this many record bytes is busy even when the partitions asked could
# have carried far more (many partitions, fetch_max_bytes large): it came back at once with a
# megabyte, so that broker holds more than one round trip's worth for us. Below it, half of what the
# request could carry (``busy_response``).
BUSY_BYTES = 1 << 20


def busy_response(*, seconds: float, max_wait: float, record_bytes: int, partitions: int,
                  partition_max_bytes: int, max_bytes: int) -> bool:
    """Whether one fetch's answer shows the consumer throughput-bound on that broker.

    It must have come back before the long poll (``max_wait`` seconds, fetch_max_wait_ms) ran out,
    ``seconds`` after it was sent: an answer that waited it out says the broker had too little
    (less than fetch_min_bytes) to send, which a consumer set to batch by fetch_min_bytes meets even
    when the answer is large. And it must carry at least half of what the request could carry
    (min(fetch_max_bytes, max_partition_fetch_bytes per partition asked)), or ``BUSY_BYTES``: a
    broker stops a response at batch boundaries and partitions' backlogs differ, so a request that
    could take more came back about full when the broker had more waiting; half leaves room for both
    without counting a consumer that keeps up (whose answers hold what arrived in one round trip).
    """
    if 0 < max_wait <= seconds:  # (fetch_max_wait_ms 0: the broker never holds an answer)
        return False
    capacity = min(max_bytes, partition_max_bytes * partitions)
    return record_bytes > 0 and record_bytes >= min(capacity / 2, BUSY_BYTES)


@dataclass(slots=True)
class _Broker:
    lanes: int = 1
    busy_in_a_row: int = 0
    calm_in_a_row: int = 0
    last_busy: float = -math.inf


class LanePolicy:
    """Lanes per broker for a ``fetch_connections_per_broker`` setting: an int, or ``"auto"``."""

    def __init__(self, setting: int | str = AUTO, *, max_lanes: int = AUTO_MAX_LANES,
                 open_after: int = OPEN_AFTER_BUSY, close_after: int = CLOSE_AFTER_CALM,
                 close_after_seconds: float = CLOSE_AFTER_SECONDS) -> None:
        if setting != AUTO and not (isinstance(setting, int) and setting >= 1):
            raise ValueError(f"lanes: an int >= 1 or {AUTO!r}, not {setting!r}")
        self._fixed = setting if isinstance(setting, int) else None
        self._max_lanes = max_lanes
        self._open_after = open_after
        self._close_after = close_after
        self._close_after_seconds = close_after_seconds
        self._brokers: dict[int, _Broker] = {}

    @property
    def adaptive(self) -> bool:
        return self._fixed is None

    def lanes(self, node_id: int) -> int:
        """How many lanes ``node_id``'s partitions are spread over now."""
        if self._fixed is not None:
            return self._fixed
        broker = self._brokers.get(node_id)
        return 1 if broker is None else broker.lanes

    def widest(self) -> int:
        """The most lanes any broker has now (1: no spreading needed anywhere)."""
        if self._fixed is not None:
            return self._fixed
        return max((b.lanes for b in self._brokers.values()), default=1)

    def observe(self, node_id: int, busy: bool, now: float) -> bool:
        """One answered fetch from ``node_id`` (on any of its lanes) was ``busy`` at time ``now``;
        True when that changed the broker's lanes."""
        if self._fixed is not None:
            return False
        broker = self._brokers.setdefault(node_id, _Broker())
        if busy:
            broker.busy_in_a_row += 1
            broker.calm_in_a_row = 0
            broker.last_busy = now
            if broker.lanes < self._max_lanes and broker.busy_in_a_row >= self._open_after:
                broker.lanes += 1
                broker.busy_in_a_row = 0  # a third lane (max_lanes > 2) takes another streak
                return True
            return False
        broker.busy_in_a_row = 0
        broker.calm_in_a_row += 1
        if (broker.lanes > 1 and broker.calm_in_a_row >= self._close_after
                and now - broker.last_busy >= self._close_after_seconds):
            broker.lanes = 1
            broker.calm_in_a_row = 0
            return True
        return False

    def forget(self, node_id: int) -> None:
        """``node_id`` left the cluster or failed: it starts again at one lane."""
        self._brokers.pop(node_id, None)
