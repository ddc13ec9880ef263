"""KIP-932 share groups: the ShareConsumer (queues on Kafka topics). Its handler helper,
process_share(), is aiokafka_lite.processing's."""

from __future__ import annotations

from ..fetch.share.ledger import AckType
from ..fetch.share.records import ShareRecord
from .consumer import ShareConsumer

__all__ = ["AckType", "ShareConsumer", "ShareRecord"]
