"""`aiokafka-lite groups list [--state S,...]`: every consumer group with its type, state and member
count, as kafka-consumer-groups.sh --list --state --type shows them (plus #MEMBERS, which Kafka's
tool gives only per group, with --describe --state).

Each broker coordinates some groups, so each is asked: ListGroups with the types filter (v5+,
KIP-848: classic and consumer groups) and the states filter (v4+, KIP-518); on older versions
the state comes from DescribeGroups and the filter is applied here. Classic groups of other
protocols (Kafka Connect's "connect", for instance) are left out, as Java's admin client leaves
them out of its consumer-group listing. Member counts come from one ConsumerGroupDescribe (consumer
groups) and one DescribeGroups (classic groups) per coordinator.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from .._net.cluster import Cluster
from ..errors import BrokerError, UnsupportedVersionError
from ..protocol.messages import CONSUMER_GROUP_DESCRIBE, DESCRIBE_GROUPS, LIST_GROUPS
from .group_admin import admin_cluster, bounded
from .groups import TIMEOUT_SECONDS
from .run import EXIT_OK, run_step_command

# The states of classic and consumer groups as the broker spells them (Kafka's GroupState).
STATES = ("Stable", "Empty", "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling", "Dead")
CONSUMER_PROTOCOL_TYPES = frozenset({"consumer", ""})  # "": a group that only ever committed offsets


@dataclass
class GroupListing:
    group_id: str
    group_type: str  # "classic" or "consumer" (KIP-848)
    state: str
    members: int | None  # None: the group went away between listing and describing it
    coordinator: int


def parse_states(text: str) -> set[str]:
    """``Stable,empty`` as the broker's spellings; ValueError naming the valid ones otherwise."""
    by_lower = {s.lower(): s for s in STATES}
    states = set()
    for item in text.split(","):
        state = by_lower.get(item.strip().lower())
        if state is None:
            raise ValueError(f"--state {item.strip()!r} is not a group state; valid: {', '.join(STATES)}")
        states.add(state)
    return states


async def _list_on(cluster: Cluster, node_id: int, states: set[str]) -> list[dict[str, Any]]:
    body = {"states_filter": sorted(states), "types_filter": ["classic", "consumer"]}
    response = await cluster.send(node_id, LIST_GROUPS, body)
    if response["error_code"]:
        raise BrokerError(response["error_code"], f"ListGroups on node {node_id}")
    return [g for g in response["groups"]
            if g.get("group_type", "").lower() == "consumer" or g["protocol_type"] in CONSUMER_PROTOCOL_TYPES]


async def _consumer_groups(cluster: Cluster, node_id: int, ids: list[str]) -> dict[str, tuple[str, int]]:
    if not ids:
        return {}
    try:
        response = await cluster.send(node_id, CONSUMER_GROUP_DESCRIBE,
                                      {"group_ids": ids, "include_authorized_operations": False})
    except UnsupportedVersionError:
        return {}
    return {g["group_id"]: (g["group_state"], len(g["members"])) for g in response["groups"] if not g["error_code"]}


async def _classic_groups(cluster: Cluster, node_id: int, ids: list[str]) -> dict[str, tuple[str, int]]:
    if not ids:
        return {}
    response = await cluster.send(node_id, DESCRIBE_GROUPS, {"groups": ids, "include_authorized_operations": False})
    return {g["group_id"]: (g["group_state"], len(g["members"])) for g in response["groups"]
            if not g["error_code"] and g["group_state"] != "Dead"}


async def _listings_on(cluster: Cluster, node_id: int, states: set[str]) -> list[GroupListing]:
    listed = await _list_on(cluster, node_id, states)
    # A broker without ListGroups v5 has no consumer-protocol groups: every group there is classic.
    types = {g["group_id"]: (g.get("group_type") or "classic").lower() for g in listed}
    described = await _consumer_groups(cluster, node_id, [g for g, t in types.items() if t == "consumer"])
    described |= await _classic_groups(cluster, node_id, [g for g, t in types.items() if t != "consumer"])
    listings = []
    for g in listed:
        listed_state = g.get("group_state") or ""
        state, members = described.get(g["group_id"], (listed_state or "Dead", None))
        # ListGroups' own state wins (it is what --state filtered on), unless it is none Kafka
        # names: Tansu 0.6 lists every group as "Unknown" though DescribeGroups says Empty.
        state = listed_state if listed_state in STATES else state
        if not states or state in states:
            listings.append(GroupListing(g["group_id"], types[g["group_id"]], state, members, node_id))
    return listings


async def list_groups(bootstrap: str, states: set[str] | None = None,
                      timeout: float = TIMEOUT_SECONDS) -> list[GroupListing]:
    """Every consumer group of the cluster (in ``states`` when given), sorted by id."""
    async with admin_cluster(bootstrap, timeout) as cluster, bounded("listing the groups", timeout):
        nodes = sorted(cluster.metadata.brokers)
        found = await asyncio.gather(*(_listings_on(cluster, node, states or set()) for node in nodes))
    return sorted((g for listings in found for g in listings), key=lambda g: g.group_id)


def render_text(groups: list[GroupListing], out: TextIO) -> None:
    out.write("GROUP  TYPE  STATE  MEMBERS\n")
    for g in groups:
        out.write(f"{g.group_id}  {g.group_type}  {g.state}  {'-' if g.members is None else g.members}\n")


def render_json(groups: list[GroupListing], out: TextIO) -> None:
    out.write(json.dumps([asdict(g) for g in groups], indent=2) + "\n")


def run_list(bootstrap: str, *, states: set[str], output_format: str) -> int:
    async def work() -> int:
        groups = await list_groups(bootstrap, states)
        (render_json if output_format == "json" else render_text)(groups, sys.stdout)
        return EXIT_OK

    return run_step_command("listing the groups", work)
