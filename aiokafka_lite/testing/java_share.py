"""Kafka's own Java share consumer (KIP-932) as a peer in your tests: ``VerifiableShareConsumer``.

``org.apache.kafka.tools.VerifiableShareConsumer`` (Kafka 4.x) is a KafkaShareConsumer that
subscribes to one topic and prints one JSON event per line: ``startup_complete``,
``offset_reset_strategy_set`` (when it was told to set the group's share.auto.offset.reset),
``records_consumed`` (per partition, the offsets one poll() returned), ``offsets_acknowledged``
(per partition, the offsets an acknowledgement commit settled, with ``success`` and ``error``) and
``shutdown_complete``. It never calls acknowledge(): its consumer is in implicit mode, so every
record it gets is accepted (the events carry no type; ``ACK_TYPE`` says it) when it polls again
(``acknowledgement_mode="auto"``, its default), by a commitSync() after each poll that returned
records ("sync"), or by a commitAsync() ("async"). This wrapper runs it as
``java_clients.VerifiableConsumer`` runs its classic sibling (the same JVM handling, log files and
watchdog, from ``_java_tool``) and keeps what the events say::

    from aiokafka_lite.testing.java_share import VerifiableShareConsumer

    with VerifiableShareConsumer(broker.bootstrap_servers, "jobs", "workers",
                                 acknowledgement_mode="sync") as java:
        java.wait_for(lambda: java.acknowledged_count() >= 100, timeout=60, what="100 accepted")
        java.consumed[tp]        # offsets handed out, poll after poll (a redelivery appears again)
        java.acknowledged[tp]    # offsets accepted, in the order the events reported them
        java.failed_acknowledgements  # offsets_acknowledged events with success false
        java.stop()              # SIGTERM: close() sends the last acknowledgements, leaves the group

Set the group's share.auto.offset.reset yourself (``helpers.set_group_config``) or pass
``offset_reset_strategy`` (the tool then sets it with an Admin client before subscribing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing._java_tool import JavaClientError, JavaEventTool, ToolEvents, tp_of
from aiokafka_lite.testing.apache_kafka import DEFAULT_VERSION

__all__ = ["ACK_TYPE", "JavaClientError", "ShareConsumerEvents", "VerifiableShareConsumer"]

MAIN_CLASS = "org.apache.kafka.tools.VerifiableShareConsumer"
ACK_TYPE = "accept"  # the only acknowledgement the tool makes (implicitly, as its consumer polls or commits)
ACKNOWLEDGEMENT_MODES = ("auto", "sync", "async")


@dataclass
class ShareConsumerEvents(ToolEvents):
    """What the share consumer's events printed so far say. Pure bookkeeping, one event at a time."""

    consumed: dict[TopicPartition, list[int]] = field(default_factory=dict)
    acknowledged: dict[TopicPartition, list[int]] = field(default_factory=dict)
    failed_acknowledgements: list[dict[str, Any]] = field(default_factory=list)

    def apply(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        name = event["name"]
        if name == "records_consumed":
            for p in event["partitions"]:
                self.consumed.setdefault(tp_of(p), []).extend(p["offsets"])
        elif name == "offsets_acknowledged":
            if event.get("success", False):
                for p in event["partitions"]:
                    self.acknowledged.setdefault(tp_of(p), []).extend(p["offsets"])
            else:
                self.failed_acknowledgements.append(event)


class VerifiableShareConsumer(JavaEventTool[ShareConsumerEvents]):
    """Kafka's Java ``VerifiableShareConsumer`` in a child process; see the module docstring."""

    MAIN_CLASS = MAIN_CLASS

    def __init__(self, bootstrap_servers: str, topic: str, group_id: str, *, acknowledgement_mode: str = "auto",
                 offset_reset_strategy: str | None = None, max_messages: int | None = None,
                 properties: Mapping[str, str] | None = None, kafka_version: str = DEFAULT_VERSION) -> None:
        """``properties``: KafkaShareConsumer settings (e.g. ``{"max.poll.records": "100"}``)."""
        if acknowledgement_mode not in ACKNOWLEDGEMENT_MODES:
            raise ValueError(f"acknowledgement_mode must be one of {ACKNOWLEDGEMENT_MODES}, "
                             f"not {acknowledgement_mode!r}")
        if offset_reset_strategy not in (None, "earliest", "latest"):
            raise ValueError(f"offset_reset_strategy must be 'earliest' or 'latest', not {offset_reset_strategy!r}")
        major = int(kafka_version.split(".")[0])
        if major < 4:
            raise ValueError(f"share groups need Kafka 4.0 or later (kafka_version={kafka_version!r})")
        options = ["--acknowledgement-mode", acknowledgement_mode]
        if offset_reset_strategy is not None:
            options += ["--offset-reset-strategy", offset_reset_strategy]
        if max_messages is not None:
            options += ["--max-messages", str(max_messages)]
        super().__init__(ShareConsumerEvents(), bootstrap_servers, topic, group_id, options, properties,
                         kafka_version)
        self.acknowledgement_mode = acknowledgement_mode

    # -- what the events say (copies, safe to keep) --------------------------------------------

    @property
    def consumed(self) -> dict[TopicPartition, list[int]]:
        with self._changed:
            return {tp: list(offsets) for tp, offsets in self._state.consumed.items()}

    @property
    def acknowledged(self) -> dict[TopicPartition, list[int]]:
        """Per partition, the offsets accepted (``ACK_TYPE``) by successful acknowledgements."""
        with self._changed:
            return {tp: list(offsets) for tp, offsets in self._state.acknowledged.items()}

    @property
    def failed_acknowledgements(self) -> list[dict[str, Any]]:
        with self._changed:
            return list(self._state.failed_acknowledgements)

    def consumed_count(self, tp: TopicPartition | None = None) -> int:
        """Records handed out from ``tp``, or from every partition (a redelivery counts again)."""
        with self._changed:
            return _count(self._state.consumed, tp)

    def acknowledged_count(self, tp: TopicPartition | None = None) -> int:
        """Records accepted in ``tp``, or in every partition."""
        with self._changed:
            return _count(self._state.acknowledged, tp)

    def accepted(self) -> Counter[tuple[int, int]]:
        """How many times each (partition, offset) was accepted; more than once would be a bug."""
        with self._changed:
            return Counter((tp.partition, offset) for tp, offsets in self._state.acknowledged.items()
                           for offset in offsets)


def _count(by_tp: Mapping[TopicPartition, list[int]], tp: TopicPartition | None) -> int:
    return len(by_tp.get(tp, [])) if tp is not None else sum(len(offsets) for offsets in by_tp.values())
