"""Prometheus metrics for consumers (``pip install '.[prometheus]'`` in the aiokafka-lite clone).

    from aiokafka_lite.prometheus import register
    register(consumer)          # into prometheus_client's default REGISTRY; a ShareConsumer alike

A ``ConsumerCollector`` reads each of its consumers' ``metrics()`` when scraped and turns the
snapshots into metric families (``families.py``): nothing is counted twice and nothing runs
between scrapes. Consumers are told apart by their ``client_id`` and ``group_id`` labels; one
collector covers any number of them. A consumer leaves its collector when it closes (at the next
scrape), when it is garbage-collected, or by ``unregister()`` / ``ConsumerCollector.remove()``. A
started consumer dropped without close() is neither: its tasks (fetching, heartbeats, telemetry) hold
it and go on running, so it stays exposed (it still consumes, still a member of its group) until its
event loop ends and it is collected. Registering is safe from any thread, a scrape running or not.
Scrape from the consumers' event loop thread (an ASGI route, as examples/fastapi_worker does):
``metrics()`` reads state the loop changes. See docs/prometheus.md.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import Any, Protocol

try:
    import prometheus_client  # noqa: F401
except ImportError as exc:  # said once, with the way out, instead of a bare "No module named"
    raise ImportError(f"aiokafka_lite.prometheus needs prometheus_client ({exc}): "
                      "pip install '.[prometheus]' in the aiokafka-lite clone") from exc

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import REGISTRY, Collector, CollectorRegistry

from ..errors import InvalidArgumentError
from .families import (
    FAMILIES,
    TEXT_CONTENT_TYPE,
    LabelCache,
    Rows,
    consumer_labels,
    metric_families,
    samples_of,
    text,
)

__all__ = ["FAMILIES", "TEXT_CONTENT_TYPE", "ConsumerCollector", "HasMetrics", "register", "unregister"]


class HasMetrics(Protocol):
    """What a collector needs of a consumer (a ``Consumer`` or a ``ShareConsumer`` is one)."""

    def metrics(self) -> dict[str, Any]: ...


class ConsumerCollector(Collector):
    """A prometheus_client collector of consumers' ``metrics()``, built at scrape time.

    ``registry``: where to register the collector (None: nowhere; use ``text()`` or register it
    yourself)."""

    def __init__(self, consumers: Iterable[HasMetrics] = (), registry: CollectorRegistry | None = None) -> None:
        # Each covered consumer with its (client_id, group_id), read once when added: they are fixed
        # for a consumer's life, and add() compares them under the lock without calling metrics().
        self._consumers: list[tuple[weakref.ref[HasMetrics], tuple[str, str]]] = []
        # Taken by whatever changes _consumers, never while calling a consumer's metrics(): a scrape
        # may run on prometheus_client's own thread while add() runs on the event loop's.
        self._lock = threading.Lock()
        self._labels = LabelCache()
        for consumer in consumers:
            self.add(consumer)
        if registry is not None:
            registry.register(self)

    def add(self, consumer: HasMetrics) -> None:
        """Cover `consumer` from the next scrape on; its client_id and group_id must tell it apart
        from the consumers already covered (InvalidArgumentError otherwise: Prometheus would
        refuse the scrape)."""
        labels = consumer_labels(consumer.metrics())
        self._snapshots()  # forgets the closed consumers first: their labels are free again
        # Checked and appended under one lock: two add()s of look-alikes at once (two threads) cannot
        # both pass, whatever the scrapes and metrics() calls between them.
        with self._lock:
            for ref, other_labels in self._consumers:
                other = ref()
                if other is consumer:
                    return
                if other is not None and other_labels == labels:
                    raise InvalidArgumentError(
                        f"another consumer with client_id={labels[0]!r} and group_id={labels[1]!r} is already "
                        "registered: give each consumer its own client_id")
            self._consumers.append((weakref.ref(consumer), labels))

    def remove(self, consumer: HasMetrics) -> None:
        """Stop covering `consumer` (no error if it was not covered)."""
        with self._lock:
            self._consumers = [entry for entry in self._consumers if entry[0]() not in (None, consumer)]

    def __len__(self) -> int:
        return sum(1 for ref, _ in self._consumers if ref() is not None)

    def collect(self) -> list[Metric]:
        return metric_families(self._samples())

    def describe(self) -> list[Metric]:
        """The families without samples: registering takes their names without a scrape."""
        return metric_families(())

    def text(self) -> bytes:
        """The same samples as collect(), in the text exposition format (TEXT_CONTENT_TYPE),
        written directly: several times faster than prometheus_client's generate_latest() at
        many partitions (docs/prometheus.md has the figures)."""
        return text(self._samples(), self._labels)

    def _samples(self) -> list[tuple[tuple[str, str], Rows]]:
        self._labels.trim()
        return [(consumer_labels(snapshot), samples_of(snapshot, self._labels)) for _, snapshot in self._snapshots()]

    def _snapshots(self) -> list[tuple[HasMetrics, dict[str, Any]]]:
        """Each live, open consumer's metrics(); closed and collected ones are forgotten here. Only
        those: a consumer added while the metrics() calls ran stays (and is read at the next scrape)."""
        with self._lock:
            refs = [ref for ref, _ in self._consumers]
        gone: set[int] = set()  # ids of refs in `refs`, which holds them until the end
        out: list[tuple[HasMetrics, dict[str, Any]]] = []
        for ref in refs:
            consumer = ref()
            if consumer is not None:
                snapshot = consumer.metrics()
                if not snapshot.get("closed"):
                    out.append((consumer, snapshot))
                    continue
            gone.add(id(ref))
        if gone:
            with self._lock:
                self._consumers = [entry for entry in self._consumers if id(entry[0]) not in gone]
        return out


_collectors: weakref.WeakKeyDictionary[CollectorRegistry, ConsumerCollector] = weakref.WeakKeyDictionary()
# Held while register() makes a registry's collector: two threads' first register() into one registry
# would otherwise make two (the second refused by the registry as duplicated timeseries).
_collectors_lock = threading.Lock()


def register(consumer: HasMetrics, registry: CollectorRegistry = REGISTRY) -> ConsumerCollector:
    """Expose `consumer` in `registry`, through the one ConsumerCollector this module keeps for
    that registry (made and registered on first use); returns it."""
    with _collectors_lock:
        collector = _collectors.get(registry)
        if collector is None:
            collector = _collectors[registry] = ConsumerCollector(registry=registry)
    collector.add(consumer)
    return collector


def unregister(consumer: HasMetrics, registry: CollectorRegistry = REGISTRY) -> None:
    """Stop exposing `consumer` in `registry` (closing it does the same at the next scrape)."""
    collector = _collectors.get(registry)
    if collector is not None:
        collector.remove(consumer)
