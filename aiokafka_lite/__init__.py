"""aiokafka-lite: an asyncio-native Apache Kafka consumer."""

from __future__ import annotations

from ._interrupted_import import exit_quietly_if_interrupted

with exit_quietly_if_interrupted():  # Ctrl-C while `aiokafka-lite` starts: exit 130, no traceback
    from . import errors
    from .consumer.consumer import Consumer
    from .consumer.listener import ConsumerRebalanceListener
    from .share.consumer import ShareConsumer
    from .structs import (
        ConsumerRecord,
        ConsumerRecords,
        GroupMembershipOperation,
        OAuthBearerToken,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        TopicPartition,
    )

__version__ = "0.1.0.dev0"
__all__ = [
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerRecords",
    "GroupMembershipOperation",
    "OAuthBearerToken",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "ShareConsumer",
    "TopicPartition",
    "__version__",
    "errors",
]
