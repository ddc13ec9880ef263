"""What the ``groups list | lag | reset-offsets`` commands share: a connection to the cluster as an
admin (no group membership, no topic auto-creation), one deadline per command, the partitions a
``--topic`` names, and the run wrapper that turns any failure into one line on stderr."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from .._net.cluster import Cluster
from .._net.options import ConnectionOptions
from ..config import ConsumerConfig
from ..errors import KafkaError, KafkaTimeoutError
from ..structs import TopicPartition
from .group_members import GroupMembers
from .groups import TIMEOUT_SECONDS, members_and_offsets
from .run import CommandFailed
from .share_groups import ShareGroupView, ask_share_group

UNKNOWN_TOPIC_OR_PARTITION = 3
# Group states in which the group has no member (a reset is allowed then, as in Kafka's tool).
INACTIVE_STATES = frozenset({"Empty", "Dead"})


def admin_config(bootstrap: str) -> ConsumerConfig:
    """The settings these commands connect with; a ConfigError (a bad ``-b``) is a usage error.
    Topics are never auto-created: asking about a topic that does not exist must not create it."""
    return ConsumerConfig.from_properties({"bootstrap.servers": bootstrap, "client.id": "aiokafka-lite-cli",
                                           "default.api.timeout.ms": int(TIMEOUT_SECONDS * 1000),
                                           "allow.auto.create.topics": "false"})


@contextlib.asynccontextmanager
async def admin_cluster(bootstrap: str, timeout: float = TIMEOUT_SECONDS) -> AsyncIterator[Cluster]:
    """A bootstrapped Cluster, closed (every connection) on the way out."""
    config = admin_config(bootstrap)
    cluster = Cluster(ConnectionOptions.from_settings(config), config.bootstrap_servers)
    try:
        # Its own timeout error says why each server could not be reached.
        await cluster.bootstrap(timeout=timeout)
        yield cluster
    finally:
        await cluster.close()


@contextlib.asynccontextmanager
async def bounded(what: str, timeout: float = TIMEOUT_SECONDS) -> AsyncIterator[None]:
    """``timeout`` for the body; its lapse is a KafkaTimeoutError naming ``what``."""
    try:
        async with asyncio.timeout(timeout):
            yield
    except TimeoutError as exc:
        if isinstance(exc, KafkaError):
            raise
        raise KafkaTimeoutError(f"{what} did not complete within {timeout:g} s") from exc


async def existing_group(cluster: Cluster, group_id: str
                         ) -> tuple[GroupMembers, dict[TopicPartition, int], ShareGroupView | None]:
    """The group's members and committed offsets, and the share group (KIP-932) when it is one;
    CommandFailed when the broker knows no such group of any type and it has no committed offsets
    (as ``groups describe`` and kafka-consumer-groups.sh decide)."""
    group, committed = await members_and_offsets(cluster, group_id, [])
    share = None
    if not group.known and not committed:
        share = await ask_share_group(cluster, group_id)
        if share is None:
            raise CommandFailed(f"group {group_id!r} does not exist")
    return group, committed, share


async def topic_partitions(cluster: Cluster, topics: list[tuple[str, list[int] | None]]) -> list[TopicPartition]:
    """The partitions ``--topic T`` / ``--topic T:0,2`` name; CommandFailed for a topic or partition
    that does not exist (nothing is created)."""
    names = sorted({name for name, _ in topics})
    await cluster.refresh_metadata(names)
    found: set[TopicPartition] = set()
    for name, wanted in topics:
        existing = cluster.partitions_for(name)
        if existing is None or cluster.metadata.topic_error(name) == UNKNOWN_TOPIC_OR_PARTITION:
            raise CommandFailed(f"topic {name!r} does not exist")
        missing = sorted(set(wanted or ()) - existing)
        if missing:
            listed = ",".join(f"{name}-{p}" for p in missing)
            raise CommandFailed(f"partition(s) {listed} do not exist (topic {name!r} has {len(existing)})")
        found.update(TopicPartition(name, p) for p in (existing if wanted is None else wanted))
    return sorted(found)
