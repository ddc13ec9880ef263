"""Build the consumer's parts from its one settings object."""

from __future__ import annotations

import threading

from .._net.cluster import Cluster
from .._net.options import ConnectionOptions
from ..config import ConsumerConfig
from ..fetch.fetcher import Fetcher
from ..fetch.offset_lookup import OffsetLookup
from ..group.classic.member import ClassicMember
from ..group.consumer_protocol.member import Kip848Member
from ..group.member import GroupMember, MemberHost
from ..liveness.timers import LivenessTimers
from ..subscription import SubscriptionState

ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}


def make_cluster(config: ConsumerConfig) -> Cluster:
    patience = config.default_api_timeout
    return Cluster(ConnectionOptions.from_settings(config), config.bootstrap_servers,
                   retry_limit=None if patience is None else f"{patience:g} s (default_api_timeout_ms)")


def make_fetcher(config: ConsumerConfig, cluster: Cluster, subscription: SubscriptionState) -> Fetcher:
    return Fetcher(
        cluster, subscription,
        fetch_min_bytes=config.fetch_min_bytes,
        fetch_max_wait_ms=config.fetch_max_wait_ms,
        fetch_max_bytes=config.fetch_max_bytes,
        max_partition_fetch_bytes=config.max_partition_fetch_bytes,
        fetch_connections_per_broker=config.fetch_connections_per_broker,
        isolation_level=ISOLATION_LEVELS[config.isolation_level],
        check_crcs=config.check_crcs,
        request_timeout=config.request_timeout,
        key_deserializer=config.key_deserializer,
        value_deserializer=config.value_deserializer,
        client_rack=config.client_rack or None,
        retry_backoff=config.retry_backoff,
        retry_backoff_max=config.retry_backoff_max,
    )


def make_offset_lookup(config: ConsumerConfig, cluster: Cluster) -> OffsetLookup:
    return OffsetLookup(cluster, isolation_level=ISOLATION_LEVELS[config.isolation_level],
                        retry_backoff=config.retry_backoff, request_timeout=config.request_timeout,
                        retry_backoff_max=config.retry_backoff_max)


def make_member(cluster: Cluster, config: ConsumerConfig, host: MemberHost, timers: LivenessTimers,
                timers_lock: threading.Lock) -> GroupMember:
    """The group member for the configured group protocol (group.protocol)."""
    if config.group_protocol == "consumer":
        return Kip848Member(cluster, config, host, timers, timers_lock)
    return ClassicMember(cluster, config, host, timers, timers_lock)
