"""Which broker software answers: one function that recognises Tansu from its own answers.

Kafka's protocol does not name the broker software, so Tansu is recognised by two answers that,
together, no Apache Kafka gives:

- Metadata: every broker has node id 111. Tansu 0.6 hard-codes it (``NODE_ID`` in tansu-broker);
  Apache Kafka takes ``node.id`` from its configuration.
- ApiVersions v3+: no supported or finalized features. An Apache Kafka broker in KRaft mode (every
  4.x, and 3.x without ZooKeeper) always finalizes ``metadata.version``.

A false positive needs a ZooKeeper-mode Kafka whose only broker id is 111; a later Tansu that
announces features, or other node ids, is simply not recognised (no note rather than a wrong one).
The storage engine is not visible: the ListOffsets deviation was seen with memory storage (our
fixture's), Tansu's SQL engines answer "latest" with other code, so callers say "may be wrong".
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from ..config import ConsumerConfig
from ..protocol.messages import API_VERSIONS
from .cluster import Cluster
from .negotiation import api_versions_body
from .options import ConnectionOptions

TANSU_NODE_ID = 111
FEATURES_MIN_VERSION = 3  # ApiVersions carries features from v3 on


def looks_like_tansu(node_ids: Collection[int], api_versions: Mapping[str, Any]) -> bool:
    """True when a Metadata broker list and an ApiVersions v3+ answer are Tansu's."""
    return (set(node_ids) == {TANSU_NODE_ID}
            and not api_versions.get("supported_features")
            and not api_versions.get("finalized_features")
            and api_versions.get("finalized_features_epoch", -1) < 0)


async def is_tansu(cluster: Cluster) -> bool:
    """Whether the bootstrapped ``cluster`` is Tansu; asks ApiVersions again only when the node ids fit."""
    node_ids = set(cluster.metadata.brokers)
    if node_ids != {TANSU_NODE_ID}:
        return False
    conn = await cluster.connection(TANSU_NODE_ID)
    if conn.broker_versions.get(API_VERSIONS.key, (0, 0))[1] < FEATURES_MIN_VERSION:
        return False
    answer = await cluster.send(TANSU_NODE_ID, API_VERSIONS, api_versions_body(cluster.options))
    return looks_like_tansu(node_ids, answer)


async def config_is_tansu(config: ConsumerConfig) -> bool:
    """``is_tansu`` on a short-lived cluster connection built from consumer settings."""
    cluster = Cluster(ConnectionOptions.from_settings(config), config.bootstrap_servers)
    try:
        await cluster.bootstrap()
        return await is_tansu(cluster)
    finally:
        await cluster.close()
