"""KIP-714's client side as a table: after each answer (or failure), what to send next and when.

No I/O and no clocks: ``consumer/telemetry.py`` ``MetricsPush`` sends what ``next`` says after the
delay each ``on_*`` method returns (seconds), and asks ``push_wanted`` before its terminating push.

    answer                                  next         after
    subscriptions, metrics requested        PUSH         the interval, jittered (first push)
    subscriptions, no metrics requested     SUBSCRIBE    the interval
    push accepted                           PUSH         the interval
    UNKNOWN_SUBSCRIPTION_ID,
    UNSUPPORTED_COMPRESSION_TYPE            SUBSCRIBE    at once
    TELEMETRY_TOO_LARGE,
    THROTTLING_QUOTA_EXCEEDED, retriable    (same)       the interval
    INVALID_RECORD, INVALID_REQUEST,
    any other error                         STOPPED      never
    no answer (connection, timeout)         SUBSCRIBE    the interval
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import BROKER_ERRORS

ZERO_UUID = uuid.UUID(int=0)

# Java's default push interval, used until a broker names one.
DEFAULT_INTERVAL = 300.0

UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_REQUEST = 42
INVALID_RECORD = 87
THROTTLING_QUOTA_EXCEEDED = 89
UNKNOWN_SUBSCRIPTION_ID = 117
TELEMETRY_TOO_LARGE = 118

_RESUBSCRIBE = frozenset({UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE})
_NEXT_INTERVAL = frozenset({TELEMETRY_TOO_LARGE, THROTTLING_QUOTA_EXCEEDED})


class Next(enum.Enum):
    SUBSCRIBE = "subscribe"  # GetTelemetrySubscriptions
    PUSH = "push"  # PushTelemetry
    STOPPED = "stopped"  # nothing more is sent


@dataclass(frozen=True)
class Subscription:
    """What one GetTelemetrySubscriptions answer asked for."""

    subscription_id: int
    accepted_compression_types: tuple[int, ...]
    interval: float  # seconds
    max_bytes: int
    delta_temporality: bool
    prefixes: tuple[str, ...]  # metric name prefixes; empty: none wanted, "" matches every name

    def wants(self, name: str) -> bool:
        return any(name.startswith(prefix) for prefix in self.prefixes)


class TelemetryState:
    """One client instance's subscription and the next step. ``jitter()`` returns a number in
    [0, 1): the first push comes after 0.5 to 1.5 intervals (KIP-714), so clients started together
    do not push together."""

    def __init__(self, jitter: Callable[[], float]) -> None:
        self.instance_id = ZERO_UUID  # the broker assigns one on the first answer
        self.subscription: Subscription | None = None
        self.next = Next.SUBSCRIBE
        self.stopped_because: str | None = None
        self._jitter = jitter

    @property
    def interval(self) -> float:
        return DEFAULT_INTERVAL if self.subscription is None else self.subscription.interval

    @property
    def push_wanted(self) -> bool:
        """A terminating push is due on close: subscribed to metrics, and not stopped."""
        return self.next is Next.PUSH and self.subscription is not None

    def on_subscriptions(self, body: Mapping[str, Any]) -> float:
        code = int(body["error_code"])
        throttle = int(body.get("throttle_time_ms") or 0) / 1000
        if code != 0:
            return max(self._on_error(code, "GetTelemetrySubscriptions"), throttle)
        if body["client_instance_id"] != ZERO_UUID:
            self.instance_id = body["client_instance_id"]
        interval = int(body["push_interval_ms"])
        self.subscription = Subscription(
            subscription_id=int(body["subscription_id"]),
            accepted_compression_types=tuple(int(c) for c in body["accepted_compression_types"]),
            interval=(interval if interval > 0 else DEFAULT_INTERVAL * 1000) / 1000,
            max_bytes=int(body["telemetry_max_bytes"]),
            delta_temporality=bool(body["delta_temporality"]),
            prefixes=tuple(body["requested_metrics"]),
        )
        if not self.subscription.prefixes:
            self.next = Next.SUBSCRIBE  # nothing wanted now: ask again after the interval
            return max(self.interval, throttle)
        self.next = Next.PUSH
        return max(self.interval * (0.5 + self._jitter()), throttle)

    def on_push(self, body: Mapping[str, Any]) -> float:
        code = int(body["error_code"])
        throttle = int(body.get("throttle_time_ms") or 0) / 1000
        if code == 0:
            return max(self.interval, throttle)
        return max(self._on_error(code, "PushTelemetry"), throttle)

    def on_failure(self) -> float:
        """No answer (the connection failed, the request timed out): start over after the interval."""
        if self.next is not Next.STOPPED:
            self.next = Next.SUBSCRIBE
        return self.interval

    def stop(self, why: str) -> None:
        self.next = Next.STOPPED
        self.stopped_because = why

    def _on_error(self, code: int, api: str) -> float:
        name = BROKER_ERRORS[code].name if code in BROKER_ERRORS else f"error {code}"
        if code in _RESUBSCRIBE:
            self.next = Next.SUBSCRIBE
            return 0.0
        if code in _NEXT_INTERVAL or (code in BROKER_ERRORS and BROKER_ERRORS[code].retriable):
            return self.interval
        self.stop(f"{api} answered {name}")
        return 0.0
