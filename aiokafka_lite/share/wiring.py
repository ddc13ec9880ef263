"""The ShareConsumer's settings and parts: which of the Consumer's settings apply to a share group
member (the rest are refused when set, as Java's KafkaShareConsumer refuses them), and the cluster,
member and fetcher built from one ConsumerConfig."""

from __future__ import annotations

from collections.abc import Callable

from .._net.cluster import Cluster
from .._net.options import ConnectionOptions
from ..config import ConsumerConfig
from ..config.settings import SETTING_DEFAULTS
from ..errors import ConfigError
from ..fetch.share.fetcher import ShareFetcher
from ..group.share.member import ShareMember, ShareMemberSettings

# Settings of the Consumer that mean nothing to a share group member: the broker owns the session
# and the assignment, and where a record starts is the group's config (share.auto.offset.reset).
NOT_FOR_SHARE = {
    "auto_offset_reset": "set the group config share.auto.offset.reset instead",
    "auto_commit_interval_ms": "acknowledgements replace offsets (share_acknowledgement_mode)",
    "group_instance_id": "share groups have no static members",
    "isolation_level": "set the group config share.isolation.level instead",
    "partition_assignment_strategy": "the broker assigns a share group's partitions",
    "group_protocol": "a share group has its own protocol",
    "group_remote_assignor": "the broker assigns a share group's partitions",
    "session_timeout_ms": "the broker's group.share.session.timeout.ms governs",
    "heartbeat_interval_ms": "the broker's group.share.heartbeat.interval.ms governs",
}


def share_config(config: ConsumerConfig) -> ConsumerConfig:
    """``config`` if it suits a ShareConsumer: a group id, and none of NOT_FOR_SHARE changed."""
    if not config.group_id:
        raise ConfigError("a ShareConsumer needs a group_id (the share group's name)")
    for name, why in NOT_FOR_SHARE.items():
        if getattr(config, name) == SETTING_DEFAULTS[name]:
            continue
        raise ConfigError(f"{name}={getattr(config, name)!r} does not apply to a ShareConsumer: {why}")
    return config


def make_cluster(config: ConsumerConfig) -> Cluster:
    patience = config.default_api_timeout
    return Cluster(ConnectionOptions.from_settings(config), config.bootstrap_servers,
                   retry_limit=None if patience is None else f"{patience:g} s (default_api_timeout_ms)")


def make_member(config: ConsumerConfig, cluster: Cluster, on_change: Callable[[], None]) -> ShareMember:
    assert config.group_id is not None  # share_config() saw to it
    settings = ShareMemberSettings(
        max_poll_interval_ms=config.max_poll_interval_ms, max_poll_records=config.max_poll_records,
        request_timeout_ms=config.request_timeout_ms, retry_backoff_ms=config.retry_backoff_ms,
        retry_backoff_max_ms=config.retry_backoff_max_ms, client_rack=config.client_rack or None)
    return ShareMember(cluster, config.group_id, settings, on_change=on_change)


def make_fetcher(config: ConsumerConfig, cluster: Cluster, member_id: str) -> ShareFetcher:
    """Always explicit underneath: the ShareConsumer keeps the acknowledgement mode per task."""
    assert config.group_id is not None
    return ShareFetcher(cluster, group_id=config.group_id, member_id=member_id, explicit=True,
                        max_wait_ms=config.fetch_max_wait_ms, min_bytes=config.fetch_min_bytes,
                        max_bytes=config.fetch_max_bytes, max_records=config.max_poll_records,
                        request_timeout=config.request_timeout, check_crcs=config.check_crcs,
                        retry_backoff=config.retry_backoff, retry_backoff_max=config.retry_backoff_max,
                        acquire_mode=config.share_acquire_mode,
                        renewal_max=config.share_lock_renewal_max_ms / 1000)
