"""The broker the benchmark starts for itself: Apache Kafka 4.3.1 (default) or Tansu."""

from __future__ import annotations

from typing import Any

from aiokafka_lite.testing import ApacheKafkaBroker, TansuBroker

KAFKA_VERSION = "4.3.1"


def start_broker(kind: str) -> Any:
    """A started broker (a context manager: ``stop()`` on exit) with ``bootstrap_servers``."""
    if kind == "kafka":
        return ApacheKafkaBroker(KAFKA_VERSION).start()
    if kind == "tansu":
        return TansuBroker().start()
    raise ValueError(f"unknown broker {kind!r}: expected 'kafka' or 'tansu'")


def describe(kind: str) -> str:
    return f"Apache Kafka {KAFKA_VERSION} (KRaft, one node)" if kind == "kafka" else "Tansu (embedded)"
