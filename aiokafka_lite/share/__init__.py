"""KIP-932 share groups: the ShareConsumer (queues on Kafka topics) and its handler helper."""

from __future__ import annotations

from ..fetch.share_acks import AckType
from ..fetch.share_records import ShareRecord
from .consumer import ShareConsumer
from .processing import ShareProcessor, ShareProcessResult, process_share

__all__ = ["AckType", "ShareConsumer", "ShareProcessResult", "ShareProcessor", "ShareRecord", "process_share"]
