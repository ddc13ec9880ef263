"""The asyncio I/O shell: broker connections (TLS, SASL), cluster metadata, coordinator lookup."""

from __future__ import annotations

from .cluster import Cluster
from .connection import DEFAULT, Connection
from .exceptions import map_exceptions
from .metadata import BrokerInfo, MetadataCache, PartitionInfo, TopicInfo
from .options import ConnectionOptions

__all__ = [
    "DEFAULT",
    "BrokerInfo",
    "Cluster",
    "Connection",
    "ConnectionOptions",
    "MetadataCache",
    "PartitionInfo",
    "TopicInfo",
    "map_exceptions",
]
